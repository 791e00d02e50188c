// The plan's bf16 choice (plan/precision.cpp): which nodes it marks, what it leaves fp32, the
// fallback where the CPU lacks AVX512-BF16, and that a bf16 plan computes the fp32 answer to
// bf16's accuracy on the tile runtime.
#include <gtest/gtest.h>

#include <cmath>

#include "graph/node_decisions.h"
#include "kernels/gemm.h"
#include "plan/precision.h"
#include "plan_test_util.h"
#include "runtime/reference_executor.h"

namespace grove {
namespace {

using namespace grove::test;

// x [1,16,32,32]: a Winograd 3x3 conv, a 1x1 conv, a depthwise conv, then a MatMul with
// constant weights and one of two activations.
TestModel mixed_model() {
  OnnxBuilder b(13);
  b.input("x", kF32, {1, 16, 32, 32}).output("y", kF32, {1, 16, 32, 32}).output("z", kF32, {1, 16, 32, 32});
  weight(b, "w3", {16, 16, 3, 3}, 1);
  weight(b, "w1", {16, 16, 1, 1}, 2);
  weight(b, "wd", {16, 1, 3, 3}, 3);
  weight(b, "wm", {32, 32}, 4);
  OnnxBuilder::attr_ints(b.node("Conv", {"x", "w3"}, {"c3"}, "conv3x3"), "pads", {1, 1, 1, 1});
  b.node("Conv", {"c3", "w1"}, {"c1"}, "conv1x1");
  auto& dw = b.node("Conv", {"c1", "wd"}, {"cd"}, "depthwise");
  OnnxBuilder::attr_ints(dw, "pads", {1, 1, 1, 1});
  OnnxBuilder::attr_int(dw, "group", 16);
  b.node("MatMul", {"cd", "wm"}, {"y"}, "matmul_weights");
  b.node("MatMul", {"cd", "cd"}, {"z"}, "matmul_activations");
  return {"mixed", b.bytes(), {{"x", seeded_tensor({1, 16, 32, 32}, 9)}}};
}

// Largest |a - b| over the largest |a|, for an output of both maps.
double relative_error(const TensorMap& want, const TensorMap& got, const std::string& name) {
  const float* a = want.at(name).data<float>();
  const float* b = got.at(name).data<float>();
  double largest = 0, worst = 0;
  for (int64_t i = 0; i < numel(want.at(name).shape()); ++i)
    largest = std::max(largest, std::abs(double(a[i]))), worst = std::max(worst, std::abs(double(a[i]) - b[i]));
  return worst / largest;
}

// A stem on an image's 3 channels stays fp32 on AVX512-BF16 dot products, where the f32 row
// conv adds its taps in registers; the conv after it (16 channels) goes bf16. On AMX both do.
TEST(PrecisionPlan, AStemOfFewChannelsStaysFp32OnDotProducts) {
  if (!kernels::precision_supported(kernels::Precision::bf16, kernels::active_isa())) GTEST_SKIP() << "no AVX512-BF16";
  OnnxBuilder b(13);
  b.input("x", kF32, {1, 3, 32, 32}).output("y", kF32, {1, 16, 16, 16});
  weight(b, "ws", {16, 3, 3, 3}, 1);
  weight(b, "wn", {16, 16, 3, 3}, 2);
  auto& stem = b.node("Conv", {"x", "ws"}, {"s"}, "stem");
  OnnxBuilder::attr_ints(stem, "pads", {1, 1, 1, 1});
  OnnxBuilder::attr_ints(stem, "strides", {2, 2});
  OnnxBuilder::attr_ints(b.node("Conv", {"s", "wn"}, {"y"}, "next"), "pads", {1, 1, 1, 1});
  const TestModel m{"stem", b.bytes(), {{"x", seeded_tensor({1, 3, 32, 32}, 4)}}};
  PlanOptions options;
  options.precision = Precision::bf16;
  auto plan = make_plan(unfused_graph(m), options);
  const bool amx = kernels::precision_supported(kernels::Precision::bf16_amx, kernels::active_isa());
  std::map<std::string, bool> marked;
  for (const Node& n : plan->graph.nodes) marked[n.name] = runs_in_bf16(n);
  EXPECT_EQ(marked.at("stem"), amx);
  EXPECT_TRUE(marked.at("next"));
}

TEST(PrecisionPlan, MarksGemmNodesWithConstantWeightsOnly) {
  const TestModel m = mixed_model();
  const Graph g = unfused_graph(m);
  PlanOptions options;
  options.precision = Precision::bf16;
  auto plan = make_plan(g, options);
  if (!kernels::precision_supported(kernels::Precision::bf16, kernels::active_isa())) {
    EXPECT_EQ(plan->precision.precision, Precision::fp32);
    EXPECT_NE(plan->precision.note.find("no AVX512-BF16"), std::string::npos) << plan->precision.note;
    for (const Node& n : plan->graph.nodes) EXPECT_FALSE(runs_in_bf16(n)) << n.name;
    return;
  }
  std::map<std::string, bool> marked;
  for (const Node& n : plan->graph.nodes) marked[n.name] = runs_in_bf16(n);
  // A Winograd layer goes bf16 too (the row conv or AMX beats fp32 Winograd).
  const bool amx = kernels::precision_supported(kernels::Precision::bf16_amx, kernels::active_isa());
  EXPECT_TRUE(marked.at("conv3x3"));
  EXPECT_TRUE(marked.at("conv1x1"));
  EXPECT_FALSE(marked.at("depthwise"));
  EXPECT_TRUE(marked.at("matmul_weights"));
  EXPECT_FALSE(marked.at("matmul_activations"));
  EXPECT_EQ(plan->precision.bf16_nodes, 3);
  // On the AMX tile unit where the CPU has one, else on AVX512-BF16 dot products.
  for (const Node& n : plan->graph.nodes)
    if (runs_in_bf16(n)) EXPECT_EQ(runs_on_amx(n), amx) << n.name;
  EXPECT_EQ(plan->precision.note, std::string(amx ? "bf16 products on AMX tiles" : "bf16 products") +
                                      " in 3 nodes (2 Conv, 1 MatMul); everything else fp32");
  // The bound graph the plan was made from is not marked: only the plan's copy is.
  for (const Node& n : g.nodes) EXPECT_FALSE(runs_in_bf16(n)) << n.name;

  // The tile runtime on the bf16 plan: within bf16's error of the fp32 reference, not equal.
  const TensorMap want = run_reference(g, m.inputs);
  PlannedRun run(plan, m.inputs, PlannedRunOptions{true});
  run_serial(run, 3);
  const TensorMap got = run.outputs();
  EXPECT_LT(relative_error(want, got, "y"), 2e-2);
  EXPECT_GT(relative_error(want, got, "y"), 0.0) << "bf16 gave exactly the fp32 result";
  EXPECT_LT(relative_error(want, got, "z"), 2e-2);  // fp32 itself, on the bf16 conv's output
}

// The fused attention's Q.K^T and P.V in bf16: marked, and within bf16's error of fp32.
TEST(PrecisionPlan, FusedAttentionRunsItsGemmsInBf16) {
  if (!kernels::precision_supported(kernels::Precision::bf16, kernels::active_isa())) GTEST_SKIP() << "no AVX512-BF16";
  OnnxBuilder b(17);
  b.input("q", kF32, {1, 2, 17, 24}).input("kt", kF32, {1, 2, 24, 40}).input("v", kF32, {1, 2, 40, 16});
  b.output("out", kF32, {1, 2, 17, 16});
  b.initializer_f32("scale", {}, {0.2f});
  b.node("MatMul", {"q", "kt"}, {"scores"}, "qk");
  b.node("Mul", {"scores", "scale"}, {"scaled"}, "scale");
  OnnxBuilder::attr_int(b.node("Softmax", {"scaled"}, {"probs"}, "softmax"), "axis", -1);
  b.node("MatMul", {"probs", "v"}, {"out"}, "pv");
  const TensorMap inputs{{"q", seeded_tensor({1, 2, 17, 24}, 1)},
                         {"kt", seeded_tensor({1, 2, 24, 40}, 2)},
                         {"v", seeded_tensor({1, 2, 40, 16}, 3)}};
  Model fused = model_from_graph(load_onnx_bytes(b.bytes(), "attn.onnx"));
  PlanOptions options;
  options.precision = Precision::bf16;
  auto plan = make_plan(bound_graph(fused), options);
  ASSERT_EQ(plan->precision.bf16_nodes, 1) << plan->precision.note;
  EXPECT_EQ(plan->graph.nodes.at(0).op_type, "Attention");
  PlannedRun run(plan, inputs, PlannedRunOptions{true});
  run_serial(run, 4);
  const double error = relative_error(run_reference(bound_graph(fused), inputs), run.outputs(), "out");
  EXPECT_LT(error, 2e-2);
  EXPECT_GT(error, 0.0) << "bf16 gave exactly the fp32 result";
}

// Where the CPU's dot products run the GEMM no faster than its FMAs (an Intel core without AMX
// issues vdpbf16ps at half the rate of its two FMA ports: docs/precision.md), bf16 would cost
// accuracy and packing for nothing: the plan runs fp32 and its note says why. AMX ignores the
// dot products' speed; an unmeasured gain (0) runs bf16 as asked.
TEST(PrecisionPlan, Bf16RunsOnlyWhereItsProductsAreFaster) {
  EXPECT_FALSE(bf16_pays(false, 0.5));
  EXPECT_FALSE(bf16_pays(false, 1.2));
  EXPECT_TRUE(bf16_pays(false, 1.3));
  EXPECT_TRUE(bf16_pays(false, 0));
  EXPECT_TRUE(bf16_pays(true, 0.5));
  if (!kernels::precision_supported(kernels::Precision::bf16, kernels::active_isa())) GTEST_SKIP() << "no AVX512-BF16";
  const bool amx = kernels::precision_supported(kernels::Precision::bf16_amx, kernels::active_isa());
  for (double gain : {0.5, 1.9}) {
    PlanOptions options;
    options.precision = Precision::bf16;
    options.machine.bf16_dot_gain = gain;
    auto plan = make_plan(unfused_graph(mixed_model()), options);
    if (amx || gain > 1) {
      EXPECT_EQ(plan->precision.precision, Precision::bf16) << gain;
      EXPECT_GT(plan->precision.bf16_nodes, 0) << gain;
      continue;
    }
    EXPECT_EQ(plan->precision.precision, Precision::fp32);
    EXPECT_EQ(plan->precision.bf16_nodes, 0);
    EXPECT_NE(plan->precision.note.find("only 0.5x as fast as fp32"), std::string::npos) << plan->precision.note;
    EXPECT_NE(plan->precision.note.find("running fp32"), std::string::npos) << plan->precision.note;
    for (const Node& n : plan->graph.nodes) EXPECT_FALSE(runs_in_bf16(n)) << n.name;
  }
}

TEST(PrecisionPlan, Fp32MarksNothing) {
  auto plan = make_plan(unfused_graph(mixed_model()), PlanOptions{});
  EXPECT_EQ(plan->precision.precision, Precision::fp32);
  EXPECT_TRUE(plan->precision.note.empty());
  for (const Node& n : plan->graph.nodes) EXPECT_FALSE(runs_in_bf16(n)) << n.name;
}

}  // namespace
}  // namespace grove

namespace grove {
namespace {

// int8 weights (Precision::int8_weights): only MatMul and Gemm with a constant 2-D B are
// marked, and the tile runtime's result is within the quantization's error of the fp32
// reference, on both paths: the few-rows kernel (an op of at most 4 rows) and the f32 panels
// unpacked per call (more rows), at every grid with the same bits.
TEST(PrecisionPlan, Int8WeightsMarkMatMulAndGemmWithConstantWeights) {
  for (int64_t rows : {1, 3, 4, 5, 37}) {
    SCOPED_TRACE("rows " + std::to_string(rows));
    OnnxBuilder b(13);
    b.input("x", kF32, {rows, 96}).output("y", kF32, {rows, 40}).output("z", kF32, {rows, 96});
    weight(b, "w", {96, 72}, 1);
    weight(b, "bias", {72}, 2);
    weight(b, "v", {40, 72}, 3);
    b.node("MatMul", {"x", "w"}, {"h"}, "project");
    b.node("Add", {"h", "bias"}, {"hb"}, "bias_add");
    b.node("Relu", {"hb"}, {"r"}, "relu");
    OnnxBuilder::attr_int(b.node("Gemm", {"r", "v"}, {"y"}, "head"), "transB", 1);
    b.node("MatMul", {"x", "x_t"}, {"z"}, "activations");  // no constant B: stays fp32
    b.node("Transpose", {"x"}, {"x_t0"}, "transpose");
    b.node("MatMul", {"x_t0", "x"}, {"x_t"}, "gram");
    const TestModel m{"int8w", b.bytes(), {{"x", seeded_tensor({rows, 96}, 5)}}};
    const Graph g = unfused_graph(m);
    const TensorMap want = run_reference(g, m.inputs);
    std::vector<float> first;
    for (int tiles : {1, 3, 7}) {
      PlanOptions options;
      options.precision = Precision::int8_weights;
      options.threads = 2;
      options.tiles_per_op = tiles;
      auto plan = make_plan(g, options);
      std::map<std::string, NodePrecision> marked;
      for (const Node& n : plan->graph.nodes) marked[n.name] = n.decisions.precision;
      EXPECT_EQ(marked.at("project"), NodePrecision::int8_weights);
      EXPECT_EQ(marked.at("head"), NodePrecision::int8_weights);
      EXPECT_EQ(marked.at("activations"), NodePrecision::f32);
      EXPECT_EQ(marked.at("gram"), NodePrecision::f32);
      EXPECT_EQ(plan->precision.int8_weight_nodes, 2) << plan->precision.note;
      PlannedRun run(plan, m.inputs, PlannedRunOptions{true});
      run_serial(run, 2);
      const TensorMap got = run.outputs();
      // Per column, |w - q * scale| <= scale / 2 = max|w| / 254: a few tenths of a percent.
      EXPECT_LT(relative_error(want, got, "y"), 1.5e-2);
      EXPECT_GT(relative_error(want, got, "y"), 1e-4) << "int8 weights gave the fp32 result";
      EXPECT_LT(relative_error(want, got, "z"), 1e-5);
      const float* y = got.at("y").data<float>();
      const std::vector<float> bits(y, y + got.at("y").numel());
      if (first.empty()) first = bits;
      else EXPECT_EQ(bits, first) << tiles << " tiles per op changed the bits";
    }
  }
}

}  // namespace
}  // namespace grove
