// MatMul and Gemm against hand-computed products.
#include <gtest/gtest.h>

#include "ops/evaluate.h"

using namespace grove;

namespace {

Node linalg_node(const std::string& op, size_t inputs) {
  Node n;
  n.name = "m";
  n.op_type = op;
  n.opset = 13;
  for (size_t i = 0; i < inputs; ++i) n.inputs.push_back("in" + std::to_string(i));
  n.outputs = {"y"};
  return n;
}

Tensor run(const Node& n, std::vector<const Tensor*> in) { return evaluate_node(n, in).at(0); }

Tensor f32(Shape shape, std::vector<float> v) { return Tensor::from<float>(std::move(shape), v); }

// 1..n as float.
Tensor iota(Shape shape) {
  std::vector<float> v(static_cast<size_t>(numel(shape)));
  for (size_t i = 0; i < v.size(); ++i) v[i] = static_cast<float>(i + 1);
  return Tensor::from<float>(std::move(shape), v);
}

void expect_f32(const Tensor& t, const Shape& shape, const std::vector<double>& want) {
  EXPECT_EQ(t.shape(), shape);
  EXPECT_EQ(t.to_f64(), want);
}

}  // namespace

TEST(MatMul, Plain2D) {
  // [[1,2,3],[4,5,6]] x [[1,2],[3,4],[5,6]]
  Tensor a = iota({2, 3}), b = iota({3, 2});
  expect_f32(run(linalg_node("MatMul", 2), {&a, &b}), {2, 2}, {22, 28, 49, 64});
}

TEST(MatMul, VectorPromotion) {
  Tensor v = iota({3}), m = iota({3, 2});
  Tensor mt = iota({2, 3});
  expect_f32(run(linalg_node("MatMul", 2), {&v, &m}), {2}, {22, 28});
  expect_f32(run(linalg_node("MatMul", 2), {&mt, &v}), {2}, {14, 32});
  expect_f32(run(linalg_node("MatMul", 2), {&v, &v}), {}, {14});
  // A vector against a batch keeps the batch and drops the promoted dim.
  Tensor batch = iota({2, 3, 2}), ones = f32({3}, {1, 1, 1});
  expect_f32(run(linalg_node("MatMul", 2), {&v, &batch}), {2, 2}, {22, 28, 58, 64});
  Tensor batch_t = iota({2, 2, 3});
  expect_f32(run(linalg_node("MatMul", 2), {&batch_t, &ones}), {2, 2}, {6, 15, 24, 33});
}

TEST(MatMul, BroadcastBatch) {
  // a: [2,1,2,2] batch broadcast against b: [3,2,2] -> [2,3,2,2]
  Tensor a = f32({2, 1, 2, 2}, {1, 0, 0, 1, 2, 0, 0, 2});  // I and 2I
  Tensor b = iota({3, 2, 2});
  Tensor y = run(linalg_node("MatMul", 2), {&a, &b});
  ASSERT_EQ(y.shape(), (Shape{2, 3, 2, 2}));
  std::vector<double> got = y.to_f64();
  for (int i = 0; i < 12; ++i) {
    EXPECT_EQ(got[static_cast<size_t>(i)], i + 1);
    EXPECT_EQ(got[static_cast<size_t>(12 + i)], 2 * (i + 1));
  }
  // A 2-D b is shared by every batch of a.
  Tensor c = iota({2, 2, 3}), d = f32({3, 1}, {1, 1, 1});
  expect_f32(run(linalg_node("MatMul", 2), {&c, &d}), {2, 2, 1}, {6, 15, 24, 33});
}

TEST(MatMul, Integers) {
  Tensor a = Tensor::from<int64_t>({1, 2}, std::vector<int64_t>{3, -4});
  Tensor b = Tensor::from<int64_t>({2, 1}, std::vector<int64_t>{5, 6});
  Tensor y = run(linalg_node("MatMul", 2), {&a, &b});
  EXPECT_EQ(y.dtype(), DType::i64);
  EXPECT_EQ(y.to_i64(), (std::vector<int64_t>{-9}));
  Tensor c = Tensor::from<int32_t>({2}, std::vector<int32_t>{2, 3});
  EXPECT_EQ(run(linalg_node("MatMul", 2), {&c, &c}).to_i64(), (std::vector<int64_t>{13}));
}

TEST(MatMul, BadShapesThrow) {
  Tensor a = iota({2, 3}), b = iota({2, 3}), s = Tensor::scalar<float>(1);
  EXPECT_THROW(run(linalg_node("MatMul", 2), {&a, &b}), Error);
  EXPECT_THROW(run(linalg_node("MatMul", 2), {&s, &a}), Error);
  Tensor c = iota({2, 3, 4}), d = iota({3, 4, 2});
  EXPECT_THROW(run(linalg_node("MatMul", 2), {&c, &d}), Error);  // batch 2 vs 3
  Tensor i = Tensor::from<int64_t>({3, 2}, std::vector<int64_t>(6, 1));
  EXPECT_THROW(run(linalg_node("MatMul", 2), {&a, &i}), Error);  // dtype mismatch
}

TEST(Gemm, TransposesAlphaBetaAndBias) {
  Tensor a = iota({2, 3}), b = iota({3, 2});
  Tensor bias_row = f32({1, 2}, {10, 20});
  Node n = linalg_node("Gemm", 3);
  expect_f32(run(n, {&a, &b, &bias_row}), {2, 2}, {32, 48, 59, 84});
  Attribute alpha{.kind = Attribute::Kind::f, .f = 2.0f};
  Attribute beta{.kind = Attribute::Kind::f, .f = 0.5f};
  n.attrs["alpha"] = alpha;
  n.attrs["beta"] = beta;
  Tensor bias_col = f32({2, 1}, {2, 4});
  expect_f32(run(n, {&a, &b, &bias_col}), {2, 2}, {45, 57, 100, 130});

  // A^T x B^T with A given as [3,2] and B as [2,3] is the same product.
  Node t = linalg_node("Gemm", 2);
  t.attrs["transA"] = Attribute{.kind = Attribute::Kind::i, .i = 1};
  t.attrs["transB"] = Attribute{.kind = Attribute::Kind::i, .i = 1};
  Tensor at = f32({3, 2}, {1, 4, 2, 5, 3, 6}), bt = f32({2, 3}, {1, 3, 5, 2, 4, 6});
  expect_f32(run(t, {&at, &bt}), {2, 2}, {22, 28, 49, 64});
}

TEST(Gemm, ScalarBiasAndMissingC) {
  Tensor a = iota({1, 2}), b = iota({2, 3}), c = Tensor::scalar<float>(1);
  expect_f32(run(linalg_node("Gemm", 3), {&a, &b, &c}), {1, 3}, {10, 13, 16});
  Node n = linalg_node("Gemm", 3);
  n.inputs[2] = "";
  expect_f32(run(n, {&a, &b, nullptr}), {1, 3}, {9, 12, 15});
}

TEST(Gemm, BadShapesThrow) {
  Tensor a = iota({2, 3}), b = iota({2, 3}), v = iota({3});
  EXPECT_THROW(run(linalg_node("Gemm", 2), {&a, &b}), Error);
  EXPECT_THROW(run(linalg_node("Gemm", 2), {&v, &b}), Error);
  Tensor b2 = iota({3, 4}), c = iota({3, 4});  // C [3,4] cannot broadcast to [2,4]
  EXPECT_THROW(run(linalg_node("Gemm", 3), {&a, &b2, &c}), Error);
}
