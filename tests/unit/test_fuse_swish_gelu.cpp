// Epilogue fusion of the activations added for exporters other than torch's default GELU:
// x*Sigmoid(x) (SiLU), x*Sigmoid(1.702x) (the sigmoid GELU), the Gelu op of opset 20 (erf and
// tanh), the erf GELU as TF converters write it, after a MatMul + bias and after a Conv; and
// the Gelu op on its own. Each checks the
// fusion fired and that the fused graph computes what the unfused one does.
#include <gtest/gtest.h>

#include "graph/node_decisions.h"
#include "passes/passes.h"
#include "graph_test_util.h"
#include "runtime/session.h"
#include "plan_test_util.h"
#include "runtime/reference_executor.h"

namespace grove {
namespace {

using namespace grove::test;

std::map<std::string, int> labels(const Graph& g) {
  std::map<std::string, int> h;
  for (const auto& n : g.nodes) ++h[op_label(n)];
  return h;
}

TestModel activations_model() {
  OnnxBuilder b(20);
  b.input("x", kF32, {1, 6, 16});
  weight(b, "w", {16, 24}, 1);
  weight(b, "bias", {24}, 2);
  b.initializer_f32("c1702", {}, {1.702f});
  auto linear = [&](const std::string& out) {
    b.node("MatMul", {"x", "w"}, {out + "_m"}, out + "_mm");
    b.node("Add", {out + "_m", "bias"}, {out}, out + "_bias");
  };
  linear("h1");  // SiLU, Mul operands in both orders
  b.node("Sigmoid", {"h1"}, {"s1"}, "sig1");
  b.node("Mul", {"s1", "h1"}, {"y_silu"}, "silu");
  linear("h2");  // sigmoid GELU
  b.node("Mul", {"h2", "c1702"}, {"a2"}, "scale2");
  b.node("Sigmoid", {"a2"}, {"s2"}, "sig2");
  b.node("Mul", {"h2", "s2"}, {"y_qgelu"}, "qgelu");
  linear("h3");
  b.node("Gelu", {"h3"}, {"y_gelu"}, "gelu");
  linear("h4");
  auto& t = b.node("Gelu", {"h4"}, {"y_gelu_tanh"}, "gelu_tanh");
  auto* a = t.add_attribute();
  a->set_name("approximate");
  a->set_type(onnx::AttributeProto::STRING);
  a->set_s("tanh");
  b.node("Gelu", {"x"}, {"y_gelu_alone"}, "gelu_alone");
  // The erf GELU as TF converters write it: Mul by 1/sqrt 2, the 0.5 on (1 + Erf).
  b.initializer_f32("rsqrt2", {}, {0.70710678118654752f});
  b.initializer_f32("one", {}, {1.0f});
  b.initializer_f32("half", {}, {0.5f});
  linear("h5");
  b.node("Mul", {"rsqrt2", "h5"}, {"e1"}, "tf_scale");
  b.node("Erf", {"e1"}, {"e2"}, "tf_erf");
  b.node("Add", {"e2", "one"}, {"e3"}, "tf_add");
  b.node("Mul", {"e3", "half"}, {"e4"}, "tf_half");
  b.node("Mul", {"h5", "e4"}, {"y_tf_gelu"}, "tf_gelu");
  // Conv + SiLU, as YOLOv5 and EfficientNet write it.
  b.initializer_i64("img", {4}, {1, 6, 4, 4});
  b.node("Reshape", {"x", "img"}, {"xi"}, "to_image");
  weight(b, "cw", {8, 6, 3, 3}, 3);
  OnnxBuilder::attr_ints(b.node("Conv", {"xi", "cw"}, {"c"}, "conv"), "pads", {1, 1, 1, 1});
  b.node("Sigmoid", {"c"}, {"cs"}, "conv_sig");
  b.node("Mul", {"c", "cs"}, {"y_conv_silu"}, "conv_silu");
  for (const char* y : {"y_silu", "y_qgelu", "y_gelu", "y_gelu_tanh", "y_tf_gelu"}) b.output(y, kF32, {1, 6, 24});
  b.output("y_gelu_alone", kF32, {1, 6, 16}).output("y_conv_silu", kF32, {1, 8, 4, 4});
  return {"activations", b.bytes(), {{"x", seeded_tensor({1, 6, 16}, 4)}}};
}

TEST(FuseSwishGelu, FusesIntoTheProducer) {
  Model model = load_test_model(activations_model());
  std::map<std::string, int> want = {{"MatMul+Bias+Swish", 1}, {"MatMul+Bias+SigmoidGelu", 1}, {"MatMul+Bias+Gelu", 3},
                                     {"Gelu", 1},              {"Reshape", 1},                  {"Conv+Swish", 1}};
  EXPECT_EQ(labels(bound_graph(model)), want);
}

TEST(FuseSwishGelu, FusedMatchesUnfused) {
  TestModel m = activations_model();
  TensorMap unfused = run_reference(unfused_graph(m), m.inputs);
  Model model = load_test_model(m);
  expect_close(run_reference(bound_graph(model), m.inputs), unfused, 1e-5, "reference on the fused graph");
  for (int threads : {1, 2}) {
    Engine engine(EngineOptions{.threads = threads});
    Session session(engine, load_test_model(m));
    expect_close(session.run(m.inputs), unfused, 1e-5, "planned, threads " + std::to_string(threads));
  }
}

TEST(FuseSwishGelu, GeluOpRejectsAnUnknownApproximation) {
  OnnxBuilder b(20);
  b.input("x", kF32, {4}).output("y", kF32, {4});
  auto* a = b.node("Gelu", {"x"}, {"y"}, "gelu").add_attribute();
  a->set_name("approximate");
  a->set_type(onnx::AttributeProto::STRING);
  a->set_s("fast");
  EXPECT_THROW(model_from_graph(load_onnx_bytes(b.bytes(), "gelu.onnx")), Error);
}

}  // namespace
}  // namespace grove
