// Reductions and ArgMax/ArgMin against hand-computed values.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "op_test_util.h"

using namespace grove;
using namespace grove::optest;

namespace {

Node reduce_node(const std::string& op, int opset, std::vector<int64_t> axes = {}, int64_t keepdims = 1) {
  NodeBuilder b(op, opset, 1);
  if (!axes.empty()) b.ints("axes", std::move(axes));
  return b.i("keepdims", keepdims);
}

// [2,3] = [[1,2,3],[4,5,6]]
Tensor small() { return f32({2, 3}, {1, 2, 3, 4, 5, 6}); }

}  // namespace

TEST(Reduce, SumAxisAttributeKeepdims) {
  expect_close(run(reduce_node("ReduceSum", 11, {1}), small()), {2, 1}, {6, 15});
  expect_close(run(reduce_node("ReduceSum", 11, {0}, 0), small()), {3}, {5, 7, 9});
}

TEST(Reduce, NegativeAxesAndAll) {
  expect_close(run(reduce_node("ReduceMean", 13, {-1}, 0), small()), {2}, {2, 5});
  expect_close(run(reduce_node("ReduceMax", 13), small()), {1, 1}, {6});
  expect_close(run(reduce_node("ReduceMin", 13, {}, 0), small()), {}, {1});
}

TEST(Reduce, EveryKind) {
  Tensor x = Tensor::from<float>({2, 2}, std::vector<float>{-1, 2, 3, -4});
  expect_close(run(reduce_node("ReduceProd", 13, {1}, 0), x), {2}, {-2, -12});
  expect_close(run(reduce_node("ReduceL1", 13, {1}, 0), x), {2}, {3, 7});
  expect_close(run(reduce_node("ReduceL2", 13, {1}, 0), x), {2}, {std::sqrt(5.0), 5});
  expect_close(run(reduce_node("ReduceSumSquare", 13, {0}, 0), x), {2}, {10, 20});
  expect_close(run(reduce_node("ReduceLogSum", 13, {1}, 0), small()), {2}, {std::log(6.0), std::log(15.0)});
}

TEST(Reduce, LogSumExpIsStableForLargeInputs) {
  Tensor x = Tensor::from<float>({2}, std::vector<float>{1000, 1000});
  expect_close(run(reduce_node("ReduceLogSumExp", 13, {0}, 0), x), {}, {1000 + std::log(2.0)});
  Tensor d = Tensor::from<double>({3}, std::vector<double>{0, 1, 2});
  Tensor r = run(reduce_node("ReduceLogSumExp", 13), d);
  EXPECT_EQ(r.dtype(), DType::f64);
  expect_close(r, {1}, {std::log(1 + std::exp(1.0) + std::exp(2.0))});
}

TEST(Reduce, MiddleAxisOf3D) {
  // [2,3,2]: x[i][j][k] = 6i + 2j + k; summing j gives 18i + 3k + 6.
  Tensor x = iota_f32({2, 3, 2});
  expect_close(run(reduce_node("ReduceSum", 11, {1}), x), {2, 1, 2}, {6, 9, 24, 27});
  expect_close(run(reduce_node("ReduceSum", 11, {2, 0}, 0), x), {3}, {14, 22, 30});
}

TEST(Reduce, AxesFromInputAndNoop) {
  Node n = reduce_node("ReduceSum", 13);
  n.inputs = {"x", "axes"};
  Tensor axes = Tensor::from<int64_t>({1}, std::vector<int64_t>{0});
  expect_close(run(n, small(), axes), {1, 3}, {5, 7, 9});
  Tensor none(DType::i64, {0});
  expect_close(run(n, small(), none), {1, 1}, {21});
  set_int(n, "noop_with_empty_axes", 1);
  expect_close(run(n, small(), none), {2, 3}, {1, 2, 3, 4, 5, 6});
  // ReduceMean takes axes as input from opset 18.
  Node m = reduce_node("ReduceMean", 18, {}, 0);
  m.inputs = {"x", "axes"};
  expect_close(run(m, small(), axes), {3}, {2.5, 3.5, 4.5});
}

TEST(Reduce, Integers) {
  Tensor x = Tensor::from<int64_t>({2, 2}, std::vector<int64_t>{1, 2, 3, 5});
  Tensor s = run(reduce_node("ReduceSum", 11, {1}, 0), x);
  EXPECT_EQ(s.dtype(), DType::i64);
  EXPECT_EQ(s.to_i64(), (std::vector<int64_t>{3, 8}));
  Tensor y = Tensor::from<int32_t>({3}, std::vector<int32_t>{4, -7, 2});
  EXPECT_EQ(run(reduce_node("ReduceMax", 13), y).to_i64(), (std::vector<int64_t>{4}));
  EXPECT_EQ(run(reduce_node("ReduceL1", 13), y).to_i64(), (std::vector<int64_t>{13}));
}

TEST(Reduce, IntegerOverflowWrapsAndSaturates) {
  // Found by fuzz_graph: a ReduceSum of two INT64_MAX overflowed a signed accumulator (UB).
  // Sums and products wrap as two's complement (numpy's int64); a log or sqrt of a wrapped
  // value saturates into the dtype instead of an out-of-range conversion.
  constexpr int64_t big = std::numeric_limits<int64_t>::max(), small_ = std::numeric_limits<int64_t>::min();
  Tensor x = Tensor::from<int64_t>({2}, std::vector<int64_t>{big, big});
  EXPECT_EQ(run(reduce_node("ReduceSum", 11), x).to_i64(), (std::vector<int64_t>{-2}));
  EXPECT_EQ(run(reduce_node("ReduceProd", 13), x).to_i64(), (std::vector<int64_t>{1}));
  EXPECT_EQ(run(reduce_node("ReduceMean", 13), x).to_i64(), (std::vector<int64_t>{-1}));
  EXPECT_EQ(run(reduce_node("ReduceSumSquare", 13), x).to_i64(), (std::vector<int64_t>{2}));
  Tensor m = Tensor::from<int64_t>({1}, std::vector<int64_t>{small_});
  EXPECT_EQ(run(reduce_node("ReduceL1", 13), m).to_i64(), (std::vector<int64_t>{small_}));  // |MIN| wraps to MIN
  Tensor l = Tensor::from<int64_t>({2}, std::vector<int64_t>{small_, small_});
  EXPECT_EQ(run(reduce_node("ReduceLogSum", 13), l).to_i64(), (std::vector<int64_t>{small_}));  // sum wraps to 0: log is -inf
  EXPECT_EQ(run(reduce_node("ReduceLogSumExp", 13), x).to_i64(), (std::vector<int64_t>{big}));
}

TEST(Reduce, EmptyReductionGivesIdentity) {
  Tensor x(DType::f32, {2, 0});
  expect_close(run(reduce_node("ReduceSum", 11, {1}, 0), x), {2}, {0, 0});
  expect_close(run(reduce_node("ReduceProd", 13, {1}, 0), x), {2}, {1, 1});
}

TEST(Reduce, BadAxesThrow) {
  EXPECT_THROW(run(reduce_node("ReduceSum", 11, {2}), small()), Error);
  EXPECT_THROW(run(reduce_node("ReduceSum", 11, {-3}), small()), Error);
  EXPECT_THROW(run(reduce_node("ReduceMax", 13, {1, -1}), small()), Error);
  Tensor b(DType::boolean, {2});
  expect_unsupported([&] { run(reduce_node("ReduceSum", 11), b); });
}

TEST(ArgMax, AxisKeepdimsAndTies) {
  Tensor x = Tensor::from<float>({2, 3}, std::vector<float>{1, 3, 3, 7, 2, 7});
  Node n = reduce_node("ArgMax", 13);
  set_int(n, "axis", 1);
  Tensor r = run(n, x);
  EXPECT_EQ(r.dtype(), DType::i64);
  EXPECT_EQ(r.shape(), (Shape{2, 1}));
  EXPECT_EQ(r.to_i64(), (std::vector<int64_t>{1, 0}));
  set_int(n, "select_last_index", 1);
  EXPECT_EQ(run(n, x).to_i64(), (std::vector<int64_t>{2, 2}));
  Node m = reduce_node("ArgMin", 13, {}, 0);
  set_int(m, "axis", -2);
  Tensor mr = run(m, x);
  EXPECT_EQ(mr.shape(), (Shape{3}));
  EXPECT_EQ(mr.to_i64(), (std::vector<int64_t>{0, 1, 0}));
  set_int(m, "axis", 2);
  EXPECT_THROW(run(m, x), Error);
}
