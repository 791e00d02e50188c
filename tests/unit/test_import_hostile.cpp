// Hostile model files: external data must stay inside the model's directory and within its
// file, and declared sizes must be backed by data and fit the limits (docs/security.md).
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "onnx/import.h"
#include "onnx_builder.h"

using namespace grove;
using grove::test::OnnxBuilder;
namespace fs = std::filesystem;

namespace {
constexpr int kFloat = onnx::TensorProto::FLOAT;

// A fresh directory tree per test: <root>/models/ holds the model, <root>/secret.bin lies
// outside it.
class Sandbox {
 public:
  explicit Sandbox(const std::string& name)
      : root_(fs::temp_directory_path() / ("grove_hostile_" + name + "_" + std::to_string(::getpid()))) {
    fs::remove_all(root_);
    fs::create_directories(root_ / "models" / "sub");
    write(root_ / "secret.bin", std::string(8, 's'));
    write(root_ / "models" / "weights.bin", std::string(8, 'w'));
  }
  ~Sandbox() { fs::remove_all(root_); }
  fs::path model() const { return root_ / "models" / "model.onnx"; }
  fs::path operator/(const std::string& p) const { return root_ / p; }
  static void write(const fs::path& path, const std::string& bytes) {
    std::ofstream f(path, std::ios::binary);
    f << bytes;
  }

 private:
  fs::path root_;
};

// y = x + w, w: float[2] in external data at `location` (with optional offset/length).
std::string external_model(const std::string& location, const std::string& offset = "",
                           const std::string& length = "") {
  OnnxBuilder b;
  b.input("x", kFloat, {2}).output("y", kFloat, {2});
  b.node("Add", {"x", "w"}, {"y"}, "add");
  auto* t = b.proto().mutable_graph()->add_initializer();
  t->set_name("w");
  t->set_data_type(kFloat);
  t->add_dims(2);
  t->set_data_location(onnx::TensorProto::EXTERNAL);
  auto kv = [&](const char* k, const std::string& v) {
    auto* e = t->add_external_data();
    e->set_key(k);
    e->set_value(v);
  };
  kv("location", location);
  if (!offset.empty()) kv("offset", offset);
  if (!length.empty()) kv("length", length);
  return b.bytes();
}

std::string load_error(const std::string& bytes, const fs::path& model, const Limits& limits = {}) {
  try {
    load_onnx_bytes(bytes, model.string(), limits);
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

void expect_error(const std::string& msg, std::initializer_list<const char*> parts) {
  ASSERT_FALSE(msg.empty()) << "the model loaded";
  for (const char* p : parts) EXPECT_NE(msg.find(p), std::string::npos) << "missing '" << p << "' in: " << msg;
}

}  // namespace

TEST(ImportHostile, ExternalDataInsideTheDirectoryLoads) {
  Sandbox box("inside");
  Graph g = load_onnx_bytes(external_model("weights.bin"), box.model().string());
  EXPECT_EQ(g.initializers.at("w").bytes(), 8u);
  Sandbox::write(box / "models/sub/w2.bin", std::string(12, 'v'));
  // A subdirectory, and a ./ prefix, are fine; so is a symlink that stays inside.
  EXPECT_NO_THROW(load_onnx_bytes(external_model("sub/w2.bin", "4"), box.model().string()));
  EXPECT_NO_THROW(load_onnx_bytes(external_model("./sub/w2.bin", "0", "8"), box.model().string()));
  fs::create_symlink("weights.bin", box / "models/inner_link.bin");
  EXPECT_NO_THROW(load_onnx_bytes(external_model("inner_link.bin"), box.model().string()));
}

TEST(ImportHostile, AbsoluteLocationIsRejected) {
  Sandbox box("absolute");
  expect_error(load_error(external_model("/etc/passwd"), box.model()), {"model.onnx", "'w'", "absolute"});
  // Even an absolute path that points inside the model's own directory.
  expect_error(load_error(external_model((box / "models/weights.bin").string()), box.model()), {"absolute"});
}

TEST(ImportHostile, DotDotEscapeIsRejected) {
  Sandbox box("dotdot");
  for (const char* loc : {"../secret.bin", "../../../../etc/passwd", "sub/../../secret.bin", "sub/../weights.bin"})
    expect_error(load_error(external_model(loc), box.model()), {"model.onnx", "'w'", "'..'"});
}

TEST(ImportHostile, SymlinkEscapeIsRejected) {
  Sandbox box("symlink");
  fs::create_symlink(box / "secret.bin", box / "models/link.bin");
  expect_error(load_error(external_model("link.bin"), box.model()), {"'w'", "outside the model's directory"});
  fs::create_symlink("/etc", box / "models/etc");
  expect_error(load_error(external_model("etc/passwd"), box.model()), {"outside the model's directory"});
  fs::create_directory_symlink(box.model().parent_path().parent_path(), box / "models/up");
  expect_error(load_error(external_model("up/secret.bin"), box.model()), {"outside the model's directory"});
}

TEST(ImportHostile, ExternalDataMustBeARegularFile) {
  Sandbox box("special");
  expect_error(load_error(external_model("sub"), box.model()), {"not a regular file"});
  ASSERT_EQ(::mkfifo((box / "models/fifo").c_str(), 0600), 0);
  expect_error(load_error(external_model("fifo"), box.model()), {"not a regular file"});  // and no hang
  expect_error(load_error(external_model(""), box.model()), {"no location"});
  expect_error(load_error(external_model("nope.bin"), box.model()), {"nope.bin", "missing"});
}

TEST(ImportHostile, OffsetAndLengthAreCheckedAgainstTheFile) {
  Sandbox box("range");
  // weights.bin holds 8 bytes; w needs 8.
  expect_error(load_error(external_model("weights.bin", "4"), box.model()), {"holds 4 bytes", "needs 8"});
  expect_error(load_error(external_model("weights.bin", "9"), box.model()), {"too short"});
  expect_error(load_error(external_model("weights.bin", "4", "8"), box.model()), {"too short"});
  expect_error(load_error(external_model("weights.bin", "0", "4"), box.model()), {"holds 4 bytes"});
  // offset + length overflowing int64 must not wrap into range.
  expect_error(load_error(external_model("weights.bin", "8", "9223372036854775807"), box.model()), {"too short"});
  for (const char* bad : {"-1", "abc", "4x", "99999999999999999999"})
    expect_error(load_error(external_model("weights.bin", bad), box.model()), {"offset", "not a non-negative integer"});
  expect_error(load_error(external_model("weights.bin", "0", "-8"), box.model()), {"length"});
}

TEST(ImportHostile, DeclaredSizeMustBeBackedByData) {
  // Typed fields: dims claiming a terabyte with two values must not allocate.
  OnnxBuilder b;
  b.input("x", kFloat, {2}).output("y", kFloat, {2});
  b.node("Add", {"x", "w"}, {"y"}, "add");
  b.initializer_f32("w", {1 << 20, 1 << 20}, {1.f, 2.f}, false);
  expect_error(load_error(b.bytes(), "big.onnx"), {"big.onnx", "'w'", "holds 2 values"});
  b.proto().mutable_graph()->mutable_initializer(0)->set_raw_data(std::string(8, '\0'));
  expect_error(load_error(b.bytes(), "big.onnx"), {"'w'", "holds 8 bytes"});
}

TEST(ImportHostile, OverflowingDimsAreErrors) {
  OnnxBuilder b;
  b.input("x", kFloat, {2}).output("y", kFloat, {2});
  b.node("Add", {"x", "w"}, {"y"}, "add");
  // 2^32 * 2^32 wraps int64 to 0, which matches an empty raw_data.
  auto& w = b.initializer_f32("w", {int64_t{1} << 32, int64_t{1} << 32}, {});
  expect_error(load_error(b.bytes(), "wrap.onnx"), {"'w'", "too many elements"});
  w.clear_dims();
  w.add_dims(-2);
  w.add_dims(-4);
  expect_error(load_error(b.bytes(), "wrap.onnx"), {"'w'", "negative"});
}

TEST(ImportHostile, InitializersAreChargedToTheMemoryLimit) {
  OnnxBuilder b;
  b.input("x", kFloat, {256}).output("y", kFloat, {256});
  b.node("Add", {"x", "w"}, {"y"}, "add");
  b.initializer_f32("w", {256}, std::vector<float>(256, 1.f));
  EXPECT_NO_THROW(load_onnx_bytes(b.bytes(), "m.onnx", {.max_memory = 1024}));
  expect_error(load_error(b.bytes(), "m.onnx", {.max_memory = 1023}), {"m.onnx", "'w'", "memory limit", "--max-memory"});
}

TEST(ImportHostile, NodeCountAndSubgraphDepthAreLimited) {
  OnnxBuilder b;
  b.input("x", kFloat, {2}).output("y", kFloat, {2});
  b.node("Relu", {"x"}, {"a"}, "r1");
  b.node("Relu", {"a"}, {"y"}, "r2");
  EXPECT_NO_THROW(load_onnx_bytes(b.bytes(), "m.onnx", {.max_nodes = 2}));
  expect_error(load_error(b.bytes(), "m.onnx", {.max_nodes = 1}), {"m.onnx", "2 nodes", "--max-nodes"});

  // If nodes nested 20 deep: each then_branch holds the next.
  OnnxBuilder nested;
  nested.input("c", onnx::TensorProto::BOOL, {}).output("y", kFloat, {2});
  onnx::NodeProto* node = &nested.node("If", {"c"}, {"y"}, "if0");
  for (int depth = 1; depth <= 20; ++depth) {
    auto* attr = node->add_attribute();
    attr->set_name("then_branch");
    attr->set_type(onnx::AttributeProto::GRAPH);
    node = attr->mutable_g()->add_node();
    node->set_op_type("If");
    node->set_name("if" + std::to_string(depth));
  }
  expect_error(load_error(nested.bytes(), "deep.onnx"), {"deep.onnx", "nest deeper than 16"});
  // Within the depth limit, the nodes inside subgraphs count too.
  expect_error(load_error(nested.bytes(), "deep.onnx", {.max_nodes = 10, .max_subgraph_depth = 30}), {"21 nodes"});
}

// Initializers are counted, and their declared bytes summed, on the protobuf before any graph
// is built: a file that declares too many, or too many bytes in all, is refused with the count
// (or the bytes, and the largest initializer) and the limit. The large sizes here point at an
// external file that does not exist, so an error about that file would mean the graph was
// being built first.
TEST(ImportHostile, InitializerCountAndDeclaredBytesAreCheckedBeforeTheGraphIsBuilt) {
  OnnxBuilder b;
  b.input("x", kFloat, {4}).output("y", kFloat, {4});
  b.node("Add", {"x", "a"}, {"s"}, "add_a");
  b.node("Add", {"s", "b"}, {"t"}, "add_b");
  b.node("Add", {"t", "c"}, {"y"}, "add_c");
  b.initializer_f32("a", {4}, {1, 2, 3, 4});
  b.initializer_f32("b", {4}, {1, 2, 3, 4});
  // c, a Constant node's tensor: it counts as an initializer too.
  auto& constant = b.node("Constant", {}, {"c"}, "const_c");
  auto* value = constant.add_attribute();
  value->set_name("value");
  value->set_type(onnx::AttributeProto::TENSOR);
  value->mutable_t()->set_data_type(kFloat);
  value->mutable_t()->add_dims(4);
  for (float v : {1.f, 2.f, 3.f, 4.f}) value->mutable_t()->add_float_data(v);
  EXPECT_NO_THROW(load_onnx_bytes(b.bytes(), "m.onnx", {.max_initializers = 3}));
  expect_error(load_error(b.bytes(), "m.onnx", {.max_initializers = 2}),
               {"m.onnx: the model has 3 initializers and constant tensors, over the limit of 2", "--max-initializers"});

  // 2^36 floats (256 GiB) in external data beside 2^30 (4 GiB), over a 4 GiB limit together:
  // refused by their sum, naming the largest, before either's file is opened (there is none).
  OnnxBuilder big;
  big.input("x", kFloat, {1}).output("y", kFloat, {1});
  big.node("Add", {"x", "huge"}, {"s"}, "add_huge");
  big.node("Add", {"s", "large"}, {"y"}, "add_large");
  for (auto [name, count] : {std::pair<const char*, int64_t>{"large", int64_t{1} << 30}, {"huge", int64_t{1} << 36}}) {
    auto& t = big.initializer_f32(name, {count}, {});
    t.set_data_location(onnx::TensorProto::EXTERNAL);
    auto* e = t.add_external_data();
    e->set_key("location");
    e->set_value("absent.bin");
  }
  const std::string msg = load_error(big.bytes(), "big.onnx", {.max_memory = int64_t{1} << 32});
  expect_error(msg, {"big.onnx: the model's initializers and constant tensors declare 279172874240 bytes (the largest, "
                     "'huge', 274877906944), over the memory limit of 4294967296 bytes", "--max-memory"});
  EXPECT_EQ(msg.find("absent.bin"), std::string::npos) << msg;
  // Each alone within the limit, the two together not: 3 KiB each under 4 KiB, in the file.
  OnnxBuilder pair;
  pair.input("x", kFloat, {768}).output("y", kFloat, {768});
  pair.node("Add", {"x", "p"}, {"s"}, "add_p");
  pair.node("Add", {"s", "q"}, {"y"}, "add_q");
  pair.initializer_f32("p", {768}, std::vector<float>(768, 1.f));
  pair.initializer_f32("q", {768}, std::vector<float>(768, 2.f));
  expect_error(load_error(pair.bytes(), "pair.onnx", {.max_memory = 4096}),
               {"pair.onnx: the model's initializers and constant tensors declare 6144 bytes", "over the memory limit of 4096"});
}

// Found by fuzz/fuzz_model: a node with fewer inputs or outputs than its op has must be an
// error at import, not an out-of-bounds write in the op's shape rule.
TEST(ImportHostile, NodeArityCheckedAgainstTheOpSchema) {
  OnnxBuilder b;
  b.input("x", kFloat, {2}).output("y", kFloat, {2});
  b.node("Gather", {"x", "x"}, {}, "g");
  b.node("Relu", {"x"}, {"y"}, "r");
  expect_error(load_error(b.bytes(), "arity.onnx"), {"arity.onnx", "node 'g' (Gather)", "has 0 outputs", "allows 1"});
  OnnxBuilder c;
  c.input("x", kFloat, {2}).output("y", kFloat, {2});
  c.node("Add", {"x"}, {"y"}, "add");
  expect_error(load_error(c.bytes(), "arity.onnx"), {"node 'add' (Add)", "has 1 inputs", "allows 2"});
  OnnxBuilder d;
  d.input("x", kFloat, {2}).output("y", kFloat, {2});
  d.node("Relu", {"x", "x"}, {"y"}, "relu");
  expect_error(load_error(d.bytes(), "arity.onnx"), {"node 'relu' (Relu)", "has 2 inputs"});
}

// Found by fuzz/fuzz_model in CI: a model without opset_import (opset 1) holding an op of a
// later opset found no schema at its opset, so the check was skipped and LayerNormalization's
// shape rule indexed an output the node does not have.
TEST(ImportHostile, NodeArityOfAnOpNewerThanTheModelsOpset) {
  OnnxBuilder b;
  b.input("x", kFloat, {2, 4}).output("y", kFloat, {2, 4});
  b.node("LayerNormalization", {"x", "x"}, {}, "ln");
  b.node("Relu", {"x"}, {"y"}, "r");
  b.proto().clear_opset_import();
  expect_error(load_error(b.bytes(), "arity.onnx"), {"node 'ln' (LayerNormalization)", "has 0 outputs"});
}

// Found by fuzz/fuzz_model: an opset_import with version 0 found no schema, so the arity check
// above was skipped.
TEST(ImportHostile, OpsetVersionMustBePositive) {
  OnnxBuilder b;
  b.input("x", kFloat, {2}).output("y", kFloat, {2});
  b.node("Relu", {"x"}, {"y"}, "r");
  b.proto().mutable_opset_import(0)->set_version(0);
  expect_error(load_error(b.bytes(), "opset.onnx"), {"opset.onnx", "invalid version 0"});
}
