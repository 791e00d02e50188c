// Index-family references against hand-computed values: TopK ties, NaN and both opset forms,
// CumSum's exclusive/reverse, NonZero's data-dependent shape, ScatterND and ScatterElements
// with reductions and negative indices, OneHot axes and out-of-range indices, Shrink and
// MeanVarianceNormalization.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "op_test_util.h"

using namespace grove;
using namespace grove::optest;

namespace {

std::vector<int64_t> as_i64(const Tensor& t) { return t.to_i64(); }

TEST(IndexOps, TopKLargestKeepsLowerIndexOnTies) {
  Tensor x = f32({2, 4}, {1, 3, 3, 2, 5, 5, 5, 0});
  Tensor k = ints1d({3});
  auto outs = run_all(NodeBuilder("TopK", 11, 2, 2), {&x, &k});
  expect_tensor(outs[0], {2, 3}, {3, 3, 2, 5, 5, 5});
  EXPECT_EQ(as_i64(outs[1]), (std::vector<int64_t>{1, 2, 3, 0, 1, 2}));
  EXPECT_EQ(outs[1].dtype(), DType::i64);
}

TEST(IndexOps, TopKSmallestOnAxis0AndNaN) {
  float nan = std::numeric_limits<float>::quiet_NaN();
  // Columns: [4, nan, 1] and [2, 2, 7]; NaN ranks above every number.
  Tensor x = f32({3, 2}, {4, 2, nan, 2, 1, 7});
  Tensor k = ints1d({2});
  auto smallest = run_all(NodeBuilder("TopK", 11, 2, 2).i("axis", 0).i("largest", 0), {&x, &k});
  expect_tensor(smallest[0], {2, 2}, {1, 2, 4, 2});
  EXPECT_EQ(as_i64(smallest[1]), (std::vector<int64_t>{2, 0, 0, 1}));
  auto largest = run_all(NodeBuilder("TopK", 11, 2, 2).i("axis", -2), {&x, &k});
  EXPECT_TRUE(std::isnan(largest[0].data<float>()[0]));
  EXPECT_EQ(as_i64(largest[1]), (std::vector<int64_t>{1, 2, 0, 0}));
}

TEST(IndexOps, TopKOpset1AttributeIntAndErrors) {
  Tensor x = i32({5}, {4, -1, 9, 9, 0});
  auto outs = run_all(NodeBuilder("TopK", 1, 1, 2).i("k", 2), {&x});
  EXPECT_EQ(outs[0].dtype(), DType::i32);
  expect_tensor(outs[0], {2}, {9, 9});
  EXPECT_EQ(as_i64(outs[1]), (std::vector<int64_t>{2, 3}));
  Tensor k0 = ints1d({0});
  expect_tensor(run_all(NodeBuilder("TopK", 11, 2, 2), {&x, &k0})[0], {0}, {});
  Tensor big = ints1d({6}), neg = ints1d({-1}), two = ints1d({1, 2});
  expect_error([&] { run_all(NodeBuilder("TopK", 11, 2, 2), {&x, &big}); }, "outside [0, 5]");
  expect_error([&] { run_all(NodeBuilder("TopK", 11, 2, 2), {&x, &neg}); }, "outside");
  expect_error([&] { run_all(NodeBuilder("TopK", 11, 2, 2), {&x, &two}); }, "exactly one value");
  expect_error([&] { run_all(NodeBuilder("TopK", 11, 2, 2).i("axis", 1), {&x, &k0}); }, "out of range");
  expect_error([&] { run_all(NodeBuilder("TopK", 1, 1, 2), {&x}); }, "'k' is required");
}

TEST(IndexOps, CumSumModesAndAxes) {
  Tensor x = f32({2, 3}, {1, 2, 3, 4, 5, 6});
  Tensor axis1 = Tensor::scalar<int32_t>(1), axis0 = Tensor::scalar<int64_t>(-2);
  expect_tensor(run(NodeBuilder("CumSum", 14, 2), {&x, &axis1}), {2, 3}, {1, 3, 6, 4, 9, 15});
  expect_tensor(run(NodeBuilder("CumSum", 14, 2), {&x, &axis0}), {2, 3}, {1, 2, 3, 5, 7, 9});
  expect_tensor(run(NodeBuilder("CumSum", 14, 2).i("exclusive", 1), {&x, &axis1}), {2, 3}, {0, 1, 3, 0, 4, 9});
  expect_tensor(run(NodeBuilder("CumSum", 14, 2).i("reverse", 1), {&x, &axis1}), {2, 3}, {6, 5, 3, 15, 11, 6});
  expect_tensor(run(NodeBuilder("CumSum", 14, 2).i("reverse", 1).i("exclusive", 1), {&x, &axis1}), {2, 3},
                {5, 3, 0, 11, 6, 0});
  Tensor xi = i64({4}, {1, -1, 10, 2}), a = ints1d({0});
  Tensor yi = run(NodeBuilder("CumSum", 11, 2), {&xi, &a});
  EXPECT_EQ(as_i64(yi), (std::vector<int64_t>{1, 0, 10, 12}));
  Tensor bad = Tensor::scalar<int32_t>(2), floaty = Tensor::scalar<float>(0);
  expect_error([&] { run(NodeBuilder("CumSum", 14, 2), {&x, &bad}); }, "out of range");
  expect_error([&] { run(NodeBuilder("CumSum", 14, 2), {&x, &floaty}); }, "int32 or int64");
}

TEST(IndexOps, NonZeroCoordinatesAndDataDependentShape) {
  Tensor x = f32({2, 3}, {0, 1, 0, 2, 0, 3});
  Tensor y = run(NodeBuilder("NonZero", 13, 1), {&x});
  ASSERT_EQ(y.shape(), (Shape{2, 3}));
  EXPECT_EQ(as_i64(y), (std::vector<int64_t>{0, 1, 1, 1, 0, 2}));
  Tensor none = f32({4}, {0, 0, 0, 0});
  EXPECT_EQ(run(NodeBuilder("NonZero", 13, 1), {&none}).shape(), (Shape{1, 0}));
  try {
    infer_shapes_only(NodeBuilder("NonZero", 13, 1), {&x});
    ADD_FAILURE() << "expected a data-dependent shape error";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), Error::Kind::data_dependent_shape) << e.what();
  }
}

TEST(IndexOps, ScatterNDReplaceAddMul) {
  Tensor data = f32({4}, {1, 2, 3, 4});
  Tensor idx = i64({2, 1}, {3, -4});
  Tensor upd = f32({2}, {10, 20});
  expect_tensor(run(NodeBuilder("ScatterND", 13, 3), {&data, &idx, &upd}), {4}, {20, 2, 3, 10});
  Tensor dup = i64({2, 1}, {1, 1});
  expect_tensor(run(NodeBuilder("ScatterND", 16, 3).s("reduction", "add"), {&data, &dup, &upd}), {4}, {1, 32, 3, 4});
  expect_tensor(run(NodeBuilder("ScatterND", 16, 3).s("reduction", "mul"), {&data, &dup, &upd}), {4}, {1, 400, 3, 4});
  // Tuples addressing rows of a 2-D tensor.
  Tensor m = iota_f32({2, 2});
  Tensor rows = i64({1, 1}, {1}), row = f32({1, 2}, {7, 8});
  expect_tensor(run(NodeBuilder("ScatterND", 13, 3), {&m, &rows, &row}), {2, 2}, {0, 1, 7, 8});
  Tensor cell = i64({1, 2}, {0, 1}), one = f32({1}, {9});
  expect_tensor(run(NodeBuilder("ScatterND", 13, 3), {&m, &cell, &one}), {2, 2}, {0, 9, 2, 3});
  Tensor far = i64({1, 1}, {4});
  expect_error([&] { run(NodeBuilder("ScatterND", 13, 3), {&data, &far, &one}); }, "out of range");
  expect_error([&] { run(NodeBuilder("ScatterND", 13, 3), {&m, &rows, &one}); }, "updates shape");
  expect_error([&] { run(NodeBuilder("ScatterND", 16, 3).s("reduction", "sum"), {&data, &idx, &upd}); }, "unknown reduction");
}

TEST(IndexOps, ScatterElementsAxesAndReductions) {
  Tensor data = f32({2, 3}, {0, 0, 0, 0, 0, 0});
  Tensor idx = i64({1, 2}, {2, -3});
  Tensor upd = f32({1, 2}, {5, 6});
  expect_tensor(run(NodeBuilder("ScatterElements", 13, 3).i("axis", 1), {&data, &idx, &upd}), {2, 3}, {6, 0, 5, 0, 0, 0});
  Tensor rows = i32({1, 2}, {1, 0});
  expect_tensor(run(NodeBuilder("ScatterElements", 13, 3), {&data, &rows, &upd}), {2, 3}, {0, 6, 0, 5, 0, 0});
  Tensor ones = f32({2, 3}, {1, 1, 1, 1, 1, 1});
  Tensor same = i64({1, 2}, {1, 1});
  expect_tensor(run(NodeBuilder("ScatterElements", 16, 3).i("axis", 1).s("reduction", "add"), {&ones, &same, &upd}), {2, 3},
                {1, 12, 1, 1, 1, 1});
  expect_tensor(run(NodeBuilder("ScatterElements", 16, 3).i("axis", 1).s("reduction", "mul"), {&ones, &same, &upd}), {2, 3},
                {1, 30, 1, 1, 1, 1});
  expect_tensor(run(NodeBuilder("Scatter", 10, 3).i("axis", -1), {&data, &idx, &upd}), {2, 3}, {6, 0, 5, 0, 0, 0});
  Tensor far = i64({1, 2}, {3, 0});
  expect_error([&] { run(NodeBuilder("ScatterElements", 13, 3).i("axis", 1), {&data, &far, &upd}); }, "out of range");
  Tensor wide = i64({1, 4}, {0, 0, 0, 0}), wide_upd = f32({1, 4}, {1, 2, 3, 4});
  expect_error([&] { run(NodeBuilder("ScatterElements", 13, 3), {&data, &wide, &wide_upd}); }, "exceeds data shape");
  expect_error([&] { run(NodeBuilder("ScatterElements", 13, 3), {&data, &idx, &ones}); }, "differs from indices");
}

TEST(IndexOps, OneHotAxesNegativeAndOutOfRange) {
  Tensor idx = i64({3}, {0, -1, 5});
  Tensor depth = Tensor::scalar<float>(3.0f);
  Tensor values = i32({2}, {0, 1});
  Tensor y = run(NodeBuilder("OneHot", 11, 3), {&idx, &depth, &values});
  EXPECT_EQ(y.dtype(), DType::i32);
  expect_tensor(y, {3, 3}, {1, 0, 0, 0, 0, 1, 0, 0, 0});
  Tensor fidx = f32({2}, {1.7f, 0});
  Tensor fvalues = f32({2}, {-1, 2});
  Tensor d2 = ints1d({2});
  // axis 0: y[depth, n]; 1.7 truncates to 1.
  expect_tensor(run(NodeBuilder("OneHot", 11, 3).i("axis", 0), {&fidx, &d2, &fvalues}), {2, 2}, {-1, 2, 2, -1});
  expect_tensor(run(NodeBuilder("OneHot", 11, 3).i("axis", -2), {&fidx, &d2, &fvalues}), {2, 2}, {-1, 2, 2, -1});
  Tensor zero = ints1d({0});
  expect_error([&] { run(NodeBuilder("OneHot", 11, 3), {&idx, &zero, &values}); }, "positive");
  Tensor three = i32({3}, {0, 1, 2});
  expect_error([&] { run(NodeBuilder("OneHot", 11, 3), {&idx, &depth, &three}); }, "two elements");
  expect_error([&] { run(NodeBuilder("OneHot", 11, 3).i("axis", 2), {&idx, &depth, &values}); }, "out of range");
}

TEST(IndexOps, ShrinkHardAndSoft) {
  Tensor x = f32({5}, {-2, -1, 0, 1, 2});
  expect_tensor(run(NodeBuilder("Shrink", 9, 1).f("lambd", 1.5f), {&x}), {5}, {-2, 0, 0, 0, 2});
  expect_tensor(run(NodeBuilder("Shrink", 9, 1).f("lambd", 0.5f).f("bias", 0.5f), {&x}), {5}, {-1.5, -0.5, 0, 0.5, 1.5});
  Tensor xi = i32({3}, {-3, 0, 3});
  expect_tensor(run(NodeBuilder("Shrink", 9, 1).f("bias", 1), {&xi}), {3}, {-2, 0, 2});
}

TEST(IndexOps, MeanVarianceNormalizationAxes) {
  // Default axes {0, 2, 3}: per channel over N, H, W.
  Tensor x = f32({1, 2, 1, 2}, {1, 3, 10, 10});
  expect_tensor(run(NodeBuilder("MeanVarianceNormalization", 13, 1), {&x}), {1, 2, 1, 2}, {-1, 1, 0, 0}, 1e-6);
  Tensor m = f32({2, 2}, {0, 4, 1, 1});
  expect_tensor(run(NodeBuilder("MeanVarianceNormalization", 13, 1).ints("axes", {-1}), {&m}), {2, 2}, {-1, 1, 0, 0}, 1e-6);
  expect_tensor(run(NodeBuilder("MeanVarianceNormalization", 13, 1).ints("axes", {0}), {&m}), {2, 2}, {-1, 1, 1, -1}, 1e-6);
  expect_error([&] { run(NodeBuilder("MeanVarianceNormalization", 13, 1), {&m}); }, "out of range");
  expect_error([&] { run(NodeBuilder("MeanVarianceNormalization", 13, 1).ints("axes", {1, -1}), {&m}); }, "twice");
  Tensor xi = i64({2}, {1, 2});
  EXPECT_TRUE(expect_error([&] { run(NodeBuilder("MeanVarianceNormalization", 13, 1).ints("axes", {0}), {&xi}); }, "float32"));
}

}  // namespace
