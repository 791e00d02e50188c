// Conv and ConvTranspose references against hand-computed values, plus the geometry rules
// (auto_pad, output_shape, output_padding) and the errors on bad shapes and attributes.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "ops/evaluate.h"

using namespace grove;

namespace {

Node conv_node(const std::string& op, size_t inputs) {
  Node n;
  n.name = "c";
  n.op_type = op;
  n.opset = 17;
  for (size_t i = 0; i < inputs; ++i) n.inputs.push_back("in" + std::to_string(i));
  n.outputs = {"y"};
  return n;
}

void set_ints(Node& n, const std::string& key, std::vector<int64_t> v) {
  Attribute a;
  a.kind = Attribute::Kind::ints;
  a.ints = std::move(v);
  n.attrs[key] = a;
}
void set_int(Node& n, const std::string& key, int64_t v) {
  Attribute a;
  a.kind = Attribute::Kind::i;
  a.i = v;
  n.attrs[key] = a;
}
void set_string(Node& n, const std::string& key, const std::string& v) {
  Attribute a;
  a.kind = Attribute::Kind::s;
  a.s = v;
  n.attrs[key] = a;
}

Tensor f32(Shape shape, std::vector<float> v) { return Tensor::from<float>(std::move(shape), v); }

Tensor iota(Shape shape, float start = 0) {
  Tensor t(DType::f32, std::move(shape));
  float v = start;
  for (float& x : t.span<float>()) x = v++;
  return t;
}

Tensor run(const Node& n, std::vector<const Tensor*> in) { return evaluate_node(n, in).at(0); }

void expect_values(const Tensor& t, const Shape& shape, const std::vector<float>& want) {
  ASSERT_EQ(t.shape(), shape);
  ASSERT_EQ(t.numel(), static_cast<int64_t>(want.size()));
  for (size_t i = 0; i < want.size(); ++i) EXPECT_NEAR(t.data<float>()[i], want[i], 1e-5) << "at " << i;
}

// A 1D ConvTranspose of X = [1, 2, 3] with a [1, 1, 1] kernel, the attributes set by `setup`.
Tensor transpose_123(void (*setup)(Node&)) {
  Node n = conv_node("ConvTranspose", 2);
  setup(n);
  Tensor x = f32({1, 1, 3}, {1, 2, 3}), w = f32({1, 1, 3}, {1, 1, 1});
  return run(n, {&x, &w});
}

}  // namespace

TEST(Conv, Basic2dWithAndWithoutPadding) {
  Tensor x = iota({1, 1, 5, 5}), w = f32({1, 1, 3, 3}, std::vector<float>(9, 1.f));
  Node n = conv_node("Conv", 2);
  expect_values(run(n, {&x, &w}), {1, 1, 3, 3}, {54, 63, 72, 99, 108, 117, 144, 153, 162});
  set_ints(n, "pads", {1, 1, 1, 1});
  Tensor y = run(n, {&x, &w});
  ASSERT_EQ(y.shape(), (Shape{1, 1, 5, 5}));
  EXPECT_FLOAT_EQ(y.data<float>()[0], 0 + 1 + 5 + 6);               // corner sees 4 inputs
  EXPECT_FLOAT_EQ(y.data<float>()[2], 1 + 2 + 3 + 6 + 7 + 8);       // top edge sees 6
  EXPECT_FLOAT_EQ(y.data<float>()[24], 18 + 19 + 23 + 24);
}

TEST(Conv, GroupsWithBias) {
  Node n = conv_node("Conv", 3);
  set_int(n, "group", 2);
  Tensor x = f32({1, 2, 3}, {1, 2, 3, 4, 5, 6});
  Tensor w = f32({2, 1, 2}, {1, 1, 1, -1});
  Tensor b = f32({2}, {10, 20});
  expect_values(run(n, {&x, &w, &b}), {1, 2, 2}, {13, 15, 19, 19});
}

TEST(Conv, DepthwiseWithMultiplierAndBatch) {
  // group = C = 2, two filters per channel; batch 2 checks the per-image offsets.
  Node n = conv_node("Conv", 2);
  set_int(n, "group", 2);
  Tensor x = f32({2, 2, 2}, {1, 2, 3, 4, 5, 6, 7, 8});
  Tensor w = f32({4, 1, 1}, {1, 10, 100, -1});
  expect_values(run(n, {&x, &w}), {2, 4, 2},
                {1, 2, 10, 20, 300, 400, -3, -4, 5, 6, 50, 60, 700, 800, -7, -8});
}

TEST(Conv, MultipleInputChannelsSum) {
  Node n = conv_node("Conv", 2);
  Tensor x = f32({1, 2, 2}, {1, 2, 3, 4});
  Tensor w = f32({1, 2, 1}, {2, 3});
  expect_values(run(n, {&x, &w}), {1, 1, 2}, {1 * 2 + 3 * 3, 2 * 2 + 4 * 3});
}

TEST(Conv, DilationAndStride) {
  Node n = conv_node("Conv", 2);
  set_ints(n, "dilations", {3});
  set_ints(n, "strides", {2});
  Tensor x = iota({1, 1, 10}), w = f32({1, 1, 2}, {1, 1});
  expect_values(run(n, {&x, &w}), {1, 1, 4}, {3, 7, 11, 15});
}

TEST(Conv, AsymmetricPadsAndStrides2d) {
  // ONNX's conv_with_strides_and_asymmetric_padding shape: 7x5, pads (1,0,1,0), stride 2.
  Node n = conv_node("Conv", 2);
  set_ints(n, "pads", {1, 0, 1, 0});
  set_ints(n, "strides", {2, 2});
  Tensor x = iota({1, 1, 7, 5}), w = f32({1, 1, 3, 3}, std::vector<float>(9, 1.f));
  Tensor y = run(n, {&x, &w});
  ASSERT_EQ(y.shape(), (Shape{1, 1, 4, 2}));
  EXPECT_FLOAT_EQ(y.data<float>()[0], 0 + 1 + 2 + 5 + 6 + 7);  // first row is padding
  EXPECT_FLOAT_EQ(y.data<float>()[1], 2 + 3 + 4 + 7 + 8 + 9);
}

TEST(Conv, AutoPadModes) {
  Tensor x = f32({1, 1, 4}, {1, 2, 3, 4}), w = f32({1, 1, 2}, {1, 1});
  Node n = conv_node("Conv", 2);
  set_string(n, "auto_pad", "SAME_UPPER");
  expect_values(run(n, {&x, &w}), {1, 1, 4}, {3, 5, 7, 4});
  set_string(n, "auto_pad", "SAME_LOWER");
  expect_values(run(n, {&x, &w}), {1, 1, 4}, {1, 3, 5, 7});
  set_string(n, "auto_pad", "VALID");
  set_ints(n, "strides", {2});
  set_ints(n, "pads", {5, 5});  // ignored when auto_pad is set
  expect_values(run(n, {&x, &w}), {1, 1, 2}, {3, 7});
  set_string(n, "auto_pad", "SAME_UPPER");
  expect_values(run(n, {&x, &w}), {1, 1, 2}, {3, 7});  // ceil(4 / 2) = 2, no padding needed
}

TEST(Conv, KernelShapeMustMatchWeights) {
  Tensor x = iota({1, 1, 4}), w = f32({1, 1, 2}, {1, 1});
  Node n = conv_node("Conv", 2);
  set_ints(n, "kernel_shape", {2});
  expect_values(run(n, {&x, &w}), {1, 1, 3}, {1, 3, 5});
  set_ints(n, "kernel_shape", {3});
  EXPECT_THROW(run(n, {&x, &w}), Error);
}

TEST(Conv, RejectsBadShapesAndAttributes) {
  Tensor x = iota({1, 2, 4}), w = f32({1, 1, 2}, {1, 1}), w_ok = f32({1, 2, 2}, {1, 1, 1, 1});
  Node n = conv_node("Conv", 2);
  EXPECT_THROW(run(n, {&x, &w}), Error);  // 2 input channels, W expects 1
  Tensor b = f32({2}, {0, 0});
  Node nb = conv_node("Conv", 3);
  EXPECT_THROW(run(nb, {&x, &w_ok, &b}), Error);  // bias of 2 for 1 output channel
  Node bad = conv_node("Conv", 2);
  set_ints(bad, "pads", {1});
  EXPECT_THROW(run(bad, {&x, &w_ok}), Error);
  bad = conv_node("Conv", 2);
  set_ints(bad, "strides", {0});
  EXPECT_THROW(run(bad, {&x, &w_ok}), Error);
  bad = conv_node("Conv", 2);
  set_ints(bad, "pads", {-1, 0});
  EXPECT_THROW(run(bad, {&x, &w_ok}), Error);
  bad = conv_node("Conv", 2);
  set_string(bad, "auto_pad", "SAME");
  EXPECT_THROW(run(bad, {&x, &w_ok}), Error);
  bad = conv_node("Conv", 2);
  set_int(bad, "group", 0);
  EXPECT_THROW(run(bad, {&x, &w_ok}), Error);
  bad = conv_node("Conv", 2);
  set_ints(bad, "dilations", {5});  // window of 6 on an input of 4
  EXPECT_THROW(run(bad, {&x, &w_ok}), Error);
  Tensor flat = iota({2, 4});
  EXPECT_THROW(run(conv_node("Conv", 2), {&flat, &w_ok}), Error);
  Tensor xi = Tensor::from<int32_t>({1, 1, 2}, std::vector<int32_t>{1, 2});
  Tensor wi = Tensor::from<int32_t>({1, 1, 1}, std::vector<int32_t>{1});
  try {
    run(conv_node("Conv", 2), {&xi, &wi});
    FAIL() << "int32 conv should be unsupported";
  } catch (const Error& e) {
    EXPECT_TRUE(e.unsupported());
  }
}

TEST(ConvTranspose, StrideOneAndTwo) {
  expect_values(transpose_123([](Node&) {}), {1, 1, 5}, {1, 3, 6, 5, 3});
  expect_values(transpose_123([](Node& n) { set_ints(n, "strides", {2}); }), {1, 1, 7}, {1, 1, 3, 2, 5, 3, 3});
}

TEST(ConvTranspose, PadsCropAndOutputPaddingExtends) {
  expect_values(transpose_123([](Node& n) { set_ints(n, "strides", {2}); set_ints(n, "pads", {1, 1}); }),
                {1, 1, 5}, {1, 3, 2, 5, 3});
  expect_values(transpose_123([](Node& n) { set_ints(n, "strides", {2}); set_ints(n, "output_padding", {1}); }),
                {1, 1, 8}, {1, 1, 3, 2, 5, 3, 3, 0});
}

TEST(ConvTranspose, OutputShapeDerivesPads) {
  // total padding = 2*2 + 3 - out; NOTSET puts the odd one at the start.
  expect_values(transpose_123([](Node& n) { set_ints(n, "strides", {2}); set_ints(n, "output_shape", {8}); }),
                {1, 1, 8}, {1, 1, 3, 2, 5, 3, 3, 0});
  expect_values(transpose_123([](Node& n) { set_ints(n, "strides", {2}); set_ints(n, "output_shape", {5}); }),
                {1, 1, 5}, {1, 3, 2, 5, 3});
  expect_values(transpose_123([](Node& n) { set_ints(n, "strides", {2}); set_ints(n, "output_shape", {6}); }),
                {1, 1, 6}, {1, 3, 2, 5, 3, 3});
  // The full N x C x L form some exporters write.
  expect_values(transpose_123([](Node& n) { set_ints(n, "strides", {2}); set_ints(n, "output_shape", {1, 1, 6}); }),
                {1, 1, 6}, {1, 3, 2, 5, 3, 3});
  EXPECT_THROW(transpose_123([](Node& n) { set_ints(n, "output_shape", {6, 6}); }), Error);
}

TEST(ConvTranspose, AutoPadSame) {
  expect_values(transpose_123([](Node& n) { set_ints(n, "strides", {2}); set_string(n, "auto_pad", "SAME_UPPER"); }),
                {1, 1, 6}, {1, 1, 3, 2, 5, 3});
  expect_values(transpose_123([](Node& n) { set_ints(n, "strides", {2}); set_string(n, "auto_pad", "SAME_LOWER"); }),
                {1, 1, 6}, {1, 3, 2, 5, 3, 3});
  expect_values(transpose_123([](Node& n) { set_string(n, "auto_pad", "VALID"); set_ints(n, "pads", {1, 1}); }),
                {1, 1, 5}, {1, 3, 6, 5, 3});
}

TEST(ConvTranspose, Dilation) {
  Node n = conv_node("ConvTranspose", 2);
  set_ints(n, "dilations", {2});
  Tensor x = f32({1, 1, 2}, {1, 2}), w = f32({1, 1, 2}, {1, 1});
  expect_values(run(n, {&x, &w}), {1, 1, 4}, {1, 2, 1, 2});
}

TEST(ConvTranspose, GroupsAndBias) {
  // Two groups of one input channel each; W is C x M/group x k = 2 x 2 x 1, so M = 4.
  Node n = conv_node("ConvTranspose", 3);
  set_int(n, "group", 2);
  Tensor x = f32({1, 2, 2}, {1, 2, 3, 4});
  Tensor w = f32({2, 2, 1}, {1, 2, 3, 4});
  Tensor b = f32({4}, {0, 0, 0, 100});
  expect_values(run(n, {&x, &w, &b}), {1, 4, 2}, {1, 2, 2, 4, 9, 12, 112, 116});
}

TEST(ConvTranspose, TwoDimensional) {
  Node n = conv_node("ConvTranspose", 2);
  set_ints(n, "strides", {2, 2});
  Tensor x = f32({1, 1, 2, 2}, {1, 2, 3, 4}), w = f32({1, 1, 1, 1}, {2});
  expect_values(run(n, {&x, &w}), {1, 1, 3, 3}, {2, 0, 4, 0, 0, 0, 6, 0, 8});
}

TEST(ConvTranspose, RejectsBadShapes) {
  Tensor x = iota({1, 2, 3}), w = f32({1, 1, 3}, {1, 1, 1});
  EXPECT_THROW(run(conv_node("ConvTranspose", 2), {&x, &w}), Error);  // W dim 0 must be C = 2
  Tensor x1 = iota({1, 1, 3});
  Node n = conv_node("ConvTranspose", 2);
  set_ints(n, "pads", {4, 4});
  EXPECT_THROW(run(n, {&x1, &w}), Error);  // crops more than the 5 outputs
  n = conv_node("ConvTranspose", 2);
  set_ints(n, "output_padding", {-1});
  EXPECT_THROW(run(n, {&x1, &w}), Error);
}

TEST(ConvInteger, ShiftsByZeroPoints) {
  Node n = conv_node("ConvInteger", 3);
  Tensor x = Tensor::from<uint8_t>({1, 1, 3}, std::vector<uint8_t>{2, 3, 4});
  Tensor w = Tensor::from<uint8_t>({1, 1, 2}, std::vector<uint8_t>{1, 2});
  Tensor x_zp = Tensor::scalar<uint8_t>(1);
  Tensor y = run(n, {&x, &w, &x_zp});
  ASSERT_EQ(y.dtype(), DType::i32);
  EXPECT_EQ(y.to_i64(), (std::vector<int64_t>{1 * 1 + 2 * 2, 2 * 1 + 3 * 2}));
  // Per-output-channel weight zero points, int8 weights.
  Node pc = conv_node("ConvInteger", 4);
  Tensor x8 = Tensor::from<uint8_t>({1, 1, 3}, std::vector<uint8_t>{1, 2, 3});
  Tensor w8 = Tensor::from<int8_t>({2, 1, 1}, std::vector<int8_t>{3, -5});
  Tensor w_zp = Tensor::from<int8_t>({2}, std::vector<int8_t>{1, -2});
  y = run(pc, {&x8, &w8, nullptr, &w_zp});
  EXPECT_EQ(y.to_i64(), (std::vector<int64_t>{2, 4, 6, -3, -6, -9}));
  Tensor bad_zp = Tensor::from<int8_t>({3}, std::vector<int8_t>{1, 2, 3});
  EXPECT_THROW(run(pc, {&x8, &w8, nullptr, &bad_zp}), Error);
}

TEST(QLinearConv, RequantizesWithRoundHalfEvenAndSaturation) {
  Node n = conv_node("QLinearConv", 9);
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
