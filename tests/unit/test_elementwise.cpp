// Elementwise ops (arithmetic, math, compare, logic, Where, Cast) against hand-computed values.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "op_test_util.h"

using namespace grove;
using namespace grove::optest;

namespace {

Tensor run_op(const std::string& op, std::vector<const Tensor*> in) { return run(NodeBuilder(op, 13, in.size()), in); }

template <class T>
Tensor tensor(Shape shape, std::vector<T> values) {
  return Tensor::from<T>(std::move(shape), std::span<const T>(values));
}

Tensor boolean(Shape shape, std::vector<bool> values) {
  Tensor t(DType::boolean, std::move(shape));
  for (size_t i = 0; i < values.size(); ++i) t.data<bool>()[i] = values[i];
  return t;
}

}  // namespace

TEST(Elementwise, AddBroadcastsRowAndColumn) {
  Tensor a = f32({2, 1}, {10, 20});
  Tensor b = f32({3}, {1, 2, 3});
  expect_close(run_op("Add", {&a, &b}), DType::f32, {2, 3}, {11, 12, 13, 21, 22, 23});
}

TEST(Elementwise, SubBroadcastsMiddleAxisAndScalar) {
  Tensor a = f32({2, 2, 2}, {1, 2, 3, 4, 5, 6, 7, 8});
  Tensor b = f32({2, 1}, {1, 2});  // broadcast over the first and last axes
  expect_close(run_op("Sub", {&a, &b}), DType::f32, {2, 2, 2}, {0, 1, 1, 2, 4, 5, 5, 6});
  Tensor s = Tensor::scalar<float>(1);
  expect_close(run_op("Sub", {&s, &b}), DType::f32, {2, 1}, {0, -1});
}

TEST(Elementwise, BroadcastWithZeroSizedDim) {
  Tensor a(DType::f32, {0, 3});
  Tensor b = f32({3}, {1, 2, 3});
  Tensor y = run_op("Mul", {&a, &b});
  EXPECT_EQ(y.shape(), (Shape{0, 3}));
}

TEST(Elementwise, IncompatibleShapesAndDtypesThrow) {
  Tensor a = f32({2, 3}, {1, 2, 3, 4, 5, 6});
  Tensor b = f32({2}, {1, 2});
  EXPECT_THROW(run_op("Add", {&a, &b}), Error);
  Tensor c = i64({3}, {1, 2, 3});
  EXPECT_THROW(run_op("Add", {&a, &c}), Error);
  EXPECT_THROW(run_op("Add", {&a}), Error);
}

TEST(Elementwise, IntegerArithmeticWrapsAndDivTruncates) {
  Tensor a = i32({4}, {7, -7, 7, std::numeric_limits<int32_t>::min()});
  Tensor b = i32({4}, {2, 2, -2, -1});
  expect_close(run_op("Div", {&a, &b}), DType::i32, {4}, {3, -3, -3, static_cast<double>(std::numeric_limits<int32_t>::min())});
  Tensor m = i32({1}, {std::numeric_limits<int32_t>::max()});
  Tensor one = i32({1}, {1});
  expect_close(run_op("Add", {&m, &one}), DType::i32, {1}, {static_cast<double>(std::numeric_limits<int32_t>::min())});
  Tensor u = tensor<uint8_t>({2}, {250, 3});
  Tensor v = tensor<uint8_t>({2}, {10, 5});
  expect_close(run_op("Add", {&u, &v}), DType::u8, {2}, {4, 8});
  expect_close(run_op("Sub", {&u, &v}), DType::u8, {2}, {240, 254});
}

TEST(Elementwise, IntegerDivisionByZeroThrows) {
  Tensor a = i64({2}, {1, 2});
  Tensor b = i64({2}, {1, 0});
  EXPECT_THROW(run_op("Div", {&a, &b}), Error);
  Tensor x = f32({1}, {1});
  Tensor z = f32({1}, {0});
  EXPECT_TRUE(std::isinf(run_op("Div", {&x, &z}).data<float>()[0]));
}

TEST(Elementwise, ModFollowsDivisorSignUnlessFmod) {
  Tensor a = i64({4}, {5, -5, 5, -5});
  Tensor b = i64({4}, {3, 3, -3, -3});
  Node n = NodeBuilder("Mod", 13, 2);
  expect_close(run(n, {&a, &b}), DType::i64, {4}, {2, 1, -1, -2});
  set_int(n, "fmod", 1);
  expect_close(run(n, {&a, &b}), DType::i64, {4}, {2, -2, 2, -2});
  Tensor fa = f32({2}, {-4.5f, 4.5f});
  Tensor fb = f32({2}, {2, -2});
  expect_close(run(n, {&fa, &fb}), DType::f32, {2}, {-0.5, 0.5});
  set_int(n, "fmod", 2);
  EXPECT_THROW(run(n, {&a, &b}), Error);
  Tensor zero = i64({1}, {0});
  EXPECT_THROW(run_op("Mod", {&a, &zero}), Error);
}

TEST(Elementwise, PowMixedDtypes) {
  Tensor fbase = f32({3}, {2, 4, -2});
  Tensor iexp = i64({3}, {3, -1, 2});
  expect_close(run_op("Pow", {&fbase, &iexp}), DType::f32, {3}, {8, 0.25, 4});
  Tensor ibase = i64({3}, {2, -3, 5});
  expect_close(run_op("Pow", {&ibase, &iexp}), DType::i64, {3}, {8, 0, 25});
  Tensor half = f32({1}, {0.5f});
  Tensor sq = i32({2}, {16, 10});
  expect_close(run_op("Pow", {&sq, &half}), DType::i32, {2}, {4, 3});  // float result truncated
  Tensor big = i64({1}, {3});
  Tensor e40 = i64({1}, {39});
  EXPECT_EQ(run_op("Pow", {&big, &e40}).data<int64_t>()[0], 4052555153018976267LL);  // 3^39, exact
}

TEST(Elementwise, VariadicMinMaxSumMean) {
  Tensor a = f32({3}, {1, 5, 3});
  Tensor b = f32({1}, {2});
  Tensor c = f32({2, 1}, {0, 4});
  expect_close(run_op("Max", {&a, &b, &c}), DType::f32, {2, 3}, {2, 5, 3, 4, 5, 4});
  expect_close(run_op("Min", {&a, &b, &c}), DType::f32, {2, 3}, {0, 0, 0, 1, 2, 2});
  expect_close(run_op("Sum", {&a, &b, &c}), DType::f32, {2, 3}, {3, 7, 5, 7, 11, 9});
  expect_close(run_op("Mean", {&a, &b, &c}), DType::f32, {2, 3}, {1, 7.0 / 3, 5.0 / 3, 7.0 / 3, 11.0 / 3, 3});
  expect_close(run_op("Max", {&a}), DType::f32, {3}, {1, 5, 3});
  Tensor n = f32({1}, {NAN});
  expect_close(run_op("Max", {&a, &n}), DType::f32, {3}, {NAN, NAN, NAN});
  Tensor i = i64({2}, {-1, 7});
  Tensor j = i64({2}, {3, 2});
  expect_close(run_op("Min", {&i, &j}), DType::i64, {2}, {-1, 2});
  EXPECT_THROW(run_op("Mean", {&i, &j}), Error);
  EXPECT_THROW(run_op("Max", {&a, &i}), Error);
}

TEST(Elementwise, BitShift) {
  Tensor x = tensor<uint8_t>({3}, {16, 4, 1});
  Tensor s = tensor<uint8_t>({3}, {1, 2, 9});
  Node n = NodeBuilder("BitShift", 13, 2);
  set_string(n, "direction", "LEFT");
  expect_close(run(n, {&x, &s}), DType::u8, {3}, {32, 16, 0});
  set_string(n, "direction", "RIGHT");
  expect_close(run(n, {&x, &s}), DType::u8, {3}, {8, 1, 0});
  set_string(n, "direction", "UP");
  EXPECT_THROW(run(n, {&x, &s}), Error);
  // Shape inference alone already rejects the attribute.
  std::vector<ValueInfo> infos{{DType::u8, {3}}, {DType::u8, {3}}};
  EXPECT_THROW(infer_node(n, infos), Error);
  Tensor f = f32({3}, {1, 2, 3});
  EXPECT_THROW(run_op("BitShift", {&f, &f}), Error);  // unsigned integers only
}

TEST(Elementwise, UnaryMath) {
  Tensor x = f32({4}, {-2.5f, -0.5f, 0.5f, 2.5f});
  expect_close(run_op("Round", {&x}), DType::f32, {4}, {-2, -0, 0, 2});  // half to even
  Tensor r = f32({3}, {1.5f, -1.5f, 2.6f});
  expect_close(run_op("Round", {&r}), DType::f32, {3}, {2, -2, 3});
  expect_close(run_op("Floor", {&x}), DType::f32, {4}, {-3, -1, 0, 2});
  expect_close(run_op("Ceil", {&x}), DType::f32, {4}, {-2, -0, 1, 3});
  expect_close(run_op("Abs", {&x}), DType::f32, {4}, {2.5, 0.5, 0.5, 2.5});
  expect_close(run_op("Neg", {&x}), DType::f32, {4}, {2.5, 0.5, -0.5, -2.5});
  expect_close(run_op("Reciprocal", {&x}), DType::f32, {4}, {-0.4, -2, 2, 0.4});
  Tensor p = f32({3}, {0, 1, 4});
  expect_close(run_op("Sqrt", {&p}), DType::f32, {3}, {0, 1, 2});
  expect_close(run_op("Exp", {&p}), DType::f32, {3}, {1, std::exp(1.0), std::exp(4.0)});
  expect_close(run_op("Log", {&p}), DType::f32, {3}, {-INFINITY, 0, std::log(4.0)});
  expect_close(run_op("Erf", {&p}), DType::f32, {3}, {0, std::erf(1.0), std::erf(4.0)});
  expect_close(run_op("Sin", {&p}), DType::f32, {3}, {0, std::sin(1.0), std::sin(4.0)});
  expect_close(run_op("Atanh", {&x}), DType::f32, {4}, {NAN, std::atanh(-0.5), std::atanh(0.5), NAN});
  Tensor s = f32({4}, {-3, 0, 2, NAN});
  expect_close(run_op("Sign", {&s}), DType::f32, {4}, {-1, 0, 1, NAN});
  Tensor i = i64({3}, {-3, 0, std::numeric_limits<int64_t>::min()});
  expect_close(run_op("Sign", {&i}), DType::i64, {3}, {-1, 0, -1});
  expect_close(run_op("Abs", {&i}), DType::i64, {3}, {3, 0, static_cast<double>(std::numeric_limits<int64_t>::min())});
  expect_close(run_op("Neg", {&i}), DType::i64, {3}, {3, 0, static_cast<double>(std::numeric_limits<int64_t>::min())});
  EXPECT_THROW(run_op("Sqrt", {&i}), Error);  // float only
  Tensor h(DType::f16, {2});
  expect_unsupported([&] { run_op("Sqrt", {&h}); });
}

TEST(Elementwise, CompareAndLogic) {
  Tensor a = i64({2, 2}, {1, 2, 3, 4});
  Tensor b = i64({2}, {2, 3});
  expect_close(run_op("Equal", {&a, &b}), DType::boolean, {2, 2}, {0, 0, 0, 0});
  expect_close(run_op("Less", {&a, &b}), DType::boolean, {2, 2}, {1, 1, 0, 0});
  expect_close(run_op("LessOrEqual", {&a, &b}), DType::boolean, {2, 2}, {1, 1, 0, 0});
  expect_close(run_op("Greater", {&a, &b}), DType::boolean, {2, 2}, {0, 0, 1, 1});
  expect_close(run_op("GreaterOrEqual", {&a, &b}), DType::boolean, {2, 2}, {0, 0, 1, 1});
  Tensor c = i64({1}, {2});
  expect_close(run_op("Equal", {&a, &c}), DType::boolean, {2, 2}, {0, 1, 0, 0});
  Tensor n = f32({2}, {NAN, 1});
  expect_close(run_op("Equal", {&n, &n}), DType::boolean, {2}, {0, 1});
  Tensor p = boolean({2, 2}, {true, true, false, false});
  Tensor q = boolean({2}, {true, false});
  expect_close(run_op("And", {&p, &q}), DType::boolean, {2, 2}, {1, 0, 0, 0});
  expect_close(run_op("Or", {&p, &q}), DType::boolean, {2, 2}, {1, 1, 1, 0});
  expect_close(run_op("Xor", {&p, &q}), DType::boolean, {2, 2}, {0, 1, 1, 0});
  expect_close(run_op("Not", {&q}), DType::boolean, {2}, {0, 1});
  EXPECT_THROW(run_op("And", {&a, &b}), Error);  // bool only
}

TEST(Elementwise, WhereBroadcastsAllThree) {
  Tensor cond = boolean({2, 1}, {true, false});
  Tensor x = f32({3}, {1, 2, 3});
  Tensor y = f32({1}, {-1});
  expect_close(run_op("Where", {&cond, &x, &y}), DType::f32, {2, 3}, {1, 2, 3, -1, -1, -1});
  Tensor yi = i64({1}, {0});
  EXPECT_THROW(run_op("Where", {&cond, &x, &yi}), Error);
  EXPECT_THROW(run_op("Where", {&x, &x, &y}), Error);  // condition must be bool
}

TEST(Elementwise, IsNaNAndIsInf) {
  Tensor x = f32({4}, {1, NAN, INFINITY, -INFINITY});
  expect_close(run_op("IsNaN", {&x}), DType::boolean, {4}, {0, 1, 0, 0});
  expect_close(run_op("IsInf", {&x}), DType::boolean, {4}, {0, 0, 1, 1});
  Node n = NodeBuilder("IsInf", 13, 1);
  set_int(n, "detect_positive", 0);
  expect_close(run(n, {&x}), DType::boolean, {4}, {0, 0, 0, 1});
}

// Casts `in` (float64) to a 16-bit float type, checks every value, then casts back to float32,
// which must be exact.
static void check_half_cast(int onnx_to, DType half, const std::vector<double>& in, const std::vector<double>& want) {
  Tensor x = Tensor::from<double>({static_cast<int64_t>(in.size())}, in);
  Node n = NodeBuilder("Cast", 13, 1);
  set_int(n, "to", onnx_to);
  Tensor h = run(n, {&x});
  ASSERT_EQ(h.dtype(), half);
  std::vector<double> got = h.to_f64();
  for (size_t i = 0; i < in.size(); ++i) EXPECT_EQ(got[i], want[i]) << "input " << in[i];
  EXPECT_TRUE(std::signbit(got.back()));
  set_int(n, "to", 1);
  Tensor back = run(n, {&h});
  ASSERT_EQ(back.dtype(), DType::f32);
  for (size_t i = 0; i < in.size(); ++i) EXPECT_EQ(back.data<float>()[i], static_cast<float>(want[i]));
}

// float16 conversions at the edges: ties to even, the subnormal range, the largest half and
// the overflow boundary, and back to float32 exactly.
TEST(Elementwise, CastFloat16Edges) {
  check_half_cast(10, DType::f16,
                  {1.0 + 0x1p-11, 1.0 + 3 * 0x1p-11, 0x1p-24, 0x1p-25, 3 * 0x1p-26, 0x1p-14 - 0x1p-25, 65504.0,
                   65519.99, 65520.0, -0.0},
                  {1.0, 1.0 + 2 * 0x1p-10, 0x1p-24, 0.0, 0x1p-24, 0x1p-14, 65504.0, 65504.0, INFINITY, -0.0});
}

// The same edges for bfloat16.
TEST(Elementwise, CastBFloat16Edges) {
  check_half_cast(16, DType::bf16,
                  {1.0 + 0x1p-8, 1.0 + 3 * 0x1p-8, 0x1p-133, 0x1p-134, 3 * 0x1p-135, 0x1p-126 - 0x1p-134, 0x1.fep127,
                   0x1.fefffffp127, 0x1.ffp127, -0.0},
                  {1.0, 1.0 + 0x1p-6, 0x1p-133, 0.0, 0x1p-133, 0x1p-126, 0x1.fep127, 0x1.fep127, INFINITY, -0.0});
}

TEST(Elementwise, Cast) {
  Tensor x = f32({6}, {1.9f, -1.9f, 0, NAN, 1e10f, -1e10f});
  Node n = NodeBuilder("Cast", 13, 1);
  set_int(n, "to", 6);  // int32: truncates toward zero, saturates, NaN gives 0
  expect_close(run(n, {&x}), DType::i32, {6}, {1, -1, 0, 0, 2147483647, -2147483648.0});
  set_int(n, "to", 9);  // bool
  expect_close(run(n, {&x}), DType::boolean, {6}, {1, 1, 0, 1, 1, 1});
  set_int(n, "to", 11);  // double
  expect_close(run(n, {&x}), DType::f64, {6}, {1.9f, -1.9f, 0, NAN, 1e10f, -1e10f});
  Tensor i = i64({2}, {300, -1});
  set_int(n, "to", 2);  // uint8 wraps like C
  expect_close(run(n, {&i}), DType::u8, {2}, {44, 255});
  set_int(n, "to", 10);  // float16: rounds half to even, overflows to infinity
  expect_close(run(n, {&x}), DType::f16, {6}, {1.900390625, -1.900390625, 0, NAN, INFINITY, -INFINITY});
  set_int(n, "to", 16);  // bfloat16: rounds half to even, keeps NaN
  expect_close(run(n, {&x}), DType::bf16, {6}, {1.8984375, -1.8984375, 0, NAN, 0x1.2ap33, -0x1.2ap33});
  set_int(n, "to", 14);  // complex64: valid ONNX, not supported
  expect_unsupported([&] { run(n, {&x}); });
  set_int(n, "to", 99);
  EXPECT_THROW(run(n, {&x}), Error);
  n.attrs.erase("to");
  EXPECT_THROW(run(n, {&x}), Error);
  Tensor like = i64({1}, {0});
  expect_close(run_op("CastLike", {&x, &like}), DType::i64, {6}, {1, -1, 0, 0, 1e10, -1e10});
}
