// Shape binding, constant folding and graph passes, checked by structure and by running the
// graph before and after with the reference executor.
#include <gtest/gtest.h>

#include "passes/passes.h"
#include "onnx/import.h"
#include "graph_test_util.h"
#include "onnx_builder.h"
#include "runtime/model.h"

using namespace grove;
using grove::test::OnnxBuilder;
using grove::test::histogram;

namespace {
constexpr int kFloat = onnx::TensorProto::FLOAT;

Tensor ramp(Shape shape, float scale = 0.1f) {
  Tensor t(DType::f32, std::move(shape));
  for (int64_t i = 0; i < t.numel(); ++i) t.data<float>()[i] = scale * static_cast<float>((i * 7) % 13) - 0.5f;
  return t;
}
}  // namespace

// x:[N,6] -> Reshape(x, Concat(Unsqueeze(Gather(Shape(x), 0)), [2, 3])): the dynamic-axes pattern.
TEST(ShapeBinding, FoldsShapeChainsOnceInputsAreBound) {
  OnnxBuilder b(13);
  b.input("x", kFloat, {-1, 6}).output("y", kFloat, {-1, 2, 3});
  b.initializer_i64("zero", {}, {0});
  b.initializer_i64("axes0", {1}, {0});
  b.initializer_i64("tail", {2}, {2, 3});
  b.node("Shape", {"x"}, {"s"}, "shape");
  OnnxBuilder::attr_int(b.node("Gather", {"s", "zero"}, {"n"}, "gather"), "axis", 0);
  b.node("Unsqueeze", {"n", "axes0"}, {"n1"}, "unsqueeze");
  OnnxBuilder::attr_int(b.node("Concat", {"n1", "tail"}, {"target"}, "concat"), "axis", 0);
  b.node("Reshape", {"x", "target"}, {"y"}, "reshape");
  Model model = model_from_graph(load_onnx_bytes(b.bytes(), "chain.onnx"));
  EXPECT_FALSE(model.is_bound());  // N is symbolic and no shape was given

  Tensor x = ramp({4, 6});
  TensorMap out = model.run_reference({{"x", x}});
  EXPECT_EQ(histogram(bound_graph(model)), (std::map<std::string, int>{{"Reshape", 1}}));
  EXPECT_EQ(out["y"].shape(), (Shape{4, 2, 3}));
  EXPECT_EQ(out["y"].data<float>()[23], x.data<float>()[23]);

  // A new input shape re-binds.
  out = model.run_reference({{"x", ramp({2, 6})}});
  EXPECT_EQ(out["y"].shape(), (Shape{2, 2, 3}));

  // Declared fixed dims are checked against --shape.
  EXPECT_THROW(model_from_graph(load_onnx_bytes(b.bytes(), "chain.onnx"), {{"x", {4, 7}}}), Error);
  EXPECT_THROW(model_from_graph(load_onnx_bytes(b.bytes(), "chain.onnx"), {{"x", {4}}}), Error);
  EXPECT_THROW(model_from_graph(load_onnx_bytes(b.bytes(), "chain.onnx"), {{"nope", {4, 6}}}), Error);
}

TEST(ShapeBinding, UnboundDynamicInputNamesTheDim) {
  OnnxBuilder b;
  b.input("x", kFloat, {-1, 6}).output("y", kFloat, {-1, 6});
  b.node("Relu", {"x"}, {"y"}, "relu");
  Model model = model_from_graph(load_onnx_bytes(b.bytes(), "dyn.onnx"));
  try {
    bound_graph(model);
    FAIL() << "an unbound model must not hand out a graph";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("--shape"), std::string::npos) << e.what();
  }
  try {
    Graph g = load_onnx_bytes(b.bytes(), "dyn.onnx");
    bind_shapes(g, {});
    FAIL() << "binding without shapes must throw";
  } catch (const Error& e) {
    std::string msg = e.what();
    EXPECT_NE(msg.find("'x'"), std::string::npos) << msg;
    EXPECT_NE(msg.find("N"), std::string::npos) << msg;
  }
}

TEST(Passes, IdentityDropoutAndSameTypeCastVanishButGraphOutputsKeepTheirNames) {
  OnnxBuilder b;
  b.input("x", kFloat, {2, 3}).output("y", kFloat, {2, 3});
  b.node("Identity", {"x"}, {"a"}, "id1");
  b.node("Dropout", {"a"}, {"b"}, "drop");
  auto& same = b.node("Cast", {"b"}, {"b2"}, "cast_to_float");  // already float: forwards
  OnnxBuilder::attr_int(same, "to", kFloat);
  b.node("Relu", {"b2"}, {"c"}, "relu");
  b.node("Identity", {"c"}, {"y"}, "id_out");
  b.node("Neg", {"x"}, {"unused"}, "dead");
  Model model = model_from_graph(load_onnx_bytes(b.bytes(), "ids.onnx"));
  EXPECT_EQ(histogram(bound_graph(model)), (std::map<std::string, int>{{"Identity", 1}, {"Relu", 1}}));
  // A Cast that changes the dtype stays.
  OnnxBuilder r;
  r.input("x", kFloat, {2, 3}).output("y", onnx::TensorProto::INT32, {2, 3});
  OnnxBuilder::attr_int(r.node("Cast", {"x"}, {"y"}, "to_int"), "to", onnx::TensorProto::INT32);
  EXPECT_EQ(histogram(bound_graph(model_from_graph(load_onnx_bytes(r.bytes(), "cast.onnx")))), (std::map<std::string, int>{{"Cast", 1}}));
  Tensor x = ramp({2, 3});
  TensorMap out = model.run_reference({{"x", x}});
  for (int i = 0; i < 6; ++i) EXPECT_EQ(out["y"].data<float>()[i], std::max(0.f, x.data<float>()[i]));
}

TEST(Passes, BatchNormFoldsIntoConvWithSameNumbers) {
  OnnxBuilder b;
  b.input("x", kFloat, {1, 2, 5, 5}).output("y", kFloat, {1, 3, 5, 5});
  std::vector<float> w(3 * 2 * 3 * 3);
  for (size_t i = 0; i < w.size(); ++i) w[i] = 0.05f * static_cast<float>(i % 11) - 0.2f;
  b.initializer_f32("w", {3, 2, 3, 3}, w);
  b.initializer_f32("bias", {3}, {0.1f, -0.2f, 0.3f});
  b.initializer_f32("gamma", {3}, {1.5f, 0.5f, -1.f});
  b.initializer_f32("beta", {3}, {0.f, 1.f, -1.f});
  b.initializer_f32("mean", {3}, {0.2f, -0.1f, 0.f});
  b.initializer_f32("var", {3}, {1.f, 0.25f, 4.f});
  OnnxBuilder::attr_ints(b.node("Conv", {"x", "w", "bias"}, {"c"}, "conv"), "pads", {1, 1, 1, 1});
  OnnxBuilder::attr_float(b.node("BatchNormalization", {"c", "gamma", "beta", "mean", "var"}, {"y"}, "bn"), "epsilon",
                          1e-3f);
  Graph imported = load_onnx_bytes(b.bytes(), "bn.onnx");

  Graph plain = imported;  // bound but not optimised: the oracle
  bind_shapes(plain, {});
  Tensor x = ramp({1, 2, 5, 5});
  Tensor want = run_reference(plain, {{"x", x}})["y"];

  Model model = model_from_graph(imported);
  EXPECT_EQ(histogram(bound_graph(model)), (std::map<std::string, int>{{"Conv", 1}}));
  Tensor got = model.run_reference({{"x", x}})["y"];
  ASSERT_EQ(got.shape(), want.shape());
  for (int64_t i = 0; i < got.numel(); ++i) EXPECT_NEAR(got.data<float>()[i], want.data<float>()[i], 1e-5) << i;
}
