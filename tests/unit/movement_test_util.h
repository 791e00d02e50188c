#pragma once
// Small builders for the shape, movement and resize unit tests: a node with attributes,
// typed tensors, and running a node's reference through evaluate_node.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "ops/evaluate.h"

namespace grove::optest {

struct NodeBuilder {
  Node node;
  NodeBuilder(const std::string& op, int opset, size_t inputs, size_t outputs = 1) {
    node.name = "n";
    node.op_type = op;
    node.opset = opset;
    for (size_t i = 0; i < inputs; ++i) node.inputs.push_back("in" + std::to_string(i));
    for (size_t i = 0; i < outputs; ++i) node.outputs.push_back("out" + std::to_string(i));
  }
  NodeBuilder& i(const std::string& key, int64_t v) {
    Attribute& a = node.attrs[key];
    a.kind = Attribute::Kind::i;
    a.i = v;
    return *this;
  }
  NodeBuilder& f(const std::string& key, float v) {
    Attribute& a = node.attrs[key];
    a.kind = Attribute::Kind::f;
    a.f = v;
    return *this;
  }
  NodeBuilder& s(const std::string& key, const std::string& v) {
    Attribute& a = node.attrs[key];
    a.kind = Attribute::Kind::s;
    a.s = v;
    return *this;
  }
  NodeBuilder& ints(const std::string& key, std::vector<int64_t> v) {
    Attribute& a = node.attrs[key];
    a.kind = Attribute::Kind::ints;
    a.ints = std::move(v);
    return *this;
  }
  NodeBuilder& floats(const std::string& key, std::vector<float> v) {
    Attribute& a = node.attrs[key];
    a.kind = Attribute::Kind::floats;
    a.floats = std::move(v);
    return *this;
  }
  NodeBuilder& tensor(const std::string& key, Tensor t) {
    Attribute& a = node.attrs[key];
    a.kind = Attribute::Kind::tensor;
    a.t = std::move(t);
    return *this;
  }
  operator const Node&() const { return node; }
};

inline Tensor f32(Shape shape, std::vector<float> v) { return Tensor::from<float>(std::move(shape), v); }
inline Tensor i64(Shape shape, std::vector<int64_t> v) { return Tensor::from<int64_t>(std::move(shape), v); }
inline Tensor i32(Shape shape, std::vector<int32_t> v) { return Tensor::from<int32_t>(std::move(shape), v); }
inline Tensor ints1d(std::vector<int64_t> v) {
  int64_t n = static_cast<int64_t>(v.size());
  return i64({n}, std::move(v));
}
// An arange of float32 values 0, 1, 2, ... in the given shape.
inline Tensor iota_f32(Shape shape) {
  Tensor t(DType::f32, std::move(shape));
  for (int64_t k = 0; k < t.numel(); ++k) t.data<float>()[k] = static_cast<float>(k);
  return t;
}

// All outputs; nullptr inputs are missing optional ones.
inline std::vector<Tensor> run_all(const Node& n, std::vector<const Tensor*> in) { return evaluate_node(n, in); }
inline Tensor run(const Node& n, std::vector<const Tensor*> in) { return evaluate_node(n, in).at(0); }

// Inference with nothing constant: the inputs carry only dtype and shape.
inline std::vector<ValueInfo> infer_shapes_only(const Node& n, const std::vector<const Tensor*>& in) {
  std::vector<ValueInfo> infos;
  for (const Tensor* t : in) infos.push_back(t ? ValueInfo{t->dtype(), t->shape(), nullptr, true} : ValueInfo{{}, {}, nullptr, false});
  return infer_node(n, infos);
}

inline void expect_tensor(const Tensor& t, const Shape& shape, const std::vector<double>& want, double tol = 1e-5) {
  ASSERT_EQ(shape_str(t.shape()), shape_str(shape));
  std::vector<double> got = t.to_f64();
  ASSERT_EQ(got.size(), want.size());
  for (size_t k = 0; k < want.size(); ++k) EXPECT_NEAR(got[k], want[k], tol) << "at " << k;
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

}  // namespace grove::optest
