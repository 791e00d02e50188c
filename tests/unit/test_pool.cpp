// Pool references against hand-computed values: padding, ceil_mode's last-window rule,
// AveragePool's divisor, MaxPool's Indices in both storage orders, and the Global forms.
#include <gtest/gtest.h>

#include "op_test_util.h"

using namespace grove;
using namespace grove::optest;

namespace {

Node pool_node(const std::string& op, std::vector<int64_t> kernel, size_t outputs = 1) {
  NodeBuilder b(op, 17, 1, outputs);
  if (!kernel.empty()) b.ints("kernel_shape", std::move(kernel));
  return b;
}

const Tensor kOneToFive = f32({1, 1, 5}, {1, 2, 3, 4, 5});

}  // namespace

TEST(MaxPool, StridesPadsAndDilations) {
  Node n = pool_node("MaxPool", {2});
  set_ints(n, "strides", {2});
  expect_f32(run(n, kOneToFive), {1, 1, 2}, {2, 4});
  set_ints(n, "pads", {1, 1});
  expect_f32(run(n, kOneToFive), {1, 1, 3}, {1, 3, 5});
  Node d = pool_node("MaxPool", {2});
  set_ints(d, "dilations", {2});
  expect_f32(run(d, f32({1, 1, 5}, {1, 5, 2, 4, 3})), {1, 1, 3}, {2, 5, 3});
}

TEST(MaxPool, PaddingNeverWinsOverNegatives) {
  Node n = pool_node("MaxPool", {3});
  set_ints(n, "pads", {1, 1});
  expect_f32(run(n, f32({1, 1, 3}, {-5, -2, -9})), {1, 1, 3}, {-2, -2, -2});
}

TEST(MaxPool, CeilModeDropsWindowsStartingInRightPadding) {
  Node n = pool_node("MaxPool", {2});
  set_ints(n, "strides", {2});
  set_int(n, "ceil_mode", 1);
  expect_f32(run(n, kOneToFive), {1, 1, 3}, {2, 4, 5});
  // Padded length 5 would allow a third window, but it would start at 4, in the right padding.
  set_ints(n, "pads", {0, 1});
  expect_f32(run(n, f32({1, 1, 4}, {1, 2, 3, 4})), {1, 1, 2}, {2, 4});
}

TEST(MaxPool, AutoPadSame) {
  Tensor x = f32({1, 1, 4}, {1, 3, 2, 4});
  Node n = pool_node("MaxPool", {2});
  set_string(n, "auto_pad", "SAME_UPPER");
  expect_f32(run(n, x), {1, 1, 4}, {3, 3, 4, 4});
  set_string(n, "auto_pad", "SAME_LOWER");
  expect_f32(run(n, x), {1, 1, 4}, {1, 3, 3, 4});
  set_string(n, "auto_pad", "VALID");
  expect_f32(run(n, x), {1, 1, 3}, {3, 3, 4});
}

TEST(MaxPool, IndicesInBothStorageOrders) {
  // Two planes of 3x3: 1..9 and 10..18; a 2x2 window picks each window's bottom-right.
  Tensor x = iota_f32({1, 2, 3, 3}, 1);
  Node n = pool_node("MaxPool", {2, 2}, 2);
  std::vector<Tensor> out = run_all(n, {&x});
  expect_f32(out[0], {1, 2, 2, 2}, {5, 6, 8, 9, 14, 15, 17, 18});
  ASSERT_EQ(out[1].dtype(), DType::i64);
  EXPECT_EQ(out[1].to_i64(), (std::vector<int64_t>{4, 5, 7, 8, 13, 14, 16, 17}));
  set_int(n, "storage_order", 1);  // index = h + w * H within the plane
  out = run_all(n, {&x});
  EXPECT_EQ(out[1].to_i64(), (std::vector<int64_t>{4, 7, 5, 8, 13, 16, 14, 17}));
}

TEST(MaxPool, Uint8AndUnsupportedDtypes) {
  Tensor x = Tensor::from<uint8_t>({1, 1, 3}, std::vector<uint8_t>{7, 200, 3});
  Tensor y = run(pool_node("MaxPool", {2}), x);
  ASSERT_EQ(y.dtype(), DType::u8);
  EXPECT_EQ(y.to_i64(), (std::vector<int64_t>{200, 200}));
  Tensor xi = Tensor::from<int32_t>({1, 1, 3}, std::vector<int32_t>{1, 2, 3});
  expect_unsupported([&] { run(pool_node("MaxPool", {2}), xi); });
  expect_unsupported([&] { run(pool_node("AveragePool", {2}), x); });
}

TEST(AveragePool, CountIncludePad) {
  Tensor x = f32({1, 1, 3}, {1, 2, 3});
  Node n = pool_node("AveragePool", {3});
  set_ints(n, "pads", {1, 1});
  expect_f32(run(n, x), {1, 1, 3}, {1.5f, 2, 2.5f});
  set_int(n, "count_include_pad", 1);
  expect_f32(run(n, x), {1, 1, 3}, {1, 2, 5.f / 3});
}

TEST(AveragePool, CeilModeDivisorCountsOnlyThePaddedExtent) {
  Node n = pool_node("AveragePool", {2});
  set_ints(n, "strides", {2});
  set_int(n, "ceil_mode", 1);
  expect_f32(run(n, kOneToFive), {1, 1, 3}, {1.5f, 3.5f, 5});
  // Even with count_include_pad the part past the end of the padding does not count.
  set_int(n, "count_include_pad", 1);
  expect_f32(run(n, kOneToFive), {1, 1, 3}, {1.5f, 3.5f, 5});
  set_ints(n, "pads", {1, 0});
  expect_f32(run(n, kOneToFive), {1, 1, 3}, {0.5f, 2.5f, 4.5f});
}

TEST(AveragePool, TwoAndThreeDimensional) {
  Tensor x2 = f32({1, 1, 2, 3}, {1, 2, 3, 4, 5, 6});
  Node n = pool_node("AveragePool", {2, 2});
  expect_f32(run(n, x2), {1, 1, 1, 2}, {3, 4});
  Tensor x3 = iota_f32({1, 1, 2, 2, 2}, 1);
  expect_f32(run(pool_node("AveragePool", {2, 2, 2}), x3), {1, 1, 1, 1, 1}, {4.5f});
}

TEST(LpPool, NormOverEachWindow) {
  Node n = pool_node("LpPool", {2});
  expect_f32(run(n, f32({1, 1, 3}, {3, -4, 0})), {1, 1, 2}, {5, 4});
  set_int(n, "p", 1);
  expect_f32(run(n, f32({1, 1, 3}, {3, -4, 0})), {1, 1, 2}, {7, 4});
}

TEST(GlobalPool, AverageMaxAndLp) {
  Tensor x = f32({1, 2, 2, 2}, {1, 2, 3, 4, -1, -2, -3, -4});
  Node n = pool_node("GlobalAveragePool", {});
  expect_f32(run(n, x), {1, 2, 1, 1}, {2.5f, -2.5f});
  n.op_type = "GlobalMaxPool";
  expect_f32(run(n, x), {1, 2, 1, 1}, {4, -1});
  n.op_type = "GlobalLpPool";
  set_int(n, "p", 1);
  expect_f32(run(n, x), {1, 2, 1, 1}, {10, 10});
  Tensor x1 = f32({2, 1, 3}, {1, 2, 3, 4, 5, 6});
  expect_f32(run(pool_node("GlobalAveragePool", {}), x1), {2, 1, 1}, {2, 5});
}

TEST(Pool, RejectsBadAttributesAndShapes) {
  EXPECT_THROW(run(pool_node("MaxPool", {}), kOneToFive), Error);  // kernel_shape is required
  EXPECT_THROW(run(pool_node("MaxPool", {2, 2}), kOneToFive), Error);  // kernel rank != spatial rank
  EXPECT_THROW(run(pool_node("MaxPool", {0}), kOneToFive), Error);
  EXPECT_THROW(run(pool_node("MaxPool", {6}), kOneToFive), Error);  // window larger than input
  Node n = pool_node("AveragePool", {2});
  set_ints(n, "strides", {1, 1});
  EXPECT_THROW(run(n, kOneToFive), Error);
  n = pool_node("AveragePool", {2});
  set_ints(n, "pads", {1, 1, 1});
  EXPECT_THROW(run(n, kOneToFive), Error);
  n = pool_node("MaxPool", {2});
  set_int(n, "storage_order", 3);
  EXPECT_THROW(run(n, kOneToFive), Error);
  Tensor flat = f32({1, 5}, {1, 2, 3, 4, 5});
  EXPECT_THROW(run(pool_node("MaxPool", {2}), flat), Error);
  EXPECT_THROW(run(pool_node("GlobalMaxPool", {}), flat), Error);
  n = pool_node("LpPool", {2});
  set_int(n, "p", 0);
  EXPECT_THROW(run(n, kOneToFive), Error);
}

TEST(MaxUnpool, ScattersToFlatIndices) {
  Node n = pool_node("MaxUnpool", {2, 2});
  n.inputs = {"x", "i"};
  set_ints(n, "strides", {2, 2});
  Tensor x = f32({1, 1, 2, 2}, {5, 6, 7, 8});
  Tensor idx = Tensor::from<int64_t>({1, 1, 2, 2}, std::vector<int64_t>{5, 7, 13, 15});
  std::vector<double> want(16, 0.0);
  want[5] = 5, want[7] = 6, want[13] = 7, want[15] = 8;
  expect_f32(run(n, {&x, &idx}), {1, 1, 4, 4}, want);
  n.inputs.push_back("shape");
  Tensor same = Tensor::from<int64_t>({4}, std::vector<int64_t>{1, 1, 4, 4});
  expect_f32(run(n, {&x, &idx, &same}), {1, 1, 4, 4}, want);
  Tensor larger = Tensor::from<int64_t>({4}, std::vector<int64_t>{1, 1, 5, 5});
  expect_unsupported(n, {&x, &idx, &larger});  // a larger output_shape
  Tensor outside = Tensor::from<int64_t>({1, 1, 2, 2}, std::vector<int64_t>{5, 7, 13, 16});
  n.inputs.pop_back();
  EXPECT_THROW(run(n, {&x, &outside}), Error);
}
