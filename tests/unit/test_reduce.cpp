// Reductions and ArgMax/ArgMin against hand-computed values.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "ops/evaluate.h"

using namespace grove;

namespace {

Node reduce_node(const std::string& op, int opset, std::vector<int64_t> axes = {}, int64_t keepdims = 1) {
  Node n;
  n.name = "r";
  n.op_type = op;
  n.opset = opset;
  n.inputs = {"x"};
  n.outputs = {"y"};
  if (!axes.empty()) {
    Attribute a;
    a.kind = Attribute::Kind::ints;
    a.ints = std::move(axes);
    n.attrs["axes"] = a;
  }
  Attribute k;
  k.kind = Attribute::Kind::i;
  k.i = keepdims;
  n.attrs["keepdims"] = k;
  return n;
}

void set_int(Node& n, const std::string& key, int64_t v) {
  Attribute a;
  a.kind = Attribute::Kind::i;
  a.i = v;
  n.attrs[key] = a;
}

Tensor eval1(const Node& n, const Tensor& x) {
  const Tensor* in[] = {&x};
  return evaluate_node(n, in).at(0);
}

Tensor eval2(const Node& n, const Tensor& x, const Tensor& y) {
  const Tensor* in[] = {&x, &y};
  return evaluate_node(n, in).at(0);
}

// [2,3] = [[1,2,3],[4,5,6]]
Tensor small() { return Tensor::from<float>({2, 3}, std::vector<float>{1, 2, 3, 4, 5, 6}); }

void expect_values(const Tensor& t, const Shape& shape, const std::vector<double>& want) {
  EXPECT_EQ(t.shape(), shape);
  std::vector<double> got = t.to_f64();
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < want.size(); ++i) EXPECT_NEAR(got[i], want[i], 1e-5 * (1 + std::fabs(want[i]))) << "at " << i;
}

}  // namespace

TEST(Reduce, SumAxisAttributeKeepdims) {
  expect_values(eval1(reduce_node("ReduceSum", 11, {1}), small()), {2, 1}, {6, 15});
  expect_values(eval1(reduce_node("ReduceSum", 11, {0}, 0), small()), {3}, {5, 7, 9});
}

TEST(Reduce, NegativeAxesAndAll) {
  expect_values(eval1(reduce_node("ReduceMean", 13, {-1}, 0), small()), {2}, {2, 5});
  expect_values(eval1(reduce_node("ReduceMax", 13), small()), {1, 1}, {6});
  expect_values(eval1(reduce_node("ReduceMin", 13, {}, 0), small()), {}, {1});
}

TEST(Reduce, EveryKind) {
  Tensor x = Tensor::from<float>({2, 2}, std::vector<float>{-1, 2, 3, -4});
  expect_values(eval1(reduce_node("ReduceProd", 13, {1}, 0), x), {2}, {-2, -12});
  expect_values(eval1(reduce_node("ReduceL1", 13, {1}, 0), x), {2}, {3, 7});
  expect_values(eval1(reduce_node("ReduceL2", 13, {1}, 0), x), {2}, {std::sqrt(5.0), 5});
  expect_values(eval1(reduce_node("ReduceSumSquare", 13, {0}, 0), x), {2}, {10, 20});
  expect_values(eval1(reduce_node("ReduceLogSum", 13, {1}, 0), small()), {2}, {std::log(6.0), std::log(15.0)});
}

TEST(Reduce, LogSumExpIsStableForLargeInputs) {
  Tensor x = Tensor::from<float>({2}, std::vector<float>{1000, 1000});
  expect_values(eval1(reduce_node("ReduceLogSumExp", 13, {0}, 0), x), {}, {1000 + std::log(2.0)});
  Tensor d = Tensor::from<double>({3}, std::vector<double>{0, 1, 2});
  Tensor r = eval1(reduce_node("ReduceLogSumExp", 13), d);
  EXPECT_EQ(r.dtype(), DType::f64);
  expect_values(r, {1}, {std::log(1 + std::exp(1.0) + std::exp(2.0))});
}

TEST(Reduce, MiddleAxisOf3D) {
  // [2,3,2]: x[i][j][k] = 6i + 2j + k; summing j gives 18i + 3k + 6.
  std::vector<float> v(12);
  for (int i = 0; i < 12; ++i) v[i] = static_cast<float>(i);
  Tensor x = Tensor::from<float>({2, 3, 2}, v);
  expect_values(eval1(reduce_node("ReduceSum", 11, {1}), x), {2, 1, 2}, {6, 9, 24, 27});
  expect_values(eval1(reduce_node("ReduceSum", 11, {2, 0}, 0), x), {3}, {14, 22, 30});
}

TEST(Reduce, AxesFromInputAndNoop) {
  Node n = reduce_node("ReduceSum", 13);
  n.inputs = {"x", "axes"};
  Tensor axes = Tensor::from<int64_t>({1}, std::vector<int64_t>{0});
  expect_values(eval2(n, small(), axes), {1, 3}, {5, 7, 9});
  Tensor none(DType::i64, {0});
  expect_values(eval2(n, small(), none), {1, 1}, {21});
  set_int(n, "noop_with_empty_axes", 1);
  expect_values(eval2(n, small(), none), {2, 3}, {1, 2, 3, 4, 5, 6});
  // ReduceMean takes axes as input from opset 18.
  Node m = reduce_node("ReduceMean", 18, {}, 0);
  m.inputs = {"x", "axes"};
  expect_values(eval2(m, small(), axes), {3}, {2.5, 3.5, 4.5});
}

TEST(Reduce, Integers) {
  Tensor x = Tensor::from<int64_t>({2, 2}, std::vector<int64_t>{1, 2, 3, 5});
  Tensor s = eval1(reduce_node("ReduceSum", 11, {1}, 0), x);
  EXPECT_EQ(s.dtype(), DType::i64);
  EXPECT_EQ(s.to_i64(), (std::vector<int64_t>{3, 8}));
  Tensor y = Tensor::from<int32_t>({3}, std::vector<int32_t>{4, -7, 2});
  EXPECT_EQ(eval1(reduce_node("ReduceMax", 13), y).to_i64(), (std::vector<int64_t>{4}));
  EXPECT_EQ(eval1(reduce_node("ReduceL1", 13), y).to_i64(), (std::vector<int64_t>{13}));
}

TEST(Reduce, EmptyReductionGivesIdentity) {
  Tensor x(DType::f32, {2, 0});
  expect_values(eval1(reduce_node("ReduceSum", 11, {1}, 0), x), {2}, {0, 0});
  expect_values(eval1(reduce_node("ReduceProd", 13, {1}, 0), x), {2}, {1, 1});
}

TEST(Reduce, BadAxesThrow) {
  EXPECT_THROW(eval1(reduce_node("ReduceSum", 11, {2}), small()), Error);
  EXPECT_THROW(eval1(reduce_node("ReduceSum", 11, {-3}), small()), Error);
  EXPECT_THROW(eval1(reduce_node("ReduceMax", 13, {1, -1}), small()), Error);
  Tensor b(DType::boolean, {2});
  try {
    eval1(reduce_node("ReduceSum", 11), b);
    FAIL() << "bool reduction should be unsupported";
  } catch (const Error& e) {
    EXPECT_TRUE(e.unsupported());
  }
}

TEST(ArgMax, AxisKeepdimsAndTies) {
  Tensor x = Tensor::from<float>({2, 3}, std::vector<float>{1, 3, 3, 7, 2, 7});
  Node n = reduce_node("ArgMax", 13);
  set_int(n, "axis", 1);
  Tensor r = eval1(n, x);
  EXPECT_EQ(r.dtype(), DType::i64);
  EXPECT_EQ(r.shape(), (Shape{2, 1}));
  EXPECT_EQ(r.to_i64(), (std::vector<int64_t>{1, 0}));
  set_int(n, "select_last_index", 1);
  EXPECT_EQ(eval1(n, x).to_i64(), (std::vector<int64_t>{2, 2}));
  Node m = reduce_node("ArgMin", 13, {}, 0);
  set_int(m, "axis", -2);
  Tensor mr = eval1(m, x);
  EXPECT_EQ(mr.shape(), (Shape{3}));
  EXPECT_EQ(mr.to_i64(), (std::vector<int64_t>{0, 1, 0}));
  set_int(m, "axis", 2);
  EXPECT_THROW(eval1(m, x), Error);
}
