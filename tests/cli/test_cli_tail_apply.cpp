// grove tail --apply: a model written with its layers resized. Growing must not change what
// the model computes (new channels' weights in their readers are zero); pruning keeps the
// channels with the largest L1 norm; a layer whose channels the rewrite cannot follow is kept
// with a note; bad input is a one-line error.
#include <gtest/gtest.h>

#include <cmath>
#include <random>

#include "cli_harness.h"
#include "grove/grove.h"
#include "onnx/import.h"

namespace grove::cli_test {
// Named, not anonymous: the CLI tests compile as unity batches, where helpers of the same name
// in other files' unnamed namespaces would clash.
namespace tail_apply_test {

constexpr int kFloat = onnx::TensorProto::FLOAT;

std::vector<float> random_values(size_t n, uint32_t seed, float lo = -1, float hi = 1) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> d(lo, hi);
  std::vector<float> v(n);
  for (auto& x : v) x = d(rng);
  return v;
}

void set_ints(ModelBuilder& m, const std::string& attr, const std::vector<int64_t>& values) {
  auto* a = m.proto().mutable_graph()->mutable_node(m.proto().graph().node_size() - 1)->add_attribute();
  a->set_name(attr);
  a->set_type(onnx::AttributeProto::INTS);
  for (int64_t v : values) a->add_ints(v);
}

void set_int(ModelBuilder& m, const std::string& attr, int64_t value) {
  auto* a = m.proto().mutable_graph()->mutable_node(m.proto().graph().node_size() - 1)->add_attribute();
  a->set_name(attr);
  a->set_type(onnx::AttributeProto::INT);
  a->set_i(value);
}

// Channel c of conv1's weights is scaled by kConv1Scale[c]: its L1 norm ranks it.
const std::vector<float> kConv1Scale = {0.1f, 2, 0.3f, 4, 0.5f, 6, 0.7f, 8};

// x[1,3,8,8] -> conv1(8, bias) -> BN -> Relu -> conv2(6, bias) -> Relu -> MaxPool 2x2 ->
// conv3(5, 1x1) -> Relu -> GlobalAveragePool -> Flatten -> fc(4) -> y.
ModelBuilder cnn() {
  ModelBuilder m;
  m.input("x", kFloat, {"1", "3", "8", "8"}).output("y", kFloat, {"1", "4"});
  std::vector<float> w1 = random_values(8 * 27, 1);
  for (size_t i = 0; i < w1.size(); ++i) w1[i] *= kConv1Scale[i / 27];
  m.initializer("conv1.weight", {8, 3, 3, 3}, w1).initializer("conv1.bias", {8}, random_values(8, 2));
  m.initializer("bn.scale", {8}, random_values(8, 3, 0.5f, 1.5f)).initializer("bn.bias", {8}, random_values(8, 4));
  m.initializer("bn.mean", {8}, random_values(8, 5)).initializer("bn.var", {8}, random_values(8, 6, 0.5f, 2));
  m.initializer("conv2.weight", {6, 8, 3, 3}, random_values(6 * 72, 7)).initializer("conv2.bias", {6}, random_values(6, 8));
  m.initializer("conv3.weight", {5, 6, 1, 1}, random_values(30, 9));
  m.initializer("fc.weight", {4, 5}, random_values(20, 10)).initializer("fc.bias", {4}, random_values(4, 11));
  m.node("Conv", {"x", "conv1.weight", "conv1.bias"}, {"a1"}, "conv1");
  set_ints(m, "pads", {1, 1, 1, 1});
  m.node("BatchNormalization", {"a1", "bn.scale", "bn.bias", "bn.mean", "bn.var"}, {"a2"}, "bn");
  m.node("Relu", {"a2"}, {"a3"}, "relu1");
  m.node("Conv", {"a3", "conv2.weight", "conv2.bias"}, {"a4"}, "conv2");
  set_ints(m, "pads", {1, 1, 1, 1});
  m.node("Relu", {"a4"}, {"a5"}, "relu2");
  m.node("MaxPool", {"a5"}, {"a6"}, "pool");
  set_ints(m, "kernel_shape", {2, 2});
  set_ints(m, "strides", {2, 2});
  m.node("Conv", {"a6", "conv3.weight"}, {"a7"}, "conv3");
  m.node("Relu", {"a7"}, {"a8"}, "relu3");
  m.node("GlobalAveragePool", {"a8"}, {"a9"}, "gap");
  m.node("Flatten", {"a9"}, {"a10"}, "flatten");
  m.node("Gemm", {"a10", "fc.weight", "fc.bias"}, {"y"}, "fc");
  set_int(m, "transB", 1);
  return m;
}

// x[1,4,6,6] -> conv0(4) -> Relu -> conv1(4) -> Relu -> Add(., conv0's Relu) -> conv2(3) ->
// GlobalAveragePool -> Flatten -> fc(2) -> y: conv1's channels meet conv0's in a residual Add.
ModelBuilder residual() {
  ModelBuilder m;
  m.input("x", kFloat, {"1", "4", "6", "6"}).output("y", kFloat, {"1", "2"});
  m.initializer("w0", {4, 4, 3, 3}, random_values(144, 21)).initializer("w1", {4, 4, 3, 3}, random_values(144, 22));
  m.initializer("w2", {3, 4, 1, 1}, random_values(12, 23)).initializer("fc.weight", {2, 3}, random_values(6, 24));
  m.node("Conv", {"x", "w0"}, {"c0"}, "conv0");
  set_ints(m, "pads", {1, 1, 1, 1});
  m.node("Relu", {"c0"}, {"r0"}, "relu0");
  m.node("Conv", {"r0", "w1"}, {"c1"}, "conv1");
  set_ints(m, "pads", {1, 1, 1, 1});
  m.node("Relu", {"c1"}, {"r1"}, "relu1");
  m.node("Add", {"r1", "r0"}, {"s"}, "add");
  m.node("Conv", {"s", "w2"}, {"c2"}, "conv2");
  m.node("GlobalAveragePool", {"c2"}, {"g"}, "gap");
  m.node("Flatten", {"g"}, {"f"}, "flatten");
  m.node("Gemm", {"f", "fc.weight"}, {"y"}, "fc");
  set_int(m, "transB", 1);
  return m;
}

// y of the model at `path` on a fixed input, by the tile runtime at 2 threads and by the
// reference executor.
std::pair<std::vector<double>, std::vector<double>> outputs(const std::filesystem::path& path, const Shape& x_shape) {
  Engine engine({.threads = 2});
  Model model = Model::load(path.string());
  int64_t n = 1;
  for (int64_t d : x_shape) n *= d;
  const TensorMap in{{"x", Tensor::from<float>(x_shape, random_values(static_cast<size_t>(n), 42))}};
  Session session(engine, model);
  return {session.run(in).at("y").to_f64(), model.run_reference(in).at("y").to_f64()};
}

void expect_same_outputs(const std::filesystem::path& a, const std::filesystem::path& b, const Shape& x_shape) {
  const auto [tiles_a, ref_a] = outputs(a, x_shape);
  const auto [tiles_b, ref_b] = outputs(b, x_shape);
  ASSERT_EQ(ref_a.size(), ref_b.size());
  for (size_t i = 0; i < ref_a.size(); ++i) {
    EXPECT_NEAR(ref_a[i], ref_b[i], 1e-6 * (1 + std::abs(ref_a[i]))) << "reference, output " << i;
    EXPECT_NEAR(tiles_a[i], tiles_b[i], 1e-5 * (1 + std::abs(tiles_a[i]))) << "tiles, output " << i;
  }
}

// The shape of the weight (input `input`) of node `node` in the model at `path`.
Shape weight_shape(const std::filesystem::path& path, const std::string& node, size_t input = 1) {
  const Graph g = load_onnx(path.string());
  for (const Node& n : g.nodes)
    if (n.name == node) return g.initializers.at(n.inputs.at(input)).shape();
  ADD_FAILURE() << "no node " << node << " in " << path;
  return {};
}

Tensor weight(const std::filesystem::path& path, const std::string& node, size_t input = 1) {
  const Graph g = load_onnx(path.string());
  for (const Node& n : g.nodes)
    if (n.name == node) return g.initializers.at(n.inputs.at(input));
  ADD_FAILURE() << "no node " << node << " in " << path;
  return {};
}

TEST(CliTailApply, GrowingKeepsTheOutputsAndWidensEveryReader) {
  TempDir d;
  const auto model = cnn().save(d / "cnn.onnx");
  Result r = run_grove({"tail", model.string(), "--apply", (d / "grown.onnx").string(), "--widths",
                        "conv1=12,conv2=9", "--widths", "conv3=8", "--seed", "3"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("3 of 3 layers resized"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("8 -> 12"), std::string::npos) << r.out;
  const auto grown = d / "grown.onnx";
  EXPECT_EQ(weight_shape(grown, "conv1"), (Shape{12, 3, 3, 3}));
  EXPECT_EQ(weight_shape(grown, "conv1", 2), (Shape{12}));
  for (size_t i = 1; i <= 4; ++i) EXPECT_EQ(weight_shape(grown, "bn", i), (Shape{12})) << i;
  EXPECT_EQ(weight_shape(grown, "conv2"), (Shape{9, 12, 3, 3}));
  EXPECT_EQ(weight_shape(grown, "conv3"), (Shape{8, 9, 1, 1}));
  EXPECT_EQ(weight_shape(grown, "fc"), (Shape{4, 8}));
  // The new channels' own weights are not zero (training must be able to move them).
  const Tensor w1 = weight(grown, "conv1");
  double new_l1 = 0;
  for (int64_t i = 8 * 27; i < w1.numel(); ++i) new_l1 += std::abs(w1.data<float>()[i]);
  EXPECT_GT(new_l1, 0);
  expect_same_outputs(model, grown, {1, 3, 8, 8});

  // The classifier's outputs are the model's: it is kept, with the reason, and the rest is done.
  Result fc = run_grove({"tail", model.string(), "--apply", (d / "fc.onnx").string(), "--widths", "fc=6,conv3=7"});
  ASSERT_EQ(fc.exit_code, 0) << fc.err;
  EXPECT_NE(fc.out.find("1 of 2 layers resized"), std::string::npos) << fc.out;
  EXPECT_NE(fc.out.find("kept: output 'y' would gain channels"), std::string::npos) << fc.out;
  EXPECT_EQ(weight_shape(d / "fc.onnx", "fc"), (Shape{4, 7}));
  expect_same_outputs(model, d / "fc.onnx", {1, 3, 8, 8});
}

TEST(CliTailApply, PruningKeepsTheLargestChannelsAtTheRequestedWidths) {
  TempDir d;
  const auto model = cnn().save(d / "cnn.onnx");
  const auto pruned = d / "pruned.onnx";
  Result r = run_grove({"tail", model.string(), "--apply", pruned.string(), "--apply-mode", "prune", "--widths",
                        "conv1=4,conv2=3,conv3=9"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  // conv3=9 would grow: --apply-mode prune leaves it out, and says so.
  EXPECT_NE(r.out.find("conv3=9 left out: --apply-mode prune"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("2 of 2 layers resized"), std::string::npos) << r.out;
  EXPECT_EQ(weight_shape(pruned, "conv1"), (Shape{4, 3, 3, 3}));
  EXPECT_EQ(weight_shape(pruned, "bn", 1), (Shape{4}));
  EXPECT_EQ(weight_shape(pruned, "conv2"), (Shape{3, 4, 3, 3}));
  EXPECT_EQ(weight_shape(pruned, "conv3"), (Shape{5, 3, 1, 1}));
  // conv1's largest channels by L1 norm are 1, 3, 5 and 7 (kConv1Scale), in their order.
  const Tensor before = weight(model, "conv1"), after = weight(pruned, "conv1");
  const int64_t kept[] = {1, 3, 5, 7};
  for (int j = 0; j < 4; ++j)
    for (int k = 0; k < 27; ++k) EXPECT_EQ(after.data<float>()[j * 27 + k], before.data<float>()[kept[j] * 27 + k]) << j;
  const Tensor var_before = weight(model, "bn", 4), var_after = weight(pruned, "bn", 4);
  for (int j = 0; j < 4; ++j) EXPECT_EQ(var_after.data<float>()[j], var_before.data<float>()[kept[j]]);
  // The pruned model runs, to the same shape.
  const auto [tiles, ref] = outputs(pruned, {1, 3, 8, 8});
  ASSERT_EQ(tiles.size(), 4u);
  for (size_t i = 0; i < ref.size(); ++i) EXPECT_NEAR(tiles[i], ref[i], 1e-4 * (1 + std::abs(ref[i])));
}

TEST(CliTailApply, AResidualAddKeepsItsLayerWithANote) {
  TempDir d;
  const auto model = residual().save(d / "residual.onnx");
  const auto out = d / "out.onnx";
  Result r = run_grove({"tail", model.string(), "--apply", out.string(), "--widths", "conv1=6,conv2=5"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("1 of 2 layers resized"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("kept: node 'add' (Add): mixes channels resized by layer 'conv1'"), std::string::npos) << r.out;
  EXPECT_EQ(weight_shape(out, "conv1"), (Shape{4, 4, 3, 3}));
  EXPECT_EQ(weight_shape(out, "conv2"), (Shape{5, 4, 1, 1}));
  EXPECT_EQ(weight_shape(out, "fc"), (Shape{2, 5}));
  expect_same_outputs(model, out, {1, 4, 6, 6});
}

// x[1,3,6,6] -> conv0(4) -> Softmax over the channels -> conv1(3) -> GlobalAveragePool ->
// Flatten -> fc(2) -> y: new channels of conv0 would take a share of every softmax.
ModelBuilder softmax_over_channels() {
  ModelBuilder m;
  m.input("x", kFloat, {"1", "3", "6", "6"}).output("y", kFloat, {"1", "2"});
  m.initializer("w0", {4, 3, 3, 3}, random_values(108, 41)).initializer("w1", {3, 4, 1, 1}, random_values(12, 42));
  m.initializer("fc.weight", {2, 3}, random_values(6, 43));
  m.node("Conv", {"x", "w0"}, {"c0"}, "conv0");
  m.node("Softmax", {"c0"}, {"s"}, "softmax");
  set_int(m, "axis", 1);
  m.node("Conv", {"s", "w1"}, {"c1"}, "conv1");
  m.node("GlobalAveragePool", {"c1"}, {"g"}, "gap");
  m.node("Flatten", {"g"}, {"f"}, "flatten");
  m.node("Gemm", {"f", "fc.weight"}, {"y"}, "fc");
  set_int(m, "transB", 1);
  return m;
}

// Growing must leave the outputs as they were: a softmax over the channels would spread over
// the new ones, so the layer is kept. Pruning may pass it (the narrower network's softmax).
TEST(CliTailApply, GrowingStopsWhereNewChannelsWouldChangeTheOutputs) {
  TempDir d;
  const auto model = softmax_over_channels().save(d / "softmax.onnx");
  Result grow = run_grove({"tail", model.string(), "--apply", (d / "grown.onnx").string(), "--widths", "conv0=6"});
  ASSERT_EQ(grow.exit_code, 0) << grow.err;
  EXPECT_NE(grow.out.find("kept: node 'softmax' (Softmax): normalises over the channel axis"), std::string::npos)
      << grow.out;
  expect_same_outputs(model, d / "grown.onnx", {1, 3, 6, 6});
  Result prune = run_grove({"tail", model.string(), "--apply", (d / "pruned.onnx").string(), "--widths", "conv0=2"});
  ASSERT_EQ(prune.exit_code, 0) << prune.err;
  EXPECT_NE(prune.out.find("1 of 1 layers resized"), std::string::npos) << prune.out;
  EXPECT_EQ(weight_shape(d / "pruned.onnx", "conv1"), (Shape{3, 2, 1, 1}));
}

// x[512,256] -> MatMul(40 columns) -> Relu -> MatMul(16) -> y. 40 columns fill a GEMM panel
// of 32 and part of a second, so widths up to 64 cost about the same: grove tail tends to
// suggest growing the first layer.
ModelBuilder matmul_chain() {
  ModelBuilder m;
  m.input("x", kFloat, {"512", "256"}).output("y", kFloat, {"512", "16"});
  m.initializer("w1", {256, 40}, random_values(256 * 40, 31)).initializer("w2", {40, 16}, random_values(640, 32));
  m.node("MatMul", {"x", "w1"}, {"h"}, "mm1").node("Relu", {"h"}, {"r"}, "relu").node("MatMul", {"r", "w2"}, {"y"}, "mm2");
  return m;
}

// Timed suggestions, applied in the default mode (grow): whatever grows, the outputs stay.
TEST(CliTailApply, MeasuredSuggestionsGrowWithoutChangingTheOutputs) {
  TempDir d;
  const auto model = matmul_chain().save(d / "chain.onnx");
  const auto out = d / "out.onnx";
  Result r = run_grove({"tail", model.string(), "--span", "24", "--step", "8", "--runs", "3", "--threads", "1",
                        "--threshold", "0.2", "--apply", out.string(), "--json"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("\"apply\": {\"out\": "), std::string::npos) << r.out;
  EXPECT_NE(r.err.find("wrote " + out.string()), std::string::npos) << r.err;
  // Timing decides what grows, so the test does not insist; it says what happened.
  std::printf("    %s", r.err.substr(r.err.find("wrote ")).c_str());
  expect_same_outputs(model, out, {512, 256});
}

TEST(CliTailApply, BadInputIsAOneLineError) {
  TempDir d;
  const auto model = cnn().save(d / "cnn.onnx");
  Result unwritable = run_grove({"tail", model.string(), "--apply", (d / "no/such/dir/out.onnx").string(), "--widths", "conv1=9"});
  expect_clean_error(unwritable);
  EXPECT_NE(unwritable.err.find("--apply: cannot write"), std::string::npos) << unwritable.err;
  Result directory = run_grove({"tail", model.string(), "--apply", d.path().string(), "--widths", "conv1=9"});
  expect_clean_error(directory);
  Result unknown = run_grove({"tail", model.string(), "--apply", (d / "o.onnx").string(), "--widths", "conv9=9"});
  expect_clean_error(unknown);
  EXPECT_NE(unknown.err.find("no layer named 'conv9' (layers: conv1, conv2, conv3, fc)"), std::string::npos) << unknown.err;
  Result count = run_grove({"tail", model.string(), "--apply", (d / "o.onnx").string(), "--widths", "conv1=0"});
  expect_clean_error(count);
  Result no_apply = run_grove({"tail", model.string(), "--widths", "conv1=9"});
  expect_clean_error(no_apply);
  EXPECT_NE(no_apply.err.find("add --apply OUT.onnx"), std::string::npos) << no_apply.err;
  expect_clean_error(run_grove({"tail", model.string(), "--apply-mode", "prune"}));
  EXPECT_FALSE(std::filesystem::exists(d / "o.onnx"));

  ModelBuilder relu;
  relu.input("x", kFloat, {"2", "3"}).output("y", kFloat, {"2", "3"}).node("Relu", {"x"}, {"y"}, "relu");
  const auto no_layers = relu.save(d / "relu.onnx");
  for (const auto& extra : {std::vector<std::string>{}, std::vector<std::string>{"--widths", "relu=2"}}) {
    std::vector<std::string> args = {"tail", no_layers.string(), "--apply", (d / "o.onnx").string()};
    args.insert(args.end(), extra.begin(), extra.end());
    Result none = run_grove(args);
    expect_clean_error(none);
    EXPECT_NE(none.err.find("no Conv"), std::string::npos) << none.err;
  }
  Result help = run_grove({"tail", "--help"});
  EXPECT_NE(help.out.find("--apply"), std::string::npos) << help.out;
}

}  // namespace tail_apply_test
}  // namespace grove::cli_test
