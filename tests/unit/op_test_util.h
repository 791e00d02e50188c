#pragma once
// Shared scaffolding for the operator unit tests: building a node with attributes, typed
// tensors, running a node's reference through evaluate_node, and comparing the results with
// hand-computed values. Every op test uses these so a change to Node or evaluate_node is made
// once, here.
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "ops/evaluate.h"

namespace grove::optest {

// Attribute setters for a node that a test changes between runs; they replace any earlier value.
inline Attribute& fresh_attr(Node& n, const std::string& key, Attribute::Kind kind) {
  Attribute& a = n.attrs[key] = Attribute{};
  a.kind = kind;
  return a;
}
inline void set_int(Node& n, const std::string& key, int64_t v) { fresh_attr(n, key, Attribute::Kind::i).i = v; }
inline void set_float(Node& n, const std::string& key, float v) { fresh_attr(n, key, Attribute::Kind::f).f = v; }
inline void set_string(Node& n, const std::string& key, std::string v) {
  fresh_attr(n, key, Attribute::Kind::s).s = std::move(v);
}
inline void set_ints(Node& n, const std::string& key, std::vector<int64_t> v) {
  fresh_attr(n, key, Attribute::Kind::ints).ints = std::move(v);
}
inline void set_floats(Node& n, const std::string& key, std::vector<float> v) {
  fresh_attr(n, key, Attribute::Kind::floats).floats = std::move(v);
}
inline void set_tensor(Node& n, const std::string& key, Tensor t) {
  fresh_attr(n, key, Attribute::Kind::tensor).t = std::move(t);
}

// A node with inputs in0.. and outputs out0..; converts to Node, so it can be passed to run or
// copied into a Node that the test keeps changing with the set_* functions.
struct NodeBuilder {
  Node node;
  NodeBuilder(const std::string& op, int opset, size_t inputs, size_t outputs = 1) {
    node.name = "n";
    node.op_type = op;
    node.opset = opset;
    for (size_t i = 0; i < inputs; ++i) node.inputs.push_back("in" + std::to_string(i));
    for (size_t i = 0; i < outputs; ++i) node.outputs.push_back("out" + std::to_string(i));
  }
  NodeBuilder& i(const std::string& key, int64_t v) { return set(set_int, key, v); }
  NodeBuilder& f(const std::string& key, float v) { return set(set_float, key, v); }
  NodeBuilder& s(const std::string& key, std::string v) { return set(set_string, key, std::move(v)); }
  NodeBuilder& ints(const std::string& key, std::vector<int64_t> v) { return set(set_ints, key, std::move(v)); }
  NodeBuilder& floats(const std::string& key, std::vector<float> v) { return set(set_floats, key, std::move(v)); }
  NodeBuilder& tensor(const std::string& key, Tensor t) { return set(set_tensor, key, std::move(t)); }
  // Decisions as the passes and the plan write them (graph/node_decisions.h). `fused` names
  // what an epilogue joined ("Add+Relu"); "" with an activation leaves the node unlabelled.
  NodeBuilder& epilogue(std::string fused, FusedActivation activation = FusedActivation::none, float alpha = 0,
                        float beta = 0) {
    FusedEpilogue& e = node.decisions.epilogue;
    e.fused = std::move(fused);
    e.activation = activation;
    e.alpha = alpha;
    e.beta = beta;
    return *this;
  }
  NodeBuilder& primitive(ConvPrimitive p) {
    node.decisions.conv = p;
    return *this;
  }
  NodeBuilder& precision(NodePrecision p) {
    node.decisions.precision = p;
    return *this;
  }
  operator const Node&() const { return node; }

 private:
  template <class Setter, class V>
  NodeBuilder& set(Setter setter, const std::string& key, V&& v) {
    setter(node, key, std::forward<V>(v));
    return *this;
  }
};

inline Tensor f32(Shape shape, std::vector<float> v) { return Tensor::from<float>(std::move(shape), v); }
inline Tensor i64(Shape shape, std::vector<int64_t> v) { return Tensor::from<int64_t>(std::move(shape), v); }
inline Tensor i32(Shape shape, std::vector<int32_t> v) { return Tensor::from<int32_t>(std::move(shape), v); }
inline Tensor ints1d(std::vector<int64_t> v) {
  int64_t n = static_cast<int64_t>(v.size());
  return i64({n}, std::move(v));
}
// float32 values start, start + 1, ... in the given shape.
inline Tensor iota_f32(Shape shape, float start = 0) {
  Tensor t(DType::f32, std::move(shape));
  for (int64_t k = 0; k < t.numel(); ++k) t.data<float>()[k] = start + static_cast<float>(k);
  return t;
}

// All outputs; nullptr inputs are missing optional ones.
inline std::vector<Tensor> run_all(const Node& n, std::vector<const Tensor*> in) { return evaluate_node(n, in); }
inline Tensor run(const Node& n, std::vector<const Tensor*> in) { return evaluate_node(n, in).at(0); }
// The first output, with the inputs by reference so that temporaries can be passed.
template <class... Rest>
Tensor run(const Node& n, const Tensor& first, const Rest&... rest) {
  return run(n, std::vector<const Tensor*>{&first, &rest...});
}

// Inference with nothing constant: the inputs carry only dtype and shape.
inline std::vector<ValueInfo> infer_shapes_only(const Node& n, const std::vector<const Tensor*>& in) {
  std::vector<ValueInfo> infos;
  for (const Tensor* t : in) infos.push_back(t ? ValueInfo{t->dtype(), t->shape(), nullptr, true} : ValueInfo{{}, {}, nullptr, false});
  return infer_node(n, infos);
}

// Values within an absolute tolerance; `tol` 0 asks for exact equality.
inline void expect_tensor(const Tensor& t, const Shape& shape, const std::vector<double>& want, double tol = 1e-5) {
  ASSERT_EQ(shape_str(t.shape()), shape_str(shape));
  std::vector<double> got = t.to_f64();
  ASSERT_EQ(got.size(), want.size());
  for (size_t k = 0; k < want.size(); ++k) EXPECT_NEAR(got[k], want[k], tol) << "at " << k;
}

// A float32 result within 1e-5 of `want`.
inline void expect_f32(const Tensor& t, const Shape& shape, const std::vector<double>& want) {
  ASSERT_EQ(t.dtype(), DType::f32);
  expect_tensor(t, shape, want);
}

// Values within 1e-5 relative to their size (for exp/log results); a NaN wants NaN and an
// infinity wants the same infinity.
inline void expect_close(const Tensor& t, const Shape& shape, const std::vector<double>& want) {
  EXPECT_EQ(t.shape(), shape);
  std::vector<double> got = t.to_f64();
  ASSERT_EQ(got.size(), want.size());
  for (size_t k = 0; k < want.size(); ++k) {
    if (std::isnan(want[k])) EXPECT_TRUE(std::isnan(got[k])) << "at " << k;
    else if (std::isinf(want[k])) EXPECT_EQ(got[k], want[k]) << "at " << k;
    else EXPECT_NEAR(got[k], want[k], 1e-5 * (1 + std::fabs(want[k]))) << "at " << k;
  }
}
inline void expect_close(const Tensor& t, DType dtype, const Shape& shape, const std::vector<double>& want) {
  EXPECT_EQ(t.dtype(), dtype);
  expect_close(t, shape, want);
}

// Runs `f`, expects a grove::Error whose message contains `needle`; returns whether it was unsupported.
template <class F>
bool expect_error(F&& f, const std::string& needle) {
  try {
    f();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
    return e.unsupported();
  }
  ADD_FAILURE() << "expected an Error containing '" << needle << "'";
  return false;
}

// Runs `f`, expects the Unsupported error that the conformance runner counts as a skip.
template <class F>
void expect_unsupported(F&& f) {
  try {
    f();
  } catch (const Error& e) {
    EXPECT_TRUE(e.unsupported()) << e.what();
    return;
  }
  ADD_FAILURE() << "expected an Unsupported error";
}
inline void expect_unsupported(const Node& n, std::vector<const Tensor*> in) {
  expect_unsupported([&] { run_all(n, in); });
}

}  // namespace grove::optest
