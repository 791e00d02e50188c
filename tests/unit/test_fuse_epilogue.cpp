// Epilogue fusion (graph/fuse_epilogue.cpp): which chains fuse, and that the fused graph
// computes what the unfused one does - the reference executor on the original graph against
// the reference on the fused graph and against the fused tiles (poisoned buffers, several
// tile counts, both schedules).
#include <gtest/gtest.h>

#include "graph/node_decisions.h"
#include "passes/passes.h"
#include "plan_test_util.h"
#include "runtime/reference_executor.h"

namespace grove {
namespace {

using namespace grove::test;

TensorMap planned_outputs(std::shared_ptr<const Plan> plan, const TensorMap& inputs, uint32_t seed) {
  PlannedRun run(std::move(plan), inputs, PlannedRunOptions{true});  // poisoned buffers
  run_serial(run, seed);
  return run.outputs();
}

PlanOptions options(int tiles_per_op, Schedule schedule) {
  PlanOptions o;
  o.tiles_per_op = tiles_per_op;
  o.schedule = schedule;
  return o;
}

std::map<std::string, int> labels(const Graph& g) {
  std::map<std::string, int> h;
  for (const auto& n : g.nodes) ++h[op_label(n)];
  return h;
}

// One model with every pattern, each on its own branch from x[1,8,10,12].
TestModel every_pattern() {
  OnnxBuilder b(13);
  const Shape x{1, 8, 10, 12};
  b.input("x", kF32, x);
  auto conv = [&](const std::string& in, const std::string& out, int cin, int cout, int group, uint32_t seed) {
    weight(b, out + "_w", {cout, cin / group, 3, 3}, seed);
    weight(b, out + "_b", {cout}, seed + 50);
    auto& n = b.node("Conv", {in, out + "_w", out + "_b"}, {out}, out);
    OnnxBuilder::attr_ints(n, "pads", {1, 1, 1, 1});
    OnnxBuilder::attr_int(n, "group", group);
  };
  // ResNet: relu(conv(relu(conv x)) + x)
  conv("x", "c1", 8, 8, 1, 1);
  b.node("Relu", {"c1"}, {"r1"}, "relu1");
  conv("r1", "c2", 8, 8, 1, 2);
  b.node("Add", {"c2", "x"}, {"s2"}, "add2");
  b.node("Relu", {"s2"}, {"y_resnet"}, "relu2");
  // Depthwise + residual + ReLU6 (Clip with constant bounds).
  conv("x", "d1", 8, 8, 8, 3);
  b.initializer_f32("zero", {}, {0.0f});
  b.initializer_f32("six", {}, {0.5f});
  b.node("Add", {"x", "d1"}, {"s3"}, "add3");
  b.node("Clip", {"s3", "zero", "six"}, {"y_dw"}, "clip3");
  // One activation each.
  const char* acts[] = {"LeakyRelu", "Sigmoid", "HardSigmoid", "HardSwish"};
  for (int i = 0; i < 4; ++i) {
    std::string c = "a" + std::to_string(i), y = std::string("y_") + acts[i];
    conv("x", c, 8, 4, 1, 10 + i);
    b.node(acts[i], {c}, {y}, y);
    b.output(y, kF32, {1, 4, 10, 12});
  }
  // Transformer: t = x viewed as [1, 80, 12]; GELU(t W1 + b1) W2 + b2 + t.
  b.initializer_i64("tshape", {3}, {1, 80, 12});
  b.node("Reshape", {"x", "tshape"}, {"t"}, "to_tokens");
  weight(b, "w1", {12, 24}, 20);
  weight(b, "b1", {24}, 21);
  weight(b, "w2", {24, 12}, 22);
  weight(b, "b2", {12}, 23);
  b.initializer_f32("sqrt2", {}, {1.4142135381698608f});
  b.initializer_f32("one", {}, {1.0f});
  b.initializer_f32("half", {}, {0.5f});
  b.node("MatMul", {"t", "w1"}, {"m1"}, "mm1");
  b.node("Add", {"b1", "m1"}, {"h"}, "bias1");
  b.node("Div", {"h", "sqrt2"}, {"g1"}, "gelu_div");
  b.node("Erf", {"g1"}, {"g2"}, "gelu_erf");
  b.node("Add", {"g2", "one"}, {"g3"}, "gelu_add");
  b.node("Mul", {"h", "g3"}, {"g4"}, "gelu_mul");
  b.node("Mul", {"g4", "half"}, {"g"}, "gelu_half");
  b.node("MatMul", {"g", "w2"}, {"m2"}, "mm2");
  b.node("Add", {"b2", "m2"}, {"o2"}, "bias2");
  b.node("Add", {"t", "o2"}, {"y_bert"}, "residual2");
  // GPT-2's tanh GELU, the cube as Mul(h, Mul(h, h)) and as Pow(h, 3).
  b.initializer_f32("c044715", {}, {0.044715f});
  b.initializer_f32("sqrt2pi", {}, {0.7978845608028654f});
  b.initializer_f32("three", {}, {3.0f});
  for (int pow_form = 0; pow_form < 2; ++pow_form) {
    const std::string s = std::to_string(pow_form), h = "th" + s;
    b.node("MatMul", {"t", "w1"}, {"tm" + s}, "tmm" + s);
    b.node("Add", {"b1", "tm" + s}, {h}, "tbias" + s);
    if (pow_form) {
      b.node("Pow", {h, "three"}, {"cube" + s}, "pow" + s);
    } else {
      b.node("Mul", {h, h}, {"sq" + s}, "sq" + s);
      b.node("Mul", {h, "sq" + s}, {"cube" + s}, "cube" + s);
    }
    b.node("Mul", {"c044715", "cube" + s}, {"k1" + s}, "k1" + s);
    b.node("Add", {h, "k1" + s}, {"k2" + s}, "k2" + s);
    b.node("Mul", {"sqrt2pi", "k2" + s}, {"k3" + s}, "k3" + s);
    b.node("Tanh", {"k3" + s}, {"k4" + s}, "k4" + s);
    b.node("Add", {"one", "k4" + s}, {"k5" + s}, "k5" + s);
    b.node("Mul", {h, "k5" + s}, {"k6" + s}, "k6" + s);
    b.node("Mul", {"half", "k6" + s}, {"y_gpt" + s}, "k7" + s);
    b.output("y_gpt" + s, kF32, {1, 80, 24});
  }
  // Linear as Gemm(transB, C) + Relu.
  b.initializer_i64("flat", {2}, {8, 120});
  b.node("Reshape", {"x", "flat"}, {"f"}, "flatten");
  weight(b, "wg", {16, 120}, 30);
  weight(b, "bg", {16}, 31);
  OnnxBuilder::attr_int(b.node("Gemm", {"f", "wg", "bg"}, {"gm"}, "gemm"), "transB", 1);
  b.node("Relu", {"gm"}, {"y_gemm"}, "gemm_relu");
  // Gemm without C + Add(bias) + Sigmoid; and with beta 2, where the bias must stay an Add.
  weight(b, "wn", {120, 16}, 32);
  b.node("Gemm", {"f", "wn"}, {"gn"}, "gemm_noc");
  b.node("Add", {"gn", "bg"}, {"gb"}, "gemm_bias");
  b.node("Sigmoid", {"gb"}, {"y_gemm_noc"}, "gemm_sigmoid");
  OnnxBuilder::attr_float(b.node("Gemm", {"f", "wn"}, {"gs"}, "gemm_beta"), "beta", 2.0f);
  b.node("Add", {"gs", "bg"}, {"y_gemm_beta"}, "gemm_beta_bias");
  b.output("y_gemm_noc", kF32, {8, 16}).output("y_gemm_beta", kF32, {8, 16});
  b.output("y_resnet", kF32, x).output("y_dw", kF32, x).output("y_bert", kF32, {1, 80, 12}).output("y_gemm", kF32, {8, 16});
  return {"every_pattern", b.bytes(), {{"x", seeded_tensor(x, 40)}}};
}

TEST(FuseEpilogue, FusesEveryPatternIntoItsProducer) {
  TestModel m = every_pattern();
  Model model = load_test_model(m);
  std::map<std::string, int> want = {{"Conv+Relu", 1},        {"Conv+Add+Relu", 1},      {"Conv+Add+Clip", 1},
                                     {"Conv+LeakyRelu", 1},   {"Conv+Sigmoid", 1},       {"Conv+HardSigmoid", 1},
                                     {"Conv+HardSwish", 1},   {"MatMul+Bias+Gelu", 1},   {"MatMul+Bias+Add", 1},
                                     {"Gemm+Relu", 1},        {"Gemm+Bias+Sigmoid", 1},  {"Gemm", 1},
                                     {"Add", 1},              {"Reshape", 2},            {"MatMul+Bias+GeluTanh", 2}};
  EXPECT_EQ(labels(bound_graph(model)), want);
}

TEST(FuseEpilogue, FusedTilesAndFusedReferenceMatchTheUnfusedGraph) {
  TestModel m = every_pattern();
  TensorMap unfused = run_reference(unfused_graph(m), m.inputs);
  Model model = load_test_model(m);
  expect_close(run_reference(bound_graph(model), m.inputs), unfused, 1e-5, "reference on the fused graph");
  for (Schedule s : {Schedule::aspen, Schedule::barrier})
    for (int k : {0, 1, 3, 7}) {
      auto plan = make_plan(bound_graph(model), options(k, s));
      expect_close(planned_outputs(plan, m.inputs, 3), unfused, 1e-5, "tiles k=" + std::to_string(k));
    }
}

TEST(FuseEpilogue, LeavesSharedAndOutputValuesAlone) {
  OnnxBuilder b(13);
  b.input("x", kF32, {1, 4, 6, 6}).output("y", kF32, {1, 4, 6, 6}).output("c", kF32, {1, 4, 6, 6});
  b.output("z", kF32, {1, 4, 6, 6});
  weight(b, "w", {4, 4, 3, 3}, 1);
  weight(b, "w2", {4, 4, 3, 3}, 2);
  OnnxBuilder::attr_ints(b.node("Conv", {"x", "w"}, {"c"}, "conv"), "pads", {1, 1, 1, 1});
  b.node("Relu", {"c"}, {"y"}, "relu");  // c is a graph output: stays
  OnnxBuilder::attr_ints(b.node("Conv", {"x", "w2"}, {"c2"}, "conv2"), "pads", {1, 1, 1, 1});
  b.node("Sigmoid", {"c2"}, {"s"}, "sigmoid");  // c2 has two readers: stays
  b.node("Add", {"c2", "s"}, {"z"}, "add");
  TestModel m{"shared", b.bytes(), {{"x", seeded_tensor({1, 4, 6, 6}, 3)}}};
  Model model = load_test_model(m);
  EXPECT_EQ(labels(bound_graph(model)), (std::map<std::string, int>{{"Conv", 2}, {"Relu", 1}, {"Sigmoid", 1}, {"Add", 1}}));
}

TEST(FuseEpilogue, ImporterRefusesReservedAttributes) {
  OnnxBuilder b(13);
  b.input("x", kF32, {2}).output("y", kF32, {2});
  OnnxBuilder::attr_float(b.node("Relu", {"x"}, {"y"}, "relu"), "grove_alpha", 1.0f);
  EXPECT_THROW(load_onnx_bytes(b.bytes(), "reserved.onnx"), Error);
}

}  // namespace
}  // namespace grove

namespace grove {
namespace {

// MatMul to one column plus a scalar constant: the fused bias is rank 0 (fuzz_graph found the
// tile rule taking the last dim of that empty shape).
TEST(FuseEpilogue, ScalarBiasOfAOneColumnMatMul) {
  OnnxBuilder b;
  b.input("x", kF32, {6, 10}).output("y", kF32, {6, 1});
  weight(b, "w", {10, 1}, 50);
  weight(b, "c", {}, 51);
  b.node("MatMul", {"x", "w"}, {"m"}, "matmul");
  b.node("Add", {"m", "c"}, {"y"}, "bias");
  TestModel m{"scalar_bias", b.bytes(), {{"x", seeded_tensor({6, 10}, 52)}}};
  TensorMap unfused = run_reference(unfused_graph(m), m.inputs);
  Model model = load_test_model(m);
  EXPECT_EQ(labels(bound_graph(model)), (std::map<std::string, int>{{"MatMul+Bias", 1}}));
  for (int k : {0, 1, 3}) {
    auto plan = make_plan(bound_graph(model), options(k, Schedule::aspen));
    expect_close(planned_outputs(plan, m.inputs, 3), unfused, 1e-5, "tiles k=" + std::to_string(k));
  }
}

}  // namespace
}  // namespace grove
