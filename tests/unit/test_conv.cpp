// Conv and ConvTranspose references against hand-computed values, plus the geometry rules
// (auto_pad, output_shape, output_padding) and the errors on bad shapes and attributes.
#include <gtest/gtest.h>

#include "op_test_util.h"

using namespace grove;
using namespace grove::optest;

namespace {

// A 1D ConvTranspose of X = [1, 2, 3] with a [1, 1, 1] kernel, the attributes set by `setup`.
Tensor transpose_123(void (*setup)(Node&)) {
  Node n = NodeBuilder("ConvTranspose", 17, 2);
  setup(n);
  Tensor x = f32({1, 1, 3}, {1, 2, 3}), w = f32({1, 1, 3}, {1, 1, 1});
  return run(n, {&x, &w});
}

}  // namespace

TEST(Conv, Basic2dWithAndWithoutPadding) {
  Tensor x = iota_f32({1, 1, 5, 5}), w = f32({1, 1, 3, 3}, std::vector<float>(9, 1.f));
  Node n = NodeBuilder("Conv", 17, 2);
  expect_f32(run(n, {&x, &w}), {1, 1, 3, 3}, {54, 63, 72, 99, 108, 117, 144, 153, 162});
  set_ints(n, "pads", {1, 1, 1, 1});
  Tensor y = run(n, {&x, &w});
  ASSERT_EQ(y.shape(), (Shape{1, 1, 5, 5}));
  EXPECT_FLOAT_EQ(y.data<float>()[0], 0 + 1 + 5 + 6);               // corner sees 4 inputs
  EXPECT_FLOAT_EQ(y.data<float>()[2], 1 + 2 + 3 + 6 + 7 + 8);       // top edge sees 6
  EXPECT_FLOAT_EQ(y.data<float>()[24], 18 + 19 + 23 + 24);
}

TEST(Conv, GroupsWithBias) {
  Node n = NodeBuilder("Conv", 17, 3);
  set_int(n, "group", 2);
  Tensor x = f32({1, 2, 3}, {1, 2, 3, 4, 5, 6});
  Tensor w = f32({2, 1, 2}, {1, 1, 1, -1});
  Tensor b = f32({2}, {10, 20});
  expect_f32(run(n, {&x, &w, &b}), {1, 2, 2}, {13, 15, 19, 19});
}

TEST(Conv, DepthwiseWithMultiplierAndBatch) {
  // group = C = 2, two filters per channel; batch 2 checks the per-image offsets.
  Node n = NodeBuilder("Conv", 17, 2);
  set_int(n, "group", 2);
  Tensor x = f32({2, 2, 2}, {1, 2, 3, 4, 5, 6, 7, 8});
  Tensor w = f32({4, 1, 1}, {1, 10, 100, -1});
  expect_f32(run(n, {&x, &w}), {2, 4, 2},
                {1, 2, 10, 20, 300, 400, -3, -4, 5, 6, 50, 60, 700, 800, -7, -8});
}

TEST(Conv, MultipleInputChannelsSum) {
  Node n = NodeBuilder("Conv", 17, 2);
  Tensor x = f32({1, 2, 2}, {1, 2, 3, 4});
  Tensor w = f32({1, 2, 1}, {2, 3});
  expect_f32(run(n, {&x, &w}), {1, 1, 2}, {1 * 2 + 3 * 3, 2 * 2 + 4 * 3});
}

TEST(Conv, DilationAndStride) {
  Node n = NodeBuilder("Conv", 17, 2);
  set_ints(n, "dilations", {3});
  set_ints(n, "strides", {2});
  Tensor x = iota_f32({1, 1, 10}), w = f32({1, 1, 2}, {1, 1});
  expect_f32(run(n, {&x, &w}), {1, 1, 4}, {3, 7, 11, 15});
}

TEST(Conv, AsymmetricPadsAndStrides2d) {
  // ONNX's conv_with_strides_and_asymmetric_padding shape: 7x5, pads (1,0,1,0), stride 2.
  Node n = NodeBuilder("Conv", 17, 2);
  set_ints(n, "pads", {1, 0, 1, 0});
  set_ints(n, "strides", {2, 2});
  Tensor x = iota_f32({1, 1, 7, 5}), w = f32({1, 1, 3, 3}, std::vector<float>(9, 1.f));
  Tensor y = run(n, {&x, &w});
  ASSERT_EQ(y.shape(), (Shape{1, 1, 4, 2}));
  EXPECT_FLOAT_EQ(y.data<float>()[0], 0 + 1 + 2 + 5 + 6 + 7);  // first row is padding
  EXPECT_FLOAT_EQ(y.data<float>()[1], 2 + 3 + 4 + 7 + 8 + 9);
}

TEST(Conv, AutoPadModes) {
  Tensor x = f32({1, 1, 4}, {1, 2, 3, 4}), w = f32({1, 1, 2}, {1, 1});
  Node n = NodeBuilder("Conv", 17, 2);
  set_string(n, "auto_pad", "SAME_UPPER");
  expect_f32(run(n, {&x, &w}), {1, 1, 4}, {3, 5, 7, 4});
  set_string(n, "auto_pad", "SAME_LOWER");
  expect_f32(run(n, {&x, &w}), {1, 1, 4}, {1, 3, 5, 7});
  set_string(n, "auto_pad", "VALID");
  set_ints(n, "strides", {2});
  set_ints(n, "pads", {5, 5});  // ignored when auto_pad is set
  expect_f32(run(n, {&x, &w}), {1, 1, 2}, {3, 7});
  set_string(n, "auto_pad", "SAME_UPPER");
  expect_f32(run(n, {&x, &w}), {1, 1, 2}, {3, 7});  // ceil(4 / 2) = 2, no padding needed
}

TEST(Conv, KernelShapeMustMatchWeights) {
  Tensor x = iota_f32({1, 1, 4}), w = f32({1, 1, 2}, {1, 1});
  Node n = NodeBuilder("Conv", 17, 2);
  set_ints(n, "kernel_shape", {2});
  expect_f32(run(n, {&x, &w}), {1, 1, 3}, {1, 3, 5});
  set_ints(n, "kernel_shape", {3});
  EXPECT_THROW(run(n, {&x, &w}), Error);
}

TEST(Conv, RejectsBadShapesAndAttributes) {
  Tensor x = iota_f32({1, 2, 4}), w = f32({1, 1, 2}, {1, 1}), w_ok = f32({1, 2, 2}, {1, 1, 1, 1});
  Node n = NodeBuilder("Conv", 17, 2);
  EXPECT_THROW(run(n, {&x, &w}), Error);  // 2 input channels, W expects 1
  Tensor b = f32({2}, {0, 0});
  Node nb = NodeBuilder("Conv", 17, 3);
  EXPECT_THROW(run(nb, {&x, &w_ok, &b}), Error);  // bias of 2 for 1 output channel
  Node bad = NodeBuilder("Conv", 17, 2);
  set_ints(bad, "pads", {1});
  EXPECT_THROW(run(bad, {&x, &w_ok}), Error);
  bad = NodeBuilder("Conv", 17, 2);
  set_ints(bad, "strides", {0});
  EXPECT_THROW(run(bad, {&x, &w_ok}), Error);
  bad = NodeBuilder("Conv", 17, 2);
  set_ints(bad, "pads", {-1, 0});
  EXPECT_THROW(run(bad, {&x, &w_ok}), Error);
  bad = NodeBuilder("Conv", 17, 2);
  set_string(bad, "auto_pad", "SAME");
  EXPECT_THROW(run(bad, {&x, &w_ok}), Error);
  bad = NodeBuilder("Conv", 17, 2);
  set_int(bad, "group", 0);
  EXPECT_THROW(run(bad, {&x, &w_ok}), Error);
  bad = NodeBuilder("Conv", 17, 2);
  set_ints(bad, "dilations", {5});  // window of 6 on an input of 4
  EXPECT_THROW(run(bad, {&x, &w_ok}), Error);
  Tensor flat = iota_f32({2, 4});
  EXPECT_THROW(run(NodeBuilder("Conv", 17, 2), {&flat, &w_ok}), Error);
  Tensor xi = Tensor::from<int32_t>({1, 1, 2}, std::vector<int32_t>{1, 2});
  Tensor wi = Tensor::from<int32_t>({1, 1, 1}, std::vector<int32_t>{1});
  expect_unsupported([&] { run(NodeBuilder("Conv", 17, 2), {&xi, &wi}); });  // int32 conv
}

TEST(ConvTranspose, StrideOneAndTwo) {
  expect_f32(transpose_123([](Node&) {}), {1, 1, 5}, {1, 3, 6, 5, 3});
  expect_f32(transpose_123([](Node& n) { set_ints(n, "strides", {2}); }), {1, 1, 7}, {1, 1, 3, 2, 5, 3, 3});
}

TEST(ConvTranspose, PadsCropAndOutputPaddingExtends) {
  expect_f32(transpose_123([](Node& n) { set_ints(n, "strides", {2}); set_ints(n, "pads", {1, 1}); }),
                {1, 1, 5}, {1, 3, 2, 5, 3});
  expect_f32(transpose_123([](Node& n) { set_ints(n, "strides", {2}); set_ints(n, "output_padding", {1}); }),
                {1, 1, 8}, {1, 1, 3, 2, 5, 3, 3, 0});
}

TEST(ConvTranspose, OutputShapeDerivesPads) {
  // total padding = 2*2 + 3 - out; NOTSET puts the odd one at the start.
  expect_f32(transpose_123([](Node& n) { set_ints(n, "strides", {2}); set_ints(n, "output_shape", {8}); }),
                {1, 1, 8}, {1, 1, 3, 2, 5, 3, 3, 0});
  expect_f32(transpose_123([](Node& n) { set_ints(n, "strides", {2}); set_ints(n, "output_shape", {5}); }),
                {1, 1, 5}, {1, 3, 2, 5, 3});
  expect_f32(transpose_123([](Node& n) { set_ints(n, "strides", {2}); set_ints(n, "output_shape", {6}); }),
                {1, 1, 6}, {1, 3, 2, 5, 3, 3});
  // The full N x C x L form some exporters write.
  expect_f32(transpose_123([](Node& n) { set_ints(n, "strides", {2}); set_ints(n, "output_shape", {1, 1, 6}); }),
                {1, 1, 6}, {1, 3, 2, 5, 3, 3});
  EXPECT_THROW(transpose_123([](Node& n) { set_ints(n, "output_shape", {6, 6}); }), Error);
}

TEST(ConvTranspose, AutoPadSame) {
  expect_f32(transpose_123([](Node& n) { set_ints(n, "strides", {2}); set_string(n, "auto_pad", "SAME_UPPER"); }),
                {1, 1, 6}, {1, 1, 3, 2, 5, 3});
  expect_f32(transpose_123([](Node& n) { set_ints(n, "strides", {2}); set_string(n, "auto_pad", "SAME_LOWER"); }),
                {1, 1, 6}, {1, 3, 2, 5, 3, 3});
  expect_f32(transpose_123([](Node& n) { set_string(n, "auto_pad", "VALID"); set_ints(n, "pads", {1, 1}); }),
                {1, 1, 5}, {1, 3, 6, 5, 3});
}

TEST(ConvTranspose, Dilation) {
  Node n = NodeBuilder("ConvTranspose", 17, 2);
  set_ints(n, "dilations", {2});
  Tensor x = f32({1, 1, 2}, {1, 2}), w = f32({1, 1, 2}, {1, 1});
  expect_f32(run(n, {&x, &w}), {1, 1, 4}, {1, 2, 1, 2});
}

TEST(ConvTranspose, GroupsAndBias) {
  // Two groups of one input channel each; W is C x M/group x k = 2 x 2 x 1, so M = 4.
  Node n = NodeBuilder("ConvTranspose", 17, 3);
  set_int(n, "group", 2);
  Tensor x = f32({1, 2, 2}, {1, 2, 3, 4});
  Tensor w = f32({2, 2, 1}, {1, 2, 3, 4});
  Tensor b = f32({4}, {0, 0, 0, 100});
  expect_f32(run(n, {&x, &w, &b}), {1, 4, 2}, {1, 2, 2, 4, 9, 12, 112, 116});
}

TEST(ConvTranspose, TwoDimensional) {
  Node n = NodeBuilder("ConvTranspose", 17, 2);
  set_ints(n, "strides", {2, 2});
  Tensor x = f32({1, 1, 2, 2}, {1, 2, 3, 4}), w = f32({1, 1, 1, 1}, {2});
  expect_f32(run(n, {&x, &w}), {1, 1, 3, 3}, {2, 0, 4, 0, 0, 0, 6, 0, 8});
}

TEST(ConvTranspose, RejectsBadShapes) {
  Tensor x = iota_f32({1, 2, 3}), w = f32({1, 1, 3}, {1, 1, 1});
  EXPECT_THROW(run(NodeBuilder("ConvTranspose", 17, 2), {&x, &w}), Error);  // W dim 0 must be C = 2
  Tensor x1 = iota_f32({1, 1, 3});
  Node n = NodeBuilder("ConvTranspose", 17, 2);
  set_ints(n, "pads", {4, 4});
  EXPECT_THROW(run(n, {&x1, &w}), Error);  // crops more than the 5 outputs
  n = NodeBuilder("ConvTranspose", 17, 2);
  set_ints(n, "output_padding", {-1});
  EXPECT_THROW(run(n, {&x1, &w}), Error);
}

TEST(ConvInteger, ShiftsByZeroPoints) {
  Node n = NodeBuilder("ConvInteger", 17, 3);
  Tensor x = Tensor::from<uint8_t>({1, 1, 3}, std::vector<uint8_t>{2, 3, 4});
  Tensor w = Tensor::from<uint8_t>({1, 1, 2}, std::vector<uint8_t>{1, 2});
  Tensor x_zp = Tensor::scalar<uint8_t>(1);
  Tensor y = run(n, {&x, &w, &x_zp});
  ASSERT_EQ(y.dtype(), DType::i32);
  EXPECT_EQ(y.to_i64(), (std::vector<int64_t>{1 * 1 + 2 * 2, 2 * 1 + 3 * 2}));
  // Per-output-channel weight zero points, int8 weights.
  Node pc = NodeBuilder("ConvInteger", 17, 4);
  Tensor x8 = Tensor::from<uint8_t>({1, 1, 3}, std::vector<uint8_t>{1, 2, 3});
  Tensor w8 = Tensor::from<int8_t>({2, 1, 1}, std::vector<int8_t>{3, -5});
  Tensor w_zp = Tensor::from<int8_t>({2}, std::vector<int8_t>{1, -2});
  y = run(pc, {&x8, &w8, nullptr, &w_zp});
  EXPECT_EQ(y.to_i64(), (std::vector<int64_t>{2, 4, 6, -3, -6, -9}));
  Tensor bad_zp = Tensor::from<int8_t>({3}, std::vector<int8_t>{1, 2, 3});
  EXPECT_THROW(run(pc, {&x8, &w8, nullptr, &bad_zp}), Error);
}

TEST(QLinearConv, RequantizesWithRoundHalfEvenAndSaturation) {
  Node n = NodeBuilder("QLinearConv", 17, 9);
  Tensor x = Tensor::from<uint8_t>({1, 1, 2}, std::vector<uint8_t>{10, 15});
  Tensor x_scale = Tensor::scalar<float>(0.5f), x_zp = Tensor::scalar<uint8_t>(10);
  Tensor w = Tensor::from<uint8_t>({1, 1, 1}, std::vector<uint8_t>{4});
  Tensor w_scale = Tensor::scalar<float>(0.25f), w_zp = Tensor::scalar<uint8_t>(2);
  Tensor y_scale = Tensor::scalar<float>(0.5f), y_zp = Tensor::scalar<uint8_t>(100);
  // acc = (x - 10) * (4 - 2) = {0, 10}; scale 0.5 * 0.25 / 0.5 = 0.25 -> {0, 2.5 -> 2}.
  Tensor y = run(n, {&x, &x_scale, &x_zp, &w, &w_scale, &w_zp, &y_scale, &y_zp, nullptr});
  ASSERT_EQ(y.dtype(), DType::u8);
  EXPECT_EQ(y.to_i64(), (std::vector<int64_t>{100, 102}));
  Tensor bias = Tensor::from<int32_t>({1}, std::vector<int32_t>{2});  // {2, 12} -> {0.5 -> 0, 3}
  y = run(n, {&x, &x_scale, &x_zp, &w, &w_scale, &w_zp, &y_scale, &y_zp, &bias});
  EXPECT_EQ(y.to_i64(), (std::vector<int64_t>{100, 103}));
  Tensor high_zp = Tensor::scalar<uint8_t>(254);
  y = run(n, {&x, &x_scale, &x_zp, &w, &w_scale, &w_zp, &y_scale, &high_zp, &bias});
  EXPECT_EQ(y.to_i64(), (std::vector<int64_t>{254, 255}));
}
