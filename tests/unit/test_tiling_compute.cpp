// Tile rules of Conv, the pools, MatMul/Gemm and the row-normalising ops against the
// references, over several grids, with poisoned inputs outside what `needs` names.
#include "kernels/gemm.h"
#include "tiling_test_util.h"

namespace grove {
namespace {

using optest::NodeBuilder;
using tiletest::check_tiling;
using tiletest::cuttable_of;
using tiletest::needs_of;
using tiletest::random_f32;

constexpr double kTol = 1e-5;

// ---- Conv

TEST(TilingConv, PlainPaddedWithBias) {
  Node conv = NodeBuilder("Conv", 11, 3).ints("pads", {1, 1, 1, 1});
  // 5 input channels: the GEMM (up to 4 take the direct kernel, TilingKernels.ConvFewInputChannelsRunDirect).
  std::vector<Tensor> in = {random_f32({2, 5, 7, 6}, 1), random_f32({6, 5, 3, 3}, 2), random_f32({6}, 3)};
  // Output channels in whole register-tile columns (nr): 6 channels are not cut at all.
  const int64_t nr = int64_t(kernels::gemm_blocking(kernels::active_isa()).nr);
  EXPECT_EQ(cuttable_of(conv, in), (std::vector<int64_t>{1, nr, 1, 0}));
  check_tiling(conv, in, kTol);
  // Tiles starting anywhere (both GEMM forms, weights packed per tile or taken prepared).
  const std::vector<int64_t> any_channel{1, 1, 1, 0};
  auto stats = check_tiling(conv, in, kTol, &any_channel);
  EXPECT_GT(stats.tiles, 80u);
}

TEST(TilingConv, StridesDilationsAsymmetricPads) {
  Node conv = NodeBuilder("Conv", 11, 2).ints("strides", {2, 3}).ints("dilations", {2, 1}).ints("pads", {1, 0, 2, 1});
  check_tiling(conv, {random_f32({1, 3, 11, 10}, 4), random_f32({2, 3, 3, 2}, 5)}, kTol);
  check_tiling(NodeBuilder("Conv", 11, 3).s("auto_pad", "SAME_UPPER").ints("strides", {2, 2}),
               {random_f32({1, 2, 7, 8}, 6), random_f32({3, 2, 4, 3}, 7), random_f32({3}, 8)}, kTol);
  // Pads wider than the kernel reaches: the first and last rows read only padding.
  check_tiling(NodeBuilder("Conv", 11, 2).ints("pads", {2, 0, 2, 0}),
               {random_f32({1, 2, 4, 3}, 9), random_f32({2, 2, 1, 1}, 10)}, kTol);
}

TEST(TilingConv, GroupsAndDepthwise) {
  Node grouped = NodeBuilder("Conv", 11, 2).i("group", 2).ints("strides", {2, 1}).ints("pads", {0, 1, 1, 0});
  std::vector<Tensor> in = {random_f32({1, 6, 9, 8}, 11), random_f32({4, 3, 3, 2}, 12)};
  check_tiling(grouped, in, kTol);
  // Output channels 1..2 straddle both groups: every input channel; 2..3 only group 1's.
  auto needs = needs_of(grouped, in, {{0, 1}, {1, 3}, {2, 4}, {0, 8}});
  EXPECT_EQ(needs[0], (Region{{0, 1}, {0, 6}, {4, 9}, {0, 8}}));
  EXPECT_EQ(needs[1], (Region{{1, 3}, {0, 3}, {0, 3}, {0, 2}}));
  needs = needs_of(grouped, in, {{0, 1}, {2, 4}, {0, 1}, {0, 8}});
  EXPECT_EQ(needs[0], (Region{{0, 1}, {3, 6}, {0, 3}, {0, 8}}));
  Node depthwise = NodeBuilder("Conv", 11, 3).i("group", 5).ints("pads", {1, 1, 1, 1}).ints("strides", {2, 2});
  check_tiling(depthwise, {random_f32({2, 5, 6, 7}, 13), random_f32({5, 1, 3, 3}, 14), random_f32({5}, 15)}, kTol);
}

TEST(TilingConv, OtherSpatialRanks) {
  check_tiling(NodeBuilder("Conv", 11, 2).ints("strides", {2}).ints("pads", {1, 1}),
               {random_f32({2, 3, 11}, 16), random_f32({4, 3, 3}, 17)}, kTol);
  check_tiling(NodeBuilder("Conv", 11, 3).ints("pads", {0, 1, 1, 1, 0, 0}),
               {random_f32({1, 2, 4, 5, 5}, 18), random_f32({3, 2, 2, 3, 3}, 19), random_f32({3}, 20)}, kTol);
}

TEST(TilingConv, OtherDtypesAreOneWholeTile) {
  Node conv = NodeBuilder("Conv", 11, 2);
  Tensor x(DType::f64, {1, 1, 3, 3}), w(DType::f64, {1, 1, 2, 2});
  for (int i = 0; i < 9; ++i) x.data<double>()[i] = i;
  for (int i = 0; i < 4; ++i) w.data<double>()[i] = 1;
  EXPECT_EQ(cuttable_of(conv, {x, w}), (std::vector<int64_t>{0, 0, 0, 0}));
  check_tiling(conv, {x, w}, 0);
}

// ---- Pools

TEST(TilingPool, MaxPoolWindows) {
  check_tiling(NodeBuilder("MaxPool", 12, 1).ints("kernel_shape", {3, 3}).ints("strides", {2, 2}).ints("pads", {1, 1, 1, 1}),
               {random_f32({2, 3, 9, 8}, 21)}, 0);
  check_tiling(NodeBuilder("MaxPool", 12, 1).ints("kernel_shape", {2, 3}).i("ceil_mode", 1).ints("strides", {2, 2}),
               {random_f32({1, 2, 7, 8}, 22)}, 0);
  check_tiling(NodeBuilder("MaxPool", 12, 1).ints("kernel_shape", {2, 2}).ints("dilations", {2, 2}),
               {random_f32({1, 2, 6, 6}, 23)}, 0);
  check_tiling(NodeBuilder("MaxPool", 12, 1).ints("kernel_shape", {3}).ints("pads", {1, 1}), {random_f32({2, 2, 9}, 24)}, 0);
  auto needs = needs_of(NodeBuilder("MaxPool", 12, 1).ints("kernel_shape", {3, 3}).ints("strides", {2, 2}).ints("pads", {1, 1, 1, 1}),
                        {random_f32({2, 3, 9, 8}, 21)}, {{1, 2}, {0, 2}, {2, 4}, {0, 4}});
  EXPECT_EQ(needs[0], (Region{{1, 2}, {0, 2}, {3, 8}, {0, 8}}));
}

TEST(TilingPool, AveragePoolPaddingCounts) {
  for (int include : {0, 1})
    check_tiling(NodeBuilder("AveragePool", 11, 1).ints("kernel_shape", {3, 2}).ints("pads", {1, 0, 1, 1}).i("count_include_pad", include),
                 {random_f32({2, 3, 6, 5}, 25)}, kTol);
  check_tiling(NodeBuilder("AveragePool", 11, 1).ints("kernel_shape", {3, 3}).ints("strides", {2, 2}).i("ceil_mode", 1),
               {random_f32({1, 2, 8, 8}, 26)}, kTol);
}

TEST(TilingPool, GlobalPools) {
  Node gap = NodeBuilder("GlobalAveragePool", 1, 1);
  EXPECT_EQ(cuttable_of(gap, {random_f32({2, 5, 3, 4}, 27)}), (std::vector<int64_t>{1, 1, 0, 0}));
  check_tiling(gap, {random_f32({2, 5, 3, 4}, 27)}, kTol);
  check_tiling(NodeBuilder("GlobalMaxPool", 1, 1), {random_f32({3, 4, 5}, 28)}, 0);
}

// ---- MatMul and Gemm

TEST(TilingMatMul, BatchedBroadcastAndVectors) {
  check_tiling(NodeBuilder("MatMul", 13, 2), {random_f32({2, 3, 5, 4}, 30), random_f32({4, 6}, 31)}, kTol);
  check_tiling(NodeBuilder("MatMul", 13, 2), {random_f32({2, 1, 3, 4}, 32), random_f32({5, 4, 2}, 33)}, kTol);
  check_tiling(NodeBuilder("MatMul", 13, 2), {random_f32({5}, 34), random_f32({3, 5, 2}, 35)}, kTol);
  check_tiling(NodeBuilder("MatMul", 13, 2), {random_f32({3, 4}, 36), random_f32({4}, 37)}, kTol);
  check_tiling(NodeBuilder("MatMul", 13, 2), {random_f32({7}, 38), random_f32({7}, 39)}, kTol);
  auto needs = needs_of(NodeBuilder("MatMul", 13, 2), {random_f32({2, 1, 3, 4}, 32), random_f32({5, 4, 2}, 33)},
                        {{1, 2}, {2, 4}, {1, 3}, {0, 1}});
  EXPECT_EQ(needs[0], (Region{{1, 2}, {0, 1}, {1, 3}, {0, 4}}));
  EXPECT_EQ(needs[1], (Region{{2, 4}, {0, 4}, {0, 1}}));
}

TEST(TilingMatMul, GemmTransposesAndC) {
  for (int ta : {0, 1})
    for (int tb : {0, 1}) {
      Shape a = ta ? Shape{5, 3} : Shape{3, 5}, b = tb ? Shape{4, 5} : Shape{5, 4};
      Node gemm = NodeBuilder("Gemm", 13, 3).i("transA", ta).i("transB", tb).f("alpha", 0.5f).f("beta", 2.0f);
      check_tiling(gemm, {random_f32(a, 40), random_f32(b, 41), random_f32({4}, 42)}, kTol);
      check_tiling(gemm, {random_f32(a, 43), random_f32(b, 44), random_f32({3, 1}, 45)}, kTol);
    }
  check_tiling(NodeBuilder("Gemm", 13, 2), {random_f32({3, 5}, 46), random_f32({5, 2}, 47)}, kTol);
  check_tiling(NodeBuilder("Gemm", 13, 3), {random_f32({3, 5}, 48), random_f32({5, 2}, 49), Tensor::scalar(1.5f)}, kTol);
  auto needs = needs_of(NodeBuilder("Gemm", 13, 3).i("transB", 1), {random_f32({3, 5}, 1), random_f32({4, 5}, 2), random_f32({4}, 3)},
                        {{1, 2}, {2, 4}});
  EXPECT_EQ(needs[0], (Region{{1, 2}, {0, 5}}));
  EXPECT_EQ(needs[1], (Region{{2, 4}, {0, 5}}));
  EXPECT_EQ(needs[2], (Region{{2, 4}}));
}

// ---- Row-normalising ops

TEST(TilingRows, SoftmaxFamilyKeepsTheAxisWhole) {
  Node softmax = NodeBuilder("Softmax", 13, 1).i("axis", 1);
  EXPECT_EQ(cuttable_of(softmax, {random_f32({2, 5, 3}, 50)}), (std::vector<int64_t>{1, 0, 1}));
  check_tiling(softmax, {random_f32({2, 5, 3}, 50, -4, 4)}, kTol);
  check_tiling(NodeBuilder("Softmax", 13, 1), {random_f32({3, 4, 6}, 51, -4, 4)}, kTol);
  // Before opset 13 the row is every dim from the axis on.
  Node old = NodeBuilder("Softmax", 11, 1).i("axis", 1);
  EXPECT_EQ(cuttable_of(old, {random_f32({2, 5, 3}, 52)}), (std::vector<int64_t>{1, 0, 0}));
  check_tiling(old, {random_f32({2, 5, 3}, 52, -4, 4)}, kTol);
  check_tiling(NodeBuilder("LogSoftmax", 13, 1).i("axis", -2), {random_f32({2, 4, 3}, 53, -4, 4)}, kTol);
  check_tiling(NodeBuilder("Hardmax", 13, 1), {random_f32({3, 5}, 54)}, 0);
}

TEST(TilingRows, LayerNormWithBroadcastParameters) {
  Node ln = NodeBuilder("LayerNormalization", 17, 3).f("epsilon", 1e-3f);
  check_tiling(ln, {random_f32({2, 3, 8}, 55), random_f32({8}, 56), random_f32({8}, 57)}, kTol);
  Node two_axes = NodeBuilder("LayerNormalization", 17, 2).i("axis", 1);
  EXPECT_EQ(cuttable_of(two_axes, {random_f32({3, 4, 5}, 58), random_f32({4, 5}, 59)}), (std::vector<int64_t>{1, 0, 0}));
  check_tiling(two_axes, {random_f32({3, 4, 5}, 58), random_f32({4, 5}, 59)}, kTol);
  // Scale varying along a leading dim too.
  check_tiling(NodeBuilder("LayerNormalization", 17, 3), {random_f32({2, 3, 4}, 60), random_f32({3, 1}, 61), random_f32({1, 4}, 62)}, kTol);
}

TEST(TilingRows, BatchAndInstanceNorm) {
  std::vector<Tensor> bn = {random_f32({2, 3, 4, 5}, 63), random_f32({3}, 64), random_f32({3}, 65), random_f32({3}, 66),
                            random_f32({3}, 67, 0.5f, 2)};
  EXPECT_EQ(cuttable_of(NodeBuilder("BatchNormalization", 15, 5), bn), (std::vector<int64_t>{1, 1, 1, 1}));
  check_tiling(NodeBuilder("BatchNormalization", 15, 5), bn, kTol);
  auto needs = needs_of(NodeBuilder("BatchNormalization", 15, 5), bn, {{0, 1}, {1, 3}, {0, 4}, {2, 3}});
  EXPECT_EQ(needs[4], (Region{{1, 3}}));
  Node in_norm = NodeBuilder("InstanceNormalization", 6, 3);
  std::vector<Tensor> inputs = {random_f32({2, 3, 4, 5}, 68), random_f32({3}, 69), random_f32({3}, 70)};
  EXPECT_EQ(cuttable_of(in_norm, inputs), (std::vector<int64_t>{1, 1, 0, 0}));
  check_tiling(in_norm, inputs, kTol);
}

}  // namespace
}  // namespace grove
