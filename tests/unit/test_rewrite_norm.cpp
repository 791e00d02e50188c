// Graph rewrites for what torch.onnx writes at opsets below 17: Pow with a constant exponent
// (graph/rewrite_pow.cpp) and LayerNorm from its decomposed form (graph/fuse_layernorm.cpp).
// Each checks that the pass fired and that the optimised graph - on the reference executor
// and planned on the engine - computes what the unoptimised one does.
#include <gtest/gtest.h>

#include <cmath>

#include "passes/passes.h"
#include "graph_test_util.h"
#include "runtime/session.h"
#include "plan_test_util.h"
#include "runtime/reference_executor.h"

namespace grove {
namespace {

using namespace grove::test;

void expect_optimised_matches_unoptimised(const TestModel& m, double tol) {
  TensorMap unfused = run_reference(unfused_graph(m), m.inputs);
  Model model = load_test_model(m);
  expect_close(run_reference(bound_graph(model), m.inputs), unfused, tol, "reference on the optimised graph");
  Engine engine(EngineOptions{.threads = 2});
  Session session(engine, load_test_model(m));
  expect_close(session.run(m.inputs), unfused, tol, "planned on the engine");
}

Tensor positive(Shape shape, uint32_t seed) {
  Tensor t = seeded_tensor(std::move(shape), seed);
  for (int64_t i = 0; i < t.numel(); ++i) t.data<float>()[i] = std::fabs(t.data<float>()[i]) + 0.25f;
  return t;
}

TEST(RewritePow, ConstantExponentsBecomeMultipliesAndRoots) {
  const std::vector<float> exponents = {1, 2, 3, 4, 0.5f, -0.5f, -1, -2, 2.5f};
  OnnxBuilder b(13);
  b.input("x", kF32, {3, 8});
  for (size_t k = 0; k < exponents.size(); ++k) {
    const std::string c = "c" + std::to_string(k), y = "y" + std::to_string(k);
    b.initializer_f32(c, {}, {exponents[k]});
    b.node("Pow", {"x", c}, {y}, "pow" + std::to_string(k));
    b.output(y, kF32, {3, 8});
  }
  b.initializer_i64("ci", {1}, {2});  // an integer exponent
  b.node("Pow", {"x", "ci"}, {"yi"}, "pow_int");
  b.output("yi", kF32, {3, 8});
  TestModel m{"pow", b.bytes(), {{"x", positive({3, 8}, 5)}}};
  Model model = load_test_model(m);
  auto h = histogram(bound_graph(model));
  EXPECT_EQ(h["Pow"], 1);  // 2.5 stays
  EXPECT_GT(h["Mul"], 0);
  EXPECT_GT(h["Sqrt"], 0);
  EXPECT_GT(h["Reciprocal"], 0);
  expect_optimised_matches_unoptimised(m, 1e-6);
}

struct LayerNormForm {
  int opset = 13;
  bool pow = true;         // Pow(d, 2), else Mul(d, d)
  bool reciprocal = false; // Mul(d, Reciprocal(s)), else Div(d, s)
  bool eps_first = false;  // Add(eps, v)
  bool gamma = true, beta = true;
  bool eps_outside = false;  // d / (Sqrt(v) + eps): another function, must not fuse
  int axis = -1;
};

TestModel layernorm_model(const LayerNormForm& f) {
  const Shape x{2, 5, 16};
  OnnxBuilder b(f.opset);
  b.input("x", kF32, {2, 5, 16}).output("y", kF32, {2, 5, 16});
  auto reduce_mean = [&](const std::string& in, const std::string& out) {
    if (f.opset >= 18) {
      b.node("ReduceMean", {in, "axes"}, {out}, out);
    } else {
      OnnxBuilder::attr_ints(b.node("ReduceMean", {in}, {out}, out), "axes", {f.axis});
    }
  };
  if (f.opset >= 18) b.initializer_i64("axes", {1}, {f.axis});
  b.initializer_f32("two", {}, {2});
  b.initializer_f32("eps", {}, {1e-5f});
  weight(b, "gamma", {16}, 3);
  weight(b, "beta", {16}, 4);
  reduce_mean("x", "mean");
  b.node("Sub", {"x", "mean"}, {"d"}, "sub");
  if (f.pow) b.node("Pow", {"d", "two"}, {"sq"}, "pow");
  else b.node("Mul", {"d", "d"}, {"sq"}, "square");
  reduce_mean("sq", "var");
  std::string denom;
  if (f.eps_outside) {
    b.node("Sqrt", {"var"}, {"s"}, "sqrt");
    b.node("Add", {"s", "eps"}, {"denom"}, "add_eps");
  } else {
    b.node("Add", f.eps_first ? std::initializer_list<std::string>{"eps", "var"} : std::initializer_list<std::string>{"var", "eps"},
           {"ve"}, "add_eps");
    b.node("Sqrt", {"ve"}, {"denom"}, "sqrt");
  }
  const std::string n = f.gamma || f.beta ? "n" : "y";
  if (f.reciprocal) {
    b.node("Reciprocal", {"denom"}, {"r"}, "reciprocal");
    b.node("Mul", {"r", "d"}, {n}, "normalize");
  } else {
    b.node("Div", {"d", "denom"}, {n}, "normalize");
  }
  if (f.gamma) b.node("Mul", {"gamma", n}, {f.beta ? "g" : "y"}, "scale");
  if (f.beta) b.node("Add", {f.gamma ? "g" : n, "beta"}, {"y"}, "shift");
  return {"layernorm", b.bytes(), {{"x", seeded_tensor(x, 9)}}};
}

TEST(FuseLayerNorm, FusesTheFormsExportersWrite) {
  std::vector<LayerNormForm> forms = {
      {},                                                             // torch.onnx, opset 13
      {.opset = 18, .pow = false, .reciprocal = true, .beta = false}, // axes as an input
      {.opset = 11, .pow = false, .eps_first = true, .gamma = false, .beta = false, .axis = 2},
      {.opset = 13, .gamma = false},
  };
  for (const auto& f : forms) {
    SCOPED_TRACE("opset " + std::to_string(f.opset) + " pow " + std::to_string(f.pow) + " recip " +
                 std::to_string(f.reciprocal) + " gamma " + std::to_string(f.gamma) + " beta " + std::to_string(f.beta));
    TestModel m = layernorm_model(f);
    Model model = load_test_model(m);
    auto h = histogram(bound_graph(model));
    EXPECT_EQ(h["LayerNormalization"], 1);
    EXPECT_EQ(bound_graph(model).nodes.size(), 1u);
    expect_optimised_matches_unoptimised(m, 2e-5);
  }
}

TEST(FuseLayerNorm, LeavesOtherFunctionsAlone) {
  for (const auto& f : {LayerNormForm{.eps_outside = true}, LayerNormForm{.axis = 1}}) {
    TestModel m = layernorm_model(f);
    Model model = load_test_model(m);
    EXPECT_EQ(histogram(bound_graph(model))["LayerNormalization"], 0);
    expect_optimised_matches_unoptimised(m, 2e-5);
  }
}

TEST(FuseLayerNorm, IntermediateReadElsewhereBlocksTheFusion) {
  LayerNormForm f;
  TestModel m = layernorm_model(f);
  onnx::ModelProto p;
  ASSERT_TRUE(p.ParseFromString(m.bytes));
  auto* out = p.mutable_graph()->add_output();  // the mean is also a graph output
  out->set_name("mean");
  out->mutable_type()->mutable_tensor_type()->set_elem_type(kF32);
  m.bytes = p.SerializeAsString();
  Model model = load_test_model(m);
  EXPECT_EQ(histogram(bound_graph(model))["LayerNormalization"], 0);
}

// RMSNorm as LLaMA-style exports write it: Pow(x, 2) -> ReduceMean -> Add eps -> then
// Pow(-0.5) (rsqrt), Sqrt + Reciprocal, or Sqrt + Div; Mul x; Mul gamma. x is also read by a
// residual Add outside the pattern.
TestModel rmsnorm_model(int form, bool gamma) {
  OnnxBuilder b(13);
  b.input("x", kF32, {2, 5, 16}).output("y", kF32, {2, 5, 16});
  b.initializer_f32("two", {}, {2});
  b.initializer_f32("minus_half", {}, {-0.5f});
  b.initializer_f32("eps", {}, {1e-6f});
  weight(b, "gamma", {16}, 3);
  b.node("Pow", {"x", "two"}, {"sq"}, "pow");
  OnnxBuilder::attr_ints(b.node("ReduceMean", {"sq"}, {"ms"}, "mean"), "axes", {-1});
  b.node("Add", {"ms", "eps"}, {"mse"}, "add_eps");
  const std::string n = gamma ? "n" : "r";
  if (form == 0) {
    b.node("Pow", {"mse", "minus_half"}, {"inv"}, "rsqrt");
    b.node("Mul", {"x", "inv"}, {n}, "normalize");
  } else if (form == 1) {
    b.node("Sqrt", {"mse"}, {"s"}, "sqrt");
    b.node("Reciprocal", {"s"}, {"inv"}, "reciprocal");
    b.node("Mul", {"inv", "x"}, {n}, "normalize");
  } else {
    b.node("Sqrt", {"mse"}, {"s"}, "sqrt");
    b.node("Div", {"x", "s"}, {n}, "normalize");
  }
  if (gamma) b.node("Mul", {"gamma", "n"}, {"r"}, "scale");
  b.node("Add", {"r", "x"}, {"y"}, "residual");
  return {"rmsnorm", b.bytes(), {{"x", seeded_tensor({2, 5, 16}, 11)}}};
}

TEST(FuseRmsNorm, FusesTheFormsExportersWrite) {
  for (int form : {0, 1, 2})
    for (bool gamma : {true, false}) {
      SCOPED_TRACE("form " + std::to_string(form) + " gamma " + std::to_string(gamma));
      TestModel m = rmsnorm_model(form, gamma);
      Model model = load_test_model(m);
      auto h = histogram(bound_graph(model));
      EXPECT_EQ(h["RMSNormalization"], 1);
      EXPECT_EQ(bound_graph(model).nodes.size(), 2u);  // and the residual Add
      expect_optimised_matches_unoptimised(m, 2e-5);
    }
}

TEST(FuseRmsNorm, LayerNormIsNotMistakenForRmsNorm) {
  TestModel m = layernorm_model({});
  Model model = load_test_model(m);
  EXPECT_EQ(histogram(bound_graph(model))["RMSNormalization"], 0);
  EXPECT_EQ(histogram(bound_graph(model))["LayerNormalization"], 1);
}

TEST(RmsNormalization, OpMatchesItsDefinition) {
  for (int cols : {4, 16, 37}) {  // the tail loop alone, whole 16-lane blocks, both
    OnnxBuilder b(23);
    b.input("x", kF32, {3, cols}).output("y", kF32, {3, cols});
    std::vector<float> scale(static_cast<size_t>(cols));
    for (int j = 0; j < cols; ++j) scale[static_cast<size_t>(j)] = float(j + 1);
    b.initializer_f32("scale", {cols}, scale);
    OnnxBuilder::attr_float(b.node("RMSNormalization", {"x", "scale"}, {"y"}, "rms"), "epsilon", 0.5f);
    TestModel m{"rms_op", b.bytes(), {{"x", seeded_tensor({3, cols}, 2)}}};
    const float* x = m.inputs["x"].data<float>();
    std::vector<float> want(static_cast<size_t>(3 * cols));
    for (int r = 0; r < 3; ++r) {
      double ss = 0;
      for (int j = 0; j < cols; ++j) ss += double(x[r * cols + j]) * x[r * cols + j];
      for (int j = 0; j < cols; ++j)
        want[static_cast<size_t>(r * cols + j)] = float(x[r * cols + j] / std::sqrt(ss / cols + 0.5) * (j + 1));
    }
    expect_close(run_reference(unfused_graph(m), m.inputs), {{"y", Tensor::from<float>({3, cols}, want)}}, 1e-6,
                 "reference, cols " + std::to_string(cols));
    expect_optimised_matches_unoptimised(m, 1e-6);
  }
  OnnxBuilder bad(23);
  bad.input("x", kF32, {3, 4}).output("y", kF32, {3, 4});
  bad.initializer_f32("scale", {3}, {1, 2, 3});
  bad.node("RMSNormalization", {"x", "scale"}, {"y"}, "rms");
  EXPECT_THROW(model_from_graph(load_onnx_bytes(bad.bytes(), "bad.onnx")), Error);
}

}  // namespace
}  // namespace grove
