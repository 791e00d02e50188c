// MatMul and Gemm against hand-computed products.
#include <gtest/gtest.h>

#include "op_test_util.h"

using namespace grove;
using namespace grove::optest;

namespace {

// 1..n as float.
Tensor iota(Shape shape) { return iota_f32(std::move(shape), 1); }

// Products of small integers are exact.
void expect_exact(const Tensor& t, const Shape& shape, const std::vector<double>& want) { expect_tensor(t, shape, want, 0); }

}  // namespace

TEST(MatMul, Plain2D) {
  // [[1,2,3],[4,5,6]] x [[1,2],[3,4],[5,6]]
  Tensor a = iota({2, 3}), b = iota({3, 2});
  expect_exact(run(NodeBuilder("MatMul", 13, 2), {&a, &b}), {2, 2}, {22, 28, 49, 64});
}

TEST(MatMul, VectorPromotion) {
  Tensor v = iota({3}), m = iota({3, 2});
  Tensor mt = iota({2, 3});
  expect_exact(run(NodeBuilder("MatMul", 13, 2), {&v, &m}), {2}, {22, 28});
  expect_exact(run(NodeBuilder("MatMul", 13, 2), {&mt, &v}), {2}, {14, 32});
  expect_exact(run(NodeBuilder("MatMul", 13, 2), {&v, &v}), {}, {14});
  // A vector against a batch keeps the batch and drops the promoted dim.
  Tensor batch = iota({2, 3, 2}), ones = f32({3}, {1, 1, 1});
  expect_exact(run(NodeBuilder("MatMul", 13, 2), {&v, &batch}), {2, 2}, {22, 28, 58, 64});
  Tensor batch_t = iota({2, 2, 3});
  expect_exact(run(NodeBuilder("MatMul", 13, 2), {&batch_t, &ones}), {2, 2}, {6, 15, 24, 33});
}

TEST(MatMul, BroadcastBatch) {
  // a: [2,1,2,2] batch broadcast against b: [3,2,2] -> [2,3,2,2]
  Tensor a = f32({2, 1, 2, 2}, {1, 0, 0, 1, 2, 0, 0, 2});  // I and 2I
  Tensor b = iota({3, 2, 2});
  Tensor y = run(NodeBuilder("MatMul", 13, 2), {&a, &b});
  ASSERT_EQ(y.shape(), (Shape{2, 3, 2, 2}));
  std::vector<double> got = y.to_f64();
  for (int i = 0; i < 12; ++i) {
    EXPECT_EQ(got[static_cast<size_t>(i)], i + 1);
    EXPECT_EQ(got[static_cast<size_t>(12 + i)], 2 * (i + 1));
  }
  // A 2-D b is shared by every batch of a.
  Tensor c = iota({2, 2, 3}), d = f32({3, 1}, {1, 1, 1});
  expect_exact(run(NodeBuilder("MatMul", 13, 2), {&c, &d}), {2, 2, 1}, {6, 15, 24, 33});
}

TEST(MatMul, Integers) {
  Tensor a = Tensor::from<int64_t>({1, 2}, std::vector<int64_t>{3, -4});
  Tensor b = Tensor::from<int64_t>({2, 1}, std::vector<int64_t>{5, 6});
  Tensor y = run(NodeBuilder("MatMul", 13, 2), {&a, &b});
  EXPECT_EQ(y.dtype(), DType::i64);
  EXPECT_EQ(y.to_i64(), (std::vector<int64_t>{-9}));
  Tensor c = Tensor::from<int32_t>({2}, std::vector<int32_t>{2, 3});
  EXPECT_EQ(run(NodeBuilder("MatMul", 13, 2), {&c, &c}).to_i64(), (std::vector<int64_t>{13}));
}

TEST(MatMul, BadShapesThrow) {
  Tensor a = iota({2, 3}), b = iota({2, 3}), s = Tensor::scalar<float>(1);
  EXPECT_THROW(run(NodeBuilder("MatMul", 13, 2), {&a, &b}), Error);
  EXPECT_THROW(run(NodeBuilder("MatMul", 13, 2), {&s, &a}), Error);
  Tensor c = iota({2, 3, 4}), d = iota({3, 4, 2});
  EXPECT_THROW(run(NodeBuilder("MatMul", 13, 2), {&c, &d}), Error);  // batch 2 vs 3
  Tensor i = Tensor::from<int64_t>({3, 2}, std::vector<int64_t>(6, 1));
  EXPECT_THROW(run(NodeBuilder("MatMul", 13, 2), {&a, &i}), Error);  // dtype mismatch
}

TEST(Gemm, TransposesAlphaBetaAndBias) {
  Tensor a = iota({2, 3}), b = iota({3, 2});
  Tensor bias_row = f32({1, 2}, {10, 20});
  Node n = NodeBuilder("Gemm", 13, 3);
  expect_exact(run(n, {&a, &b, &bias_row}), {2, 2}, {32, 48, 59, 84});
  set_float(n, "alpha", 2.0f);
  set_float(n, "beta", 0.5f);
  Tensor bias_col = f32({2, 1}, {2, 4});
  expect_exact(run(n, {&a, &b, &bias_col}), {2, 2}, {45, 57, 100, 130});

  // A^T x B^T with A given as [3,2] and B as [2,3] is the same product.
  Node t = NodeBuilder("Gemm", 13, 2).i("transA", 1).i("transB", 1);
  Tensor at = f32({3, 2}, {1, 4, 2, 5, 3, 6}), bt = f32({2, 3}, {1, 3, 5, 2, 4, 6});
  expect_exact(run(t, {&at, &bt}), {2, 2}, {22, 28, 49, 64});
}

TEST(Gemm, ScalarBiasAndMissingC) {
  Tensor a = iota({1, 2}), b = iota({2, 3}), c = Tensor::scalar<float>(1);
  expect_exact(run(NodeBuilder("Gemm", 13, 3), {&a, &b, &c}), {1, 3}, {10, 13, 16});
  Node n = NodeBuilder("Gemm", 13, 3);
  n.inputs[2] = "";
  expect_exact(run(n, {&a, &b, nullptr}), {1, 3}, {9, 12, 15});
}

TEST(Gemm, BadShapesThrow) {
  Tensor a = iota({2, 3}), b = iota({2, 3}), v = iota({3});
  EXPECT_THROW(run(NodeBuilder("Gemm", 13, 2), {&a, &b}), Error);
  EXPECT_THROW(run(NodeBuilder("Gemm", 13, 2), {&v, &b}), Error);
  Tensor b2 = iota({3, 4}), c = iota({3, 4});  // C [3,4] cannot broadcast to [2,4]
  EXPECT_THROW(run(NodeBuilder("Gemm", 13, 3), {&a, &b2, &c}), Error);
}

// Integer products wrap as two's complement instead of overflowing (UB in int64 arithmetic,
// found by fuzz_graph): INT64_MIN squared is 2^126, 0 modulo 2^64; an int32 MatMul wraps mod 2^32.
// With beta != 1 an integer Gemm goes through double: a result past T's range saturates
// (fuzz_graph: beta * C of -1.8e19 for an int64 output was a float-cast overflow, UB).
TEST(Gemm, IntegerResultsOutsideTheRangeSaturate) {
  Tensor a(DType::i64, {1, 1}), b(DType::i64, {1, 1}), c(DType::i64, {1, 1});
  a.data<int64_t>()[0] = 1, b.data<int64_t>()[0] = 1, c.data<int64_t>()[0] = INT64_MIN;
  EXPECT_EQ(run(NodeBuilder("Gemm", 13, 3).f("beta", 2.0f), {&a, &b, &c}).data<int64_t>()[0], INT64_MIN);
  c.data<int64_t>()[0] = INT64_MAX;
  EXPECT_EQ(run(NodeBuilder("Gemm", 13, 3).f("beta", 2.0f), {&a, &b, &c}).data<int64_t>()[0], INT64_MAX);
  EXPECT_EQ(run(NodeBuilder("Gemm", 13, 3).f("alpha", 3.0f).f("beta", 0.5f), {&a, &b, &c}).data<int64_t>()[0],
            static_cast<int64_t>(3.0 + 0.5 * static_cast<double>(INT64_MAX)));
  // alpha = beta = 1 wraps instead: INT64_MAX + 1 is INT64_MIN.
  EXPECT_EQ(run(NodeBuilder("Gemm", 13, 3), {&a, &b, &c}).data<int64_t>()[0], INT64_MIN);
}

TEST(Gemm, IntegerProductsWrap) {
  Tensor a(DType::i64, {1, 1}), b(DType::i64, {1, 1});
  a.data<int64_t>()[0] = INT64_MIN;
  b.data<int64_t>()[0] = INT64_MIN;
  Tensor y = run(NodeBuilder("Gemm", 13, 2), {&a, &b});
  EXPECT_EQ(y.data<int64_t>()[0], 0);
  a.data<int64_t>()[0] = -3;
  b.data<int64_t>()[0] = 5;
  EXPECT_EQ(run(NodeBuilder("Gemm", 13, 2), {&a, &b}).data<int64_t>()[0], -15);  // read back signed
  Tensor x(DType::i32, {1, 2}), w(DType::i32, {2, 1});
  x.data<int32_t>()[0] = x.data<int32_t>()[1] = 65536;
  w.data<int32_t>()[0] = w.data<int32_t>()[1] = 32768;  // 2 * 2^31 = 2^32: 0 modulo 2^32
  Tensor z = run(NodeBuilder("MatMul", 13, 2), {&x, &w});
  EXPECT_EQ(z.data<int32_t>()[0], 0);
  w.data<int32_t>()[1] = -32768;
  EXPECT_EQ(run(NodeBuilder("MatMul", 13, 2), {&x, &w}).data<int32_t>()[0], 0);
  w.data<int32_t>()[1] = 32767;  // 2^31 + 2^31 - 65536 = 2^32 - 65536: -65536 as int32
  EXPECT_EQ(run(NodeBuilder("MatMul", 13, 2), {&x, &w}).data<int32_t>()[0], -65536);
}
