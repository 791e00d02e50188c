// The grove command on bad input: each case must give one clear message naming the file,
// node, op or input at fault, exit 1, and neither crash nor hang.
#include <gtest/gtest.h>

#include <random>

#include "cli_harness.h"
#include "npy/npy.h"

namespace grove::cli_test {
namespace {

constexpr int kFloat = onnx::TensorProto::FLOAT;

void expect_mentions(const Result& r, const std::vector<std::string>& texts) {
  for (const auto& t : texts) EXPECT_NE(r.err.find(t), std::string::npos) << "missing '" << t << "' in: " << r.err;
}

// y = Relu(image), image: [1, 3, 8, 8] float.
std::filesystem::path image_model(const TempDir& dir, const std::vector<std::string>& dims = {"1", "3", "8", "8"}) {
  ModelBuilder m;
  m.input("image", kFloat, dims).output("y", kFloat, dims).node("Relu", {"image"}, {"y"}, "relu1");
  return m.save(dir / "image.onnx");
}

std::string npy_of(const TempDir& dir, const std::string& name, DType dtype, Shape shape) {
  std::string path = (dir / name).string();
  write_npy(path, Tensor(dtype, std::move(shape)));
  return path;
}

TEST(CliBadInput, TruncatedProtobuf) {
  TempDir dir;
  std::string bytes = read_bytes(GROVE_MODELS_DIR "/default.onnx");
  for (size_t keep : {bytes.size() / 2, bytes.size() - 1, size_t{100}, size_t{3}}) {
    auto path = dir / ("cut" + std::to_string(keep) + ".onnx");
    write_bytes(path, bytes.substr(0, keep));
    Result r = run_grove({"run", path.string()});
    expect_clean_error(r);
    expect_mentions(r, {path.string()});
  }
}

TEST(CliBadInput, CorruptBytes) {
  TempDir dir;
  std::mt19937 rng(1);
  std::string noise(4096, '\0');
  for (char& c : noise) c = static_cast<char>(rng());
  write_bytes(dir / "noise.onnx", noise);
  write_bytes(dir / "text.onnx", "this is not a model\n");
  write_bytes(dir / "empty.onnx", "");
  // The default model with a stretch of its middle overwritten.
  std::string damaged = read_bytes(GROVE_MODELS_DIR "/default.onnx");
  for (size_t i = 0; i < 64; ++i) damaged[200 + i] = static_cast<char>(0xff);
  write_bytes(dir / "damaged.onnx", damaged);
  for (const char* name : {"noise.onnx", "text.onnx", "empty.onnx", "damaged.onnx"}) {
    Result r = run_grove({"info", (dir / name).string()});
    expect_clean_error(r);
    expect_mentions(r, {(dir / name).string()});
  }
}

TEST(CliBadInput, MissingModelFileAndDirectory) {
  TempDir dir;
  Result missing = run_grove({"run", (dir / "nope.onnx").string()});
  expect_clean_error(missing);
  expect_mentions(missing, {"nope.onnx"});
  Result directory = run_grove({"info", dir.path().string()});
  expect_clean_error(directory);
  expect_mentions(directory, {"directory"});
}

TEST(CliBadInput, MissingExternalDataFile) {
  TempDir dir;
  ModelBuilder m;
  m.input("x", kFloat, {"4"}).output("y", kFloat, {"4"}).node("Add", {"x", "w"}, {"y"}, "add");
  auto* w = m.proto().mutable_graph()->add_initializer();
  w->set_name("w");
  w->set_data_type(kFloat);
  w->add_dims(4);
  w->set_data_location(onnx::TensorProto::EXTERNAL);
  auto* location = w->add_external_data();
  location->set_key("location");
  location->set_value("weights.bin");
  auto path = m.save(dir / "ext.onnx");
  Result r = run_grove({"run", path.string()});
  expect_clean_error(r);
  expect_mentions(r, {"ext.onnx", "weights.bin", "'w'"});
}

// y = x + w with w's 16 bytes in external data at `location`.
std::filesystem::path external_data_model(const std::filesystem::path& path, const std::string& location) {
  ModelBuilder m;
  m.input("x", kFloat, {"4"}).output("y", kFloat, {"4"}).node("Add", {"x", "w"}, {"y"}, "add");
  auto* w = m.proto().mutable_graph()->add_initializer();
  w->set_name("w");
  w->set_data_type(kFloat);
  w->add_dims(4);
  w->set_data_location(onnx::TensorProto::EXTERNAL);
  auto* kv = w->add_external_data();
  kv->set_key("location");
  kv->set_value(location);
  return m.save(path);
}

// A model must not read files outside its directory into its weights (and so its outputs).
TEST(CliBadInput, HostileExternalDataPath) {
  TempDir dir;
  std::filesystem::create_directory(dir / "models");
  write_bytes(dir / "secret.bin", std::string(16, 's'));
  std::filesystem::create_symlink(dir / "secret.bin", dir / "models/link.bin");
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"/etc/passwd", "absolute"},
      {"../../../../etc/passwd", "'..'"},
      {"../secret.bin", "'..'"},
      {"link.bin", "outside the model's directory"},
  };
  for (const auto& [location, why] : cases) {
    auto model = external_data_model(dir / "models/m.onnx", location);
    for (const char* cmd : {"run", "info"}) {
      Result r = run_grove({cmd, model.string()});
      expect_clean_error(r);
      expect_mentions(r, {"m.onnx", "'w'", location, why});
    }
  }
}

TEST(CliBadInput, MemoryAndNodeLimits) {
  TempDir dir;
  auto model = image_model(dir);  // 1x3x8x8 float: 768 bytes in, 768 out
  Result ok = run_grove({"run", model.string(), "--max-memory", "1536"});
  EXPECT_EQ(ok.exit_code, 0) << ok.err;
  Result small = run_grove({"run", model.string(), "--max-memory", "1535"});
  expect_clean_error(small);
  expect_mentions(small, {"image.onnx", "relu1", "memory limit", "--max-memory"});
  Result input = run_grove({"run", model.string(), "--max-memory", "700"});
  expect_clean_error(input);
  expect_mentions(input, {"'image'", "--max-memory"});
  Result nodes = run_grove({"info", model.string(), "--max-nodes", "0"});
  EXPECT_EQ(nodes.exit_code, 2);  // not a positive number: a usage error
  ModelBuilder two;
  two.input("x", kFloat, {"4"}).output("y", kFloat, {"4"});
  two.node("Relu", {"x"}, {"a"}, "r1").node("Relu", {"a"}, {"y"}, "r2");
  Result many = run_grove({"plan", two.save(dir / "two.onnx").string(), "--max-nodes", "1"});
  expect_clean_error(many);
  expect_mentions(many, {"two.onnx", "2 nodes", "--max-nodes"});
  Result initializers = run_grove({"info", model.string(), "--max-initializers", "0"});
  EXPECT_EQ(initializers.exit_code, 2) << initializers.err;  // not a positive number: a usage error
  ModelBuilder weighted;
  weighted.input("x", kFloat, {"4"}).output("y", kFloat, {"4"});
  weighted.initializer("w", {4}, {1, 2, 3, 4}).initializer("v", {4}, {1, 2, 3, 4});
  weighted.node("Add", {"x", "w"}, {"a"}, "add_w").node("Add", {"a", "v"}, {"y"}, "add_v");
  Result weights = run_grove({"info", weighted.save(dir / "weighted.onnx").string(), "--max-initializers", "1"});
  expect_clean_error(weights);
  expect_mentions(weights, {"weighted.onnx", "2 initializers", "--max-initializers"});
  Result tiles = run_grove({"plan", model.string(), "--max-tiles", "1", "--tiles-per-op", "4"});
  expect_clean_error(tiles);
  expect_mentions(tiles, {"image.onnx", "relu1", "--max-tiles"});
}

// Out of memory during a run (here: under ulimit -v, a 1 GiB Tile output the limits allow)
// is a clean error naming the node, not a crash. Skipped under sanitizers, which reserve
// terabytes of address space for their shadow memory.
TEST(CliBadInput, OutOfMemoryDuringARunIsAnError) {
#if defined(__has_feature)  // clang spells the sanitizer checks this way
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer)
#define GROVE_TEST_SANITIZED 1
#endif
#endif
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__) || defined(GROVE_TEST_SANITIZED)
  GTEST_SKIP() << "address-space limits and sanitizers do not mix";
#endif
  TempDir dir;
  ModelBuilder m;
  m.input("x", kFloat, {"1024"}).output("y", kFloat, {"268435456"});
  auto* repeats = m.proto().mutable_graph()->add_initializer();
  repeats->set_name("repeats");
  repeats->set_data_type(onnx::TensorProto::INT64);
  repeats->add_dims(1);
  repeats->add_int64_data(262144);
  m.node("Tile", {"x", "repeats"}, {"y"}, "big_tile");
  auto model = m.save(dir / "tile.onnx");
  Result r = run_grove({"run", model.string(), "--threads", "1", "--max-memory", "100000000000"}, {}, 768 * 1024);
  expect_clean_error(r);
  expect_mentions(r, {"tile.onnx", "big_tile", "out of memory"});
}

TEST(CliBadInput, UnknownOp) {
  TempDir dir;
  ModelBuilder m;
  m.input("x", kFloat, {"4"}).output("y", kFloat, {"4"}).node("FancyOp", {"x"}, {"y"}, "fancy1");
  auto path = m.save(dir / "fancy.onnx");
  for (const char* cmd : {"info", "run"}) {
    Result r = run_grove({cmd, path.string()});
    expect_clean_error(r);
    expect_mentions(r, {"fancy.onnx", "FancyOp", "fancy1"});
  }
}

TEST(CliBadInput, NodeWithIncompatibleShapes) {
  TempDir dir;
  ModelBuilder m;
  m.input("x", kFloat, {"2", "3"}).output("y", kFloat, {"2", "3"});
  m.initializer("b", {4}, {1, 2, 3, 4}).node("Add", {"x", "b"}, {"y"}, "bad_add");
  auto path = m.save(dir / "shapes.onnx");
  Result r = run_grove({"run", path.string()});
  expect_clean_error(r);
  expect_mentions(r, {"shapes.onnx", "bad_add", "Add"});
}

TEST(CliBadInput, WrongInputName) {
  TempDir dir;
  auto model = image_model(dir);
  auto x = npy_of(dir, "x.npy", DType::f32, {1, 3, 8, 8});
  Result r = run_grove({"run", model.string(), "--input", "imagee=" + x});
  expect_clean_error(r);
  expect_mentions(r, {"'imagee'", "image.onnx", "inputs: image"});
  Result s = run_grove({"run", model.string(), "--shape", "imagee=1x3x8x8"});
  expect_clean_error(s);
  expect_mentions(s, {"'imagee'"});
}

TEST(CliBadInput, WrongRank) {
  TempDir dir;
  auto model = image_model(dir);
  auto x = npy_of(dir, "rank3.npy", DType::f32, {3, 8, 8});
  Result r = run_grove({"run", model.string(), "--input", "image=" + x});
  expect_clean_error(r);
  expect_mentions(r, {"rank3.npy", "'image'", "(rank 3)", "has rank 4"});
  Result s = run_grove({"run", model.string(), "--shape", "image=3x8x8"});
  expect_clean_error(s);
  expect_mentions(s, {"'image'", "rank 4"});
}

TEST(CliBadInput, WrongShape) {
  TempDir dir;
  auto model = image_model(dir);
  auto x = npy_of(dir, "small.npy", DType::f32, {1, 3, 4, 4});
  Result r = run_grove({"run", model.string(), "--input", "image=" + x});
  expect_clean_error(r);
  expect_mentions(r, {"small.npy", "'image'", "[1, 3, 4, 4]", "[1, 3, 8, 8]"});
  // A file that disagrees with --shape.
  auto dyn = image_model(dir, {"N", "3", "8", "8"});
  auto y = npy_of(dir, "two.npy", DType::f32, {2, 3, 8, 8});
  Result s = run_grove({"run", dyn.string(), "--input", "image=" + y, "--shape", "image=1x3x8x8"});
  expect_clean_error(s);
  expect_mentions(s, {"two.npy", "--shape image=1x3x8x8"});
}

TEST(CliBadInput, WrongDtype) {
  TempDir dir;
  auto model = image_model(dir);
  auto x = npy_of(dir, "ints.npy", DType::i64, {1, 3, 8, 8});
  Result r = run_grove({"run", model.string(), "--input", "image=" + x});
  expect_clean_error(r);
  expect_mentions(r, {"ints.npy", "'image'", "int64", "float32"});
}

TEST(CliBadInput, MalformedNpy) {
  TempDir dir;
  auto model = image_model(dir);
  std::string good = read_bytes(npy_of(dir, "good.npy", DType::f32, {1, 3, 8, 8}));
  std::string bad_header = good;
  bad_header.replace(10, 9, "{'descr' ");  // "{'descr':" loses its colon
  write_bytes(dir / "header.npy", bad_header);
  write_bytes(dir / "short.npy", good.substr(0, good.size() - 4));
  write_bytes(dir / "fortran.npy", std::string(good).replace(good.find("False"), 5, "True "));
  write_bytes(dir / "magic.npy", "PK\x03\x04 not numpy");
  struct Case {
    const char* file;
    const char* says;
  };
  for (auto [file, says] : {Case{"header.npy", "malformed"}, Case{"short.npy", "truncated"},
                            Case{"fortran.npy", "Fortran"}, Case{"magic.npy", "not a .npy"},
                            Case{"missing.npy", "cannot open"}}) {
    Result r = run_grove({"run", model.string(), "--input", "image=" + (dir / file).string()});
    expect_clean_error(r);
    expect_mentions(r, {file, says});
  }
}

TEST(CliBadInput, DynamicDimsWithoutShape) {
  TempDir dir;
  auto model = image_model(dir, {"batch", "3", "height", "width"});
  Result r = run_grove({"run", model.string()});
  expect_clean_error(r);
  expect_mentions(r, {"image.onnx", "'image'", "batch", "height", "--shape"});
}

TEST(CliBadInput, AbsurdInputShape) {
  TempDir dir;
  // 2^40 x 2^40 elements: the count overflows int64, which must not read as an empty tensor.
  auto model = image_model(dir, {"N", "M"});
  Result overflow = run_grove({"run", model.string(), "--shape", "image=1099511627776x1099511627776"});
  expect_clean_error(overflow);
  expect_mentions(overflow, {"'image'", "--shape"});
  Result huge = run_grove({"run", model.string(), "--shape", "image=100000x10000000"});
  expect_clean_error(huge);
  expect_mentions(huge, {"'image'", "elements"});
}

TEST(CliBadInput, BadOptionValues) {
  TempDir dir;
  auto model = image_model(dir);
  Result shape = run_grove({"run", model.string(), "--shape", "image=1x3xeightx8"});
  expect_clean_error(shape);
  expect_mentions(shape, {"image=1x3xeightx8"});
  Result twice = run_grove({"run", model.string(), "--shape", "image=1x3x8x8", "--shape", "image=1x3x8x8"});
  expect_clean_error(twice);
  expect_mentions(twice, {"twice"});
  // --output where a regular file already sits.
  write_bytes(dir / "afile", "x");
  Result out = run_grove({"run", model.string(), "--output", (dir / "afile").string()});
  expect_clean_error(out);
  expect_mentions(out, {"afile"});
}

// A zero quantization scale: as a constant it is caught before running, as an input when the
// node runs; both name the node and op.
TEST(CliBadInput, ZeroQuantizationScale) {
  TempDir dir;
  constexpr int kUint8 = onnx::TensorProto::UINT8;
  ModelBuilder constant;
  constant.input("x", kFloat, {"4"}).output("q", kUint8, {"4"}).initializer("scale", {}, {0.0f});
  constant.node("QuantizeLinear", {"x", "scale"}, {"q"}, "quant1");
  auto constant_path = constant.save(dir / "zero_scale.onnx");
  Result r = run_grove({"run", constant_path.string(), "--input", "x=" + npy_of(dir, "x.npy", DType::f32, {4})});
  expect_clean_error(r);
  expect_mentions(r, {"quant1", "QuantizeLinear", "y_scale", "non-zero"});

  ModelBuilder runtime;
  runtime.input("x", kFloat, {"4"}).input("scale", kFloat, {}).output("q", kUint8, {"4"});
  runtime.node("QuantizeLinear", {"x", "scale"}, {"q"}, "quant2");
  auto runtime_path = runtime.save(dir / "zero_scale_input.onnx");
  Result s = run_grove({"run", runtime_path.string(), "--input", "x=" + npy_of(dir, "x.npy", DType::f32, {4}),
                        "--input", "scale=" + npy_of(dir, "scale.npy", DType::f32, {})});
  expect_clean_error(s);
  expect_mentions(s, {"quant2", "QuantizeLinear", "y_scale", "non-zero"});
}

// A subgraph attribute (If's branches, Loop's body) holding `g`.
void attach_graph(onnx::NodeProto& node, const std::string& name, const onnx::GraphProto& g) {
  auto* a = node.add_attribute();
  a->set_name(name);
  a->set_type(onnx::AttributeProto::GRAPH);
  *a->mutable_g() = g;
}

void add_output(onnx::GraphProto& g, const std::string& name, int elem_type) {
  auto* v = g.add_output();
  v->set_name(name);
  v->mutable_type()->mutable_tensor_type()->set_elem_type(elem_type);
}

// Control flow and sequences, the features where a model can be wrong only at run time:
// each is one message naming the node and op.
TEST(CliBadInput, IfBranchesThatDisagreeInOutputCount) {
  TempDir dir;
  ModelBuilder m;
  m.input("x", kFloat, {"2"}).input("c", onnx::TensorProto::BOOL, {}).output("y", kFloat, {"2"});
  onnx::GraphProto then_g, else_g;
  auto* relu = then_g.add_node();
  relu->set_op_type("Relu");
  relu->add_input("x");
  relu->add_output("t");
  add_output(then_g, "t", kFloat);
  add_output(then_g, "x", kFloat);  // one output too many
  auto* neg = else_g.add_node();
  neg->set_op_type("Neg");
  neg->add_input("x");
  neg->add_output("e");
  add_output(else_g, "e", kFloat);
  m.node("If", {"c"}, {"y"}, "choose");
  auto& node = *m.proto().mutable_graph()->mutable_node(0);
  attach_graph(node, "then_branch", then_g);
  attach_graph(node, "else_branch", else_g);
  Result r = run_grove({"run", m.save(dir / "if.onnx").string(), "--input", "x=" + npy_of(dir, "x.npy", DType::f32, {2}),
                        "--input", "c=" + npy_of(dir, "c.npy", DType::boolean, {})});
  expect_clean_error(r);
  expect_mentions(r, {"'choose' (If)", "then_branch gives 2 outputs, the node has 1"});
}

TEST(CliBadInput, LoopWithANegativeTripCountAndNoCondition) {
  TempDir dir;
  ModelBuilder m;
  m.input("m", onnx::TensorProto::INT64, {}).input("x", kFloat, {"2"}).output("y", kFloat, {"2"});
  onnx::GraphProto body;
  const std::vector<std::pair<std::string, int>> formal = {
      {"i", onnx::TensorProto::INT64}, {"cond_in", onnx::TensorProto::BOOL}, {"x_in", kFloat}};
  for (const auto& [name, type] : formal) {
    auto* v = body.add_input();
    v->set_name(name);
    v->mutable_type()->mutable_tensor_type()->set_elem_type(type);
  }
  auto* id = body.add_node();
  id->set_op_type("Identity");
  id->add_input("cond_in");
  id->add_output("cond_out");
  auto* neg = body.add_node();
  neg->set_op_type("Neg");
  neg->add_input("x_in");
  neg->add_output("x_out");
  add_output(body, "cond_out", onnx::TensorProto::BOOL);
  add_output(body, "x_out", kFloat);
  m.node("Loop", {"m", "", "x"}, {"y"}, "repeat");
  attach_graph(*m.proto().mutable_graph()->mutable_node(0), "body", body);
  Tensor minus_one = Tensor::scalar<int64_t>(-1);
  write_npy((dir / "m.npy").string(), minus_one);
  Result r = run_grove({"run", m.save(dir / "loop.onnx").string(), "--input", "m=" + (dir / "m.npy").string(),
                        "--input", "x=" + npy_of(dir, "x.npy", DType::f32, {2})});
  expect_clean_error(r);
  expect_mentions(r, {"'repeat' (Loop)", "trip count M is -1"});
}

TEST(CliBadInput, Float16ModelFedFloat64) {
  TempDir dir;
  constexpr int kFloat16 = onnx::TensorProto::FLOAT16;
  ModelBuilder m;
  m.input("x", kFloat16, {"4"}).output("y", kFloat16, {"4"}).node("Relu", {"x"}, {"y"}, "relu1");
  Result r = run_grove({"run", m.save(dir / "half.onnx").string(), "--input", "x=" + npy_of(dir, "x.npy", DType::f64, {4})});
  expect_clean_error(r);
  expect_mentions(r, {"'x'", "float16", "float64"});
}

TEST(CliBadInput, SequencesTheCliCannotCarryAndPositionsOutOfRange) {
  TempDir dir;
  ModelBuilder seq_out;
  seq_out.input("x", kFloat, {"4", "3"});
  auto* out = seq_out.proto().mutable_graph()->add_output();
  out->set_name("rows");
  out->mutable_type()->mutable_sequence_type()->mutable_elem_type()->mutable_tensor_type()->set_elem_type(kFloat);
  seq_out.node("SplitToSequence", {"x"}, {"rows"}, "split");
  Result r = run_grove({"run", seq_out.save(dir / "seq.onnx").string(), "--input",
                        "x=" + npy_of(dir, "x.npy", DType::f32, {4, 3})});
  expect_clean_error(r);
  expect_mentions(r, {"'rows'", "sequence"});

  ModelBuilder seq_in;
  auto* in = seq_in.proto().mutable_graph()->add_input();
  in->set_name("parts");
  in->mutable_type()->mutable_sequence_type()->mutable_elem_type()->mutable_tensor_type()->set_elem_type(kFloat);
  seq_in.output("y", kFloat, {"3"});
  seq_in.node("ConcatFromSequence", {"parts"}, {"y"}, "join");
  auto* axis = seq_in.proto().mutable_graph()->mutable_node(0)->add_attribute();
  axis->set_name("axis");
  axis->set_type(onnx::AttributeProto::INT);
  axis->set_i(0);
  Result q = run_grove({"run", seq_in.save(dir / "seq_in.onnx").string()});
  expect_clean_error(q);
  expect_mentions(q, {"input 'parts' is a sequence", "Session::run_values"});

  ModelBuilder at;
  at.input("x", kFloat, {"4", "3"}).output("y", kFloat, {"3"});
  auto* pos = at.proto().mutable_graph()->add_initializer();
  pos->set_name("nine");
  pos->set_data_type(onnx::TensorProto::INT64);
  pos->add_int64_data(9);
  at.node("SplitToSequence", {"x"}, {"rows"}, "split").node("SequenceAt", {"rows", "nine"}, {"y"}, "pick");
  Result s = run_grove({"run", at.save(dir / "at.onnx").string(), "--input", "x=" + npy_of(dir, "x.npy", DType::f32, {4, 3})});
  expect_clean_error(s);
  expect_mentions(s, {"'pick' (SequenceAt)", "position 9 is out of range"});
}

}  // namespace
}  // namespace grove::cli_test

namespace grove::cli_test {
namespace {

// grove quantize on bad calibration input: a missing or empty directory, a sample that does
// not fit the model, a multi-input model given bare .npy files, and an opset without
// QuantizeLinear. Then a small conv model quantizes, runs and still reads its input.
std::filesystem::path conv_model(const TempDir& dir, int opset = 13) {
  ModelBuilder m(opset);
  m.input("image", onnx::TensorProto::FLOAT, {"1", "2", "5", "5"}).output("y", onnx::TensorProto::FLOAT, {"1", "3", "5", "5"});
  std::vector<float> w(3 * 2 * 3 * 3);
  for (size_t i = 0; i < w.size(); ++i) w[i] = 0.1f * static_cast<float>(static_cast<int>(i % 7) - 3);
  m.initializer("w", {3, 2, 3, 3}, w);
  m.initializer("b", {3}, {0.5f, -0.25f, 0.0f});
  auto& conv = *m.proto().mutable_graph()->add_node();
  conv.set_op_type("Conv");
  conv.set_name("conv");
  for (const char* in : {"image", "w", "b"}) conv.add_input(in);
  conv.add_output("c");
  auto* pads = conv.add_attribute();
  pads->set_name("pads");
  pads->set_type(onnx::AttributeProto::INTS);
  for (int i = 0; i < 4; ++i) pads->add_ints(1);
  m.node("Relu", {"c"}, {"r"}, "relu").node("Sigmoid", {"r"}, {"y"}, "sigmoid");
  return m.save(dir / "conv.onnx");
}

TEST(CliQuantize, BadCalibrationInputIsACleanError) {
  TempDir dir;
  auto model = conv_model(dir);
  const std::string out = (dir / "q.onnx").string();
  Result missing = run_grove({"quantize", model.string(), "--calibrate", (dir / "nope").string(), "-o", out});
  expect_clean_error(missing);
  expect_mentions(missing, {"nope", "not a directory"});

  std::filesystem::create_directory(dir / "empty");
  Result empty = run_grove({"quantize", model.string(), "--calibrate", (dir / "empty").string(), "-o", out});
  expect_clean_error(empty);
  expect_mentions(empty, {"no samples"});

  std::filesystem::create_directory(dir / "wrong");
  write_npy((dir / "wrong" / "a.npy").string(), Tensor(DType::f32, {1, 2, 4, 4}));
  Result wrong = run_grove({"quantize", model.string(), "--calibrate", (dir / "wrong").string(), "-o", out});
  expect_clean_error(wrong);
  expect_mentions(wrong, {"a.npy", "'image'"});

  auto old = conv_model(dir, 9);
  std::filesystem::create_directory(dir / "good");
  write_npy((dir / "good" / "a.npy").string(), Tensor(DType::f32, {1, 2, 5, 5}));
  Result opset = run_grove({"quantize", old.string(), "--calibrate", (dir / "good").string(), "-o", out});
  expect_clean_error(opset);
  expect_mentions(opset, {"opset 9", "QuantizeLinear"});
  EXPECT_FALSE(std::filesystem::exists(out));
}

TEST(CliQuantize, WritesAQdqModelThatRuns) {
  TempDir dir;
  auto model = conv_model(dir);
  std::filesystem::create_directory(dir / "samples");
  for (int s = 0; s < 3; ++s) {
    Tensor t(DType::f32, {1, 2, 5, 5});
    for (int64_t i = 0; i < t.numel(); ++i) t.data<float>()[i] = static_cast<float>((i * 7 + s) % 11) / 5.0f - 1.0f;
    write_npy((dir / "samples" / ("s" + std::to_string(s) + ".npy")).string(), t);
  }
  const std::string out = (dir / "q.onnx").string();
  Result q = run_grove({"quantize", model.string(), "--calibrate", (dir / "samples").string(), "-o", out,
                        "--method", "percentile", "--percentile", "99.9"});
  ASSERT_EQ(q.exit_code, 0) << q.err;
  EXPECT_NE(q.out.find("calibrating on 3 samples"), std::string::npos) << q.out;
  EXPECT_NE(q.out.find("quantized 1 nodes (1 Conv"), std::string::npos) << q.out;
  onnx::ModelProto written;
  ASSERT_TRUE(written.ParseFromString(read_bytes(out)));
  int quantize = 0, dequantize = 0;
  for (const auto& n : written.graph().node()) {
    quantize += n.op_type() == "QuantizeLinear";
    dequantize += n.op_type() == "DequantizeLinear";
  }
  EXPECT_EQ(quantize, 2);    // the input and the Relu's output
  EXPECT_EQ(dequantize, 4);  // those two, the weights and the bias
  for (const auto& t : written.graph().initializer()) EXPECT_NE(t.name(), "w") << "the float weights stay in the model";
  Result run = run_grove({"run", out, "--input", "image=" + (dir / "samples" / "s0.npy").string()});
  EXPECT_EQ(run.exit_code, 0) << run.err;
}

}  // namespace
}  // namespace grove::cli_test
