// Shape-family references against hand-computed values: Reshape's 0/-1/allowzero rules,
// Flatten, Squeeze/Unsqueeze in both opset forms, Shape's start/end, Expand's two-way
// broadcast, ConstantOfShape, Range, Dropout's inference mode and EyeLike.
#include <gtest/gtest.h>

#include "op_test_util.h"

using namespace grove;
using namespace grove::optest;

namespace {

TEST(ShapeOps, ReshapeCopiesZeroAndInfersMinusOne) {
  Tensor x = iota_f32({2, 3, 4});
  Tensor shape = ints1d({0, -1, 2});
  Tensor y = run(NodeBuilder("Reshape", 14, 2), {&x, &shape});
  EXPECT_EQ(y.shape(), (Shape{2, 6, 2}));
  EXPECT_EQ(y.data<float>()[23], 23.f);
}

TEST(ShapeOps, ReshapeAllowZeroKeepsZero) {
  Tensor x(DType::f32, {0, 3});
  Tensor shape = ints1d({3, 0});
  EXPECT_EQ(run(NodeBuilder("Reshape", 14, 2).i("allowzero", 1), {&x, &shape}).shape(), (Shape{3, 0}));
  // Without allowzero the 0 copies dim 1 (3): 9 elements from 0 is an error.
  expect_error([&] { run(NodeBuilder("Reshape", 14, 2), {&x, &shape}); }, "cannot reshape");
}

TEST(ShapeOps, ReshapeKeepsInt64AndBoolBytes) {
  Tensor x = i64({2, 2}, {1, -2, 3, int64_t{1} << 40});
  Tensor shape = ints1d({4});
  expect_tensor(run(NodeBuilder("Reshape", 13, 2), {&x, &shape}), {4}, {1, -2, 3, double(int64_t{1} << 40)});
  const bool flags[] = {true, false};
  Tensor b = Tensor::from<bool>({2}, std::span<const bool>(flags));
  Tensor s1 = ints1d({1, 2});
  expect_tensor(run(NodeBuilder("Reshape", 13, 2), {&b, &s1}), {1, 2}, {1, 0});
}

TEST(ShapeOps, ReshapeErrors) {
  Tensor x = iota_f32({2, 3});
  Tensor two_minus = ints1d({-1, -1});
  expect_error([&] { run(NodeBuilder("Reshape", 14, 2), {&x, &two_minus}); }, "more than one -1");
  Tensor wrong = ints1d({4, 2});
  expect_error([&] { run(NodeBuilder("Reshape", 14, 2), {&x, &wrong}); }, "cannot reshape");
  Tensor indivisible = ints1d({4, -1});
  expect_error([&] { run(NodeBuilder("Reshape", 14, 2), {&x, &indivisible}); }, "-1");
  // A shape computed at run time cannot be bound: the message says what to do.
  Tensor shape = ints1d({6});
  expect_error([&] { infer_shapes_only(NodeBuilder("Reshape", 14, 2), {&x, &shape}); }, "--shape");
}

TEST(ShapeOps, Flatten) {
  Tensor x = iota_f32({2, 3, 4, 5});
  EXPECT_EQ(run(NodeBuilder("Flatten", 13, 1), {&x}).shape(), (Shape{2, 60}));
  EXPECT_EQ(run(NodeBuilder("Flatten", 13, 1).i("axis", 0), {&x}).shape(), (Shape{1, 120}));
  EXPECT_EQ(run(NodeBuilder("Flatten", 13, 1).i("axis", 4), {&x}).shape(), (Shape{120, 1}));
  EXPECT_EQ(run(NodeBuilder("Flatten", 13, 1).i("axis", -1), {&x}).shape(), (Shape{24, 5}));
  expect_error([&] { run(NodeBuilder("Flatten", 13, 1).i("axis", 5), {&x}); }, "out of range");
}

TEST(ShapeOps, SqueezeBothOpsetForms) {
  Tensor x = iota_f32({1, 3, 1, 2});
  EXPECT_EQ(run(NodeBuilder("Squeeze", 11, 1).ints("axes", {-2}), {&x}).shape(), (Shape{1, 3, 2}));
  Tensor axes = ints1d({0, 2});
  EXPECT_EQ(run(NodeBuilder("Squeeze", 13, 2), {&x, &axes}).shape(), (Shape{3, 2}));
  EXPECT_EQ(run(NodeBuilder("Squeeze", 13, 1), {&x}).shape(), (Shape{3, 2}));  // no axes: every 1
  Tensor bad = ints1d({1});
  expect_error([&] { run(NodeBuilder("Squeeze", 13, 2), {&x, &bad}); }, "cannot squeeze");
}

TEST(ShapeOps, UnsqueezeNegativeAndUnsortedAxes) {
  Tensor x = iota_f32({3, 4});
  EXPECT_EQ(run(NodeBuilder("Unsqueeze", 11, 1).ints("axes", {0}), {&x}).shape(), (Shape{1, 3, 4}));
  Tensor axes = ints1d({3, -4});
  EXPECT_EQ(run(NodeBuilder("Unsqueeze", 13, 2), {&x, &axes}).shape(), (Shape{1, 3, 4, 1}));
  Tensor unsorted = ints1d({4, 0, 2});
  EXPECT_EQ(run(NodeBuilder("Unsqueeze", 13, 2), {&x, &unsorted}).shape(), (Shape{1, 3, 1, 4, 1}));
  Tensor repeated = ints1d({1, -3});
  expect_error([&] { run(NodeBuilder("Unsqueeze", 13, 2), {&x, &repeated}); }, "repeated");
}

TEST(ShapeOps, ShapeStartEndNeedsNoData) {
  Tensor x(DType::f32, {2, 3, 4, 5});
  auto shape_of = [&](NodeBuilder b) { return run(b, {&x}); };
  expect_tensor(shape_of(NodeBuilder("Shape", 13, 1)), {4}, {2, 3, 4, 5});
  expect_tensor(shape_of(NodeBuilder("Shape", 15, 1).i("start", 1).i("end", -1)), {2}, {3, 4});
  expect_tensor(shape_of(NodeBuilder("Shape", 15, 1).i("start", -10).i("end", 10)), {4}, {2, 3, 4, 5});
  expect_tensor(shape_of(NodeBuilder("Shape", 15, 1).i("start", 3).i("end", 1)), {0}, {});
  auto infos = infer_shapes_only(NodeBuilder("Shape", 15, 1).i("start", 2), {&x});
  EXPECT_EQ(infos[0].dtype, DType::i64);
  EXPECT_EQ(infos[0].shape, (Shape{2}));
  expect_tensor(run(NodeBuilder("Size", 13, 1), {&x}), {}, {120});
}

TEST(ShapeOps, ExpandBroadcastsBothWays) {
  Tensor x = f32({3, 1}, {1, 2, 3});
  Tensor shape = ints1d({2, 1, 2});
  expect_tensor(run(NodeBuilder("Expand", 13, 2), {&x, &shape}), {2, 3, 2}, {1, 1, 2, 2, 3, 3, 1, 1, 2, 2, 3, 3});
  Tensor smaller = ints1d({1});  // the input's larger dims win
  EXPECT_EQ(run(NodeBuilder("Expand", 13, 2), {&x, &smaller}).shape(), (Shape{3, 1}));
  Tensor bad = ints1d({2, 2});
  expect_error([&] { run(NodeBuilder("Expand", 13, 2), {&x, &bad}); }, "cannot be broadcast");
}

TEST(ShapeOps, ConstantOfShape) {
  Tensor shape = ints1d({2, 3});
  Tensor y = run(NodeBuilder("ConstantOfShape", 9, 1), {&shape});
  EXPECT_EQ(y.dtype(), DType::f32);
  expect_tensor(y, {2, 3}, {0, 0, 0, 0, 0, 0});
  Tensor seven = i64({1}, {7});
  Tensor z = run(NodeBuilder("ConstantOfShape", 9, 1).tensor("value", seven), {&shape});
  EXPECT_EQ(z.dtype(), DType::i64);
  expect_tensor(z, {2, 3}, {7, 7, 7, 7, 7, 7});
  Tensor empty = i64({0}, {});
  expect_tensor(run(NodeBuilder("ConstantOfShape", 9, 1).tensor("value", seven), {&empty}), {}, {7});
  Tensor negative = ints1d({-1});
  expect_error([&] { run(NodeBuilder("ConstantOfShape", 9, 1), {&negative}); }, "negative");
}

TEST(ShapeOps, Range) {
  Tensor s = Tensor::scalar<float>(1), l = Tensor::scalar<float>(2), d = Tensor::scalar<float>(0.3f);
  expect_tensor(run(NodeBuilder("Range", 11, 3), {&s, &l, &d}), {4}, {1, 1.3, 1.6, 1.9});
  Tensor si = Tensor::scalar<int32_t>(10), li = Tensor::scalar<int32_t>(6), di = Tensor::scalar<int32_t>(-3);
  Tensor y = run(NodeBuilder("Range", 11, 3), {&si, &li, &di});
  EXPECT_EQ(y.dtype(), DType::i32);
  expect_tensor(y, {2}, {10, 7});
  Tensor empty_limit = Tensor::scalar<int32_t>(20);
  expect_tensor(run(NodeBuilder("Range", 11, 3), {&si, &empty_limit, &di}), {0}, {});
  Tensor zero = Tensor::scalar<int32_t>(0);
  expect_error([&] { run(NodeBuilder("Range", 11, 3), {&si, &li, &zero}); }, "delta");
}

TEST(ShapeOps, IdentityCopies) {
  Tensor x = i32({3}, {4, -5, 6});
  Tensor y = run(NodeBuilder("Identity", 16, 1), {&x});
  EXPECT_NE(y.raw(), x.raw());
  expect_tensor(y, {3}, {4, -5, 6});
}

TEST(ShapeOps, DropoutIsIdentityInInference) {
  Tensor x = f32({2}, {1.5f, -2});
  auto outs = run_all(NodeBuilder("Dropout", 13, 1, 2), {&x});
  expect_tensor(outs[0], {2}, {1.5, -2});
  EXPECT_EQ(outs[1].dtype(), DType::boolean);
  expect_tensor(outs[1], {2}, {1, 1});
  // Dropout-7 (opset 9) gives the mask the data's dtype.
  EXPECT_EQ(run_all(NodeBuilder("Dropout", 9, 1, 2), {&x})[1].dtype(), DType::f32);
  Tensor ratio = Tensor::scalar<float>(0.5f), train = Tensor::scalar<bool>(true), no_ratio = Tensor::scalar<float>(0);
  EXPECT_TRUE(expect_error([&] { run(NodeBuilder("Dropout", 13, 3), {&x, &ratio, &train}); }, "training"));
  expect_tensor(run(NodeBuilder("Dropout", 13, 3), {&x, &no_ratio, &train}), {2}, {1.5, -2});
}

TEST(ShapeOps, EyeLike) {
  Tensor x(DType::i32, {2, 3});
  Tensor y = run(NodeBuilder("EyeLike", 9, 1).i("k", 1).i("dtype", 1), {&x});
  EXPECT_EQ(y.dtype(), DType::f32);
  expect_tensor(y, {2, 3}, {0, 1, 0, 0, 0, 1});
}

}  // namespace
