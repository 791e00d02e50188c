// Resize/Upsample references against hand-computed values: nearest rounding modes,
// bilinear under half_pixel and align_corners, cubic with both A values, tf_crop_and_resize
// extrapolation, sizes vs scales, and the errors for what grove does not claim.
#include <gtest/gtest.h>

#include <algorithm>
#include <string>

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

// The 4-D bilinear case rounds in float32 (ONNX Runtime's order: bit-equal to it, checked
// against onnxruntime-node while writing it); here against bilinear interpolation in double,
// over odd sizes, down- and upsampling, batches and channels, and three coordinate modes.
TEST(Resize, BilinearOfTheLastTwoDimsAgreesWithInterpolationInDouble) {
  struct Case {
    const char* coordinates;
    Shape in, out;
  };
  for (const Case& c : {Case{"half_pixel", {1, 3, 17, 23}, {1, 3, 34, 46}}, Case{"half_pixel", {2, 2, 37, 29}, {2, 2, 50, 13}},
                        Case{"pytorch_half_pixel", {1, 2, 9, 13}, {1, 2, 20, 1}}, Case{"asymmetric", {1, 4, 11, 12}, {1, 4, 23, 5}}}) {
    Tensor x(DType::f32, c.in);
    for (int64_t i = 0; i < x.numel(); ++i) x.data<float>()[i] = static_cast<float>((i * 37) % 101) / 7.0f - 6.0f;
    Tensor sizes = ints1d(std::vector<int64_t>(c.out.begin(), c.out.end()));
    Tensor empty = f32({0}, {});
    Tensor y = run(NodeBuilder("Resize", 13, 4).s("mode", "linear").s("coordinate_transformation_mode", c.coordinates),
                   {&x, nullptr, nullptr, &sizes});
    ASSERT_EQ(y.shape(), c.out);
    const int64_t H = c.in[2], W = c.in[3], OH = c.out[2], OW = c.out[3];
    auto source = [&](int64_t o, int64_t in_len, int64_t out_len) {
      const double scale = static_cast<double>(out_len) / static_cast<double>(in_len);
      double s = std::string(c.coordinates) == "asymmetric" ? o / scale
                 : std::string(c.coordinates) == "pytorch_half_pixel" && out_len == 1 ? 0.0
                                                                                      : (o + 0.5) / scale - 0.5;
      return std::clamp(s, 0.0, static_cast<double>(in_len - 1));
    };
    for (int64_t plane = 0; plane < c.in[0] * c.in[1]; ++plane)
      for (int64_t r = 0; r < OH; ++r)
        for (int64_t q = 0; q < OW; ++q) {
          const double sy = source(r, H, OH), sx = source(q, W, OW);
          const int64_t y0 = static_cast<int64_t>(sy), x0 = static_cast<int64_t>(sx);
          const int64_t y1 = std::min(y0 + 1, H - 1), x1 = std::min(x0 + 1, W - 1);
          const double fy = sy - static_cast<double>(y0), fx = sx - static_cast<double>(x0);
          auto at = [&](int64_t yy, int64_t xx) { return static_cast<double>(x.data<float>()[(plane * H + yy) * W + xx]); };
          const double want = (1 - fy) * ((1 - fx) * at(y0, x0) + fx * at(y0, x1)) + fy * ((1 - fx) * at(y1, x0) + fx * at(y1, x1));
          ASSERT_NEAR(y.data<float>()[(plane * OH + r) * OW + q], want, 1e-4)  // float32 coordinates
              << c.coordinates << " plane " << plane << " at " << r << "," << q;
        }
  }
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
