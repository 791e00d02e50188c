// Resize/Upsample references against hand-computed values: nearest rounding modes,
// bilinear under half_pixel and align_corners, cubic with both A values, tf_crop_and_resize
// extrapolation, sizes vs scales, and the errors for what grove does not claim.
#include <gtest/gtest.h>

#include "op_test_util.h"

using namespace grove;
using namespace grove::optest;

namespace {

Tensor scales(std::vector<float> v) {
  int64_t n = static_cast<int64_t>(v.size());
  return f32({n}, std::move(v));
}

TEST(Resize, UpsampleNearestRepeats) {
  Tensor x = f32({1, 1, 2, 2}, {1, 2, 3, 4});
  Tensor s = scales({1, 1, 2, 3});
  expect_tensor(run(NodeBuilder("Upsample", 9, 2), {&x, &s}), {1, 1, 4, 6},
                {1, 1, 1, 2, 2, 2, 1, 1, 1, 2, 2, 2, 3, 3, 3, 4, 4, 4, 3, 3, 3, 4, 4, 4});
  // Opset 7 keeps the scales in an attribute; nearest moves bytes, so int64 works too.
  Tensor xi = i64({1, 2}, {7, 8});
  expect_tensor(run(NodeBuilder("Upsample", 7, 1).floats("scales", {1, 2}), {&xi}), {1, 4}, {7, 7, 8, 8});
}

TEST(Resize, LinearHalfPixel) {
  Tensor x = f32({1, 1, 2, 2}, {1, 2, 3, 4});
  Tensor s = scales({1, 1, 2, 2});
  Tensor y = run(NodeBuilder("Resize", 13, 3).s("mode", "linear"), {&x, nullptr, &s});
  expect_tensor(y, {1, 1, 4, 4},
                {1, 1.25, 1.75, 2, 1.5, 1.75, 2.25, 2.5, 2.5, 2.75, 3.25, 3.5, 3, 3.25, 3.75, 4});
}

TEST(Resize, LinearAlignCornersWithSizes) {
  Tensor x = f32({1, 1, 1, 2}, {0, 3});
  Tensor sizes = ints1d({1, 1, 1, 4});
  Tensor empty = f32({0}, {});
  Tensor y = run(NodeBuilder("Resize", 11, 4).s("mode", "linear").s("coordinate_transformation_mode", "align_corners"),
                 {&x, &empty, &empty, &sizes});
  expect_tensor(y, {1, 1, 1, 4}, {0, 1, 2, 3});
}

TEST(Resize, NearestModesDownsample) {
  Tensor x = f32({1, 5}, {0, 1, 2, 3, 4});
  Tensor s = scales({1, 0.8f});  // 4 outputs; half_pixel maps x to (x + 0.5) * 1.25 - 0.5
  auto nearest = [&](const char* mode) {
    return run(NodeBuilder("Resize", 13, 3).s("nearest_mode", mode), {&x, nullptr, &s});
  };
  // Sources: 0.125, 1.375, 2.625, 3.875.
  expect_tensor(nearest("round_prefer_floor"), {1, 4}, {0, 1, 3, 4});
  expect_tensor(nearest("floor"), {1, 4}, {0, 1, 2, 3});
  expect_tensor(nearest("ceil"), {1, 4}, {1, 2, 3, 4});
  Tensor x2 = f32({1, 2}, {5, 6});
  Tensor up = scales({1, 2});  // asymmetric sources 0, 0.5, 1, 1.5: the ties break by mode
  auto tie = [&](const char* mode) {
    return run(NodeBuilder("Resize", 13, 3).s("nearest_mode", mode).s("coordinate_transformation_mode", "asymmetric"),
               {&x2, nullptr, &up});
  };
  expect_tensor(tie("round_prefer_floor"), {1, 4}, {5, 5, 6, 6});
  expect_tensor(tie("round_prefer_ceil"), {1, 4}, {5, 6, 6, 6});
}

TEST(Resize, CubicKeysKernel) {
  Tensor x = f32({1, 1, 1, 4}, {0, 1, 2, 3});
  Tensor s = scales({1, 1, 1, 2});
  // Expected values from the ONNX reference formula (A = -0.75, edge taps repeat the edge).
  expect_tensor(run(NodeBuilder("Resize", 13, 3).s("mode", "cubic"), {&x, nullptr, &s}), {1, 1, 1, 8},
                {-0.10546875, 0.19140625, 0.66796875, 1.296875, 1.703125, 2.33203125, 2.80859375, 3.10546875});
  // A = -0.5 reproduces a ramp where all four taps lie inside (outputs 3 and 4: sources 1.25,
  // 1.75); exclude_outside renormalizes the weights at the edges instead of repeating the edge.
  Tensor e = run(NodeBuilder("Resize", 13, 3).s("mode", "cubic").f("cubic_coeff_a", -0.5f).i("exclude_outside", 1),
                 {&x, nullptr, &s});
  expect_tensor(e, {1, 1, 1, 8},
                {-0.08823529, 0.16788321, 0.70992366, 1.25, 1.75, 2.29007634, 2.83211679, 3.08823529});
}

TEST(Resize, TfCropAndResizeExtrapolates) {
  Tensor x = f32({1, 3}, {10, 20, 30});
  Tensor roi = f32({4}, {0, 0.5f, 1, 1.5f});  // width crop from 0.5 to 1.5 of (n - 1)
  Tensor sizes = ints1d({1, 3});
  Tensor empty = f32({0}, {});
  Tensor y = run(NodeBuilder("Resize", 13, 4)
                     .s("mode", "linear")
                     .s("coordinate_transformation_mode", "tf_crop_and_resize")
                     .f("extrapolation_value", -7),
                 {&x, &roi, &empty, &sizes});
  // Sources: 1, 2, 3 -> the last lies past n - 1 = 2.
  expect_tensor(y, {1, 3}, {20, 30, -7});
}

TEST(Resize, Errors) {
  Tensor x = f32({1, 2}, {1, 2});
  Tensor s = scales({1, 2});
  Tensor sizes = ints1d({1, 4});
  expect_error([&] { run(NodeBuilder("Resize", 13, 4), {&x, nullptr, &s, &sizes}); }, "exactly one");
  expect_error([&] { infer_shapes_only(NodeBuilder("Resize", 13, 3), {&x, nullptr, &s}); }, "--shape");
  EXPECT_TRUE(expect_error([&] { run(NodeBuilder("Resize", 13, 3).i("antialias", 1), {&x, nullptr, &s}); }, "antialias"));
  Tensor xi = i64({1, 2}, {1, 2});
  EXPECT_TRUE(expect_error([&] { run(NodeBuilder("Resize", 13, 3).s("mode", "linear"), {&xi, nullptr, &s}); }, "float32"));
  Tensor short_scales = scales({2});
  expect_error([&] { run(NodeBuilder("Resize", 13, 3), {&x, nullptr, &short_scales}); }, "one entry per dim");
  expect_error([&] { run(NodeBuilder("Resize", 13, 3).s("mode", "area"), {&x, nullptr, &s}); }, "unknown mode");
}

}  // namespace
