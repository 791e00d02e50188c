// Tile rules of the elementwise, movement and reshape families against the references,
// over several grids, with poisoned inputs outside what `needs` names (tiling_test_util.h).
#include <algorithm>
#include <random>

#include "tiling_test_util.h"

namespace grove {
namespace {

using optest::i64;
using optest::NodeBuilder;
using optest::ints1d;
using tiletest::check_tiling;
using tiletest::cuttable_of;
using tiletest::needs_of;
using tiletest::random_bool;
using tiletest::random_f32;

constexpr double kFloatTol = 1e-5;

TEST(TilingRules, LookupCoversTheFamiliesAndSkipsExtraOutputs) {
  for (const char* op : {"Relu", "Add", "Where", "Conv", "MaxPool", "GlobalAveragePool", "MatMul", "Gemm", "Softmax",
                         "LayerNormalization", "BatchNormalization", "Transpose", "Concat", "Slice", "Reshape", "Flatten"})
    EXPECT_NE(find_tile_rule(NodeBuilder(op, 17, 1)), nullptr) << op;
  EXPECT_EQ(find_tile_rule(NodeBuilder("TopK", 17, 2)), nullptr);
  EXPECT_EQ(find_tile_rule(NodeBuilder("ConvTranspose", 17, 2)), nullptr);
  // A second output the graph uses (MaxPool's Indices, LayerNorm's Mean) needs the whole op.
  EXPECT_EQ(find_tile_rule(NodeBuilder("MaxPool", 17, 1, 2)), nullptr);
  Node unnamed = NodeBuilder("LayerNormalization", 17, 2, 3);
  unnamed.outputs[1] = unnamed.outputs[2] = "";
  EXPECT_NE(find_tile_rule(unnamed), nullptr);
  Node custom = NodeBuilder("Relu", 1, 1);
  custom.domain = "com.microsoft";
  EXPECT_EQ(find_tile_rule(custom), nullptr);
}

// for_each_run and for_each_row against a plain walk of every element, on generated shapes
// (rank 0 to 11, past the runs' inline odometer) and regions (each dim cut anywhere, or whole).
TEST(TileLoops, RunsAndRowsVisitEveryElementOfTheRegionInOrder) {
  std::mt19937 rng(7);
  auto between = [&](int64_t lo, int64_t hi) { return std::uniform_int_distribution<int64_t>(lo, hi)(rng); };
  for (int c = 0; c < 3000; ++c) {
    const auto rank = static_cast<size_t>(between(0, c % 10 == 0 ? 11 : 5));
    Shape shape(rank);
    Region r(rank);
    int64_t elements = 1;
    for (size_t d = 0; d < rank; ++d) {
      shape[d] = between(1, elements > 512 ? 2 : 5);
      elements *= shape[d];
      const int64_t b = between(0, shape[d] - 1);
      r[d] = between(0, 2) == 0 ? Range{0, shape[d]} : Range{b, between(b + 1, shape[d])};
    }
    // Every element of the region, row-major, by its offset.
    std::vector<int64_t> want;
    std::vector<int64_t> index(rank);
    for (size_t d = 0; d < rank; ++d) index[d] = r[d].begin;
    for (bool more = true; more;) {
      int64_t offset = 0;
      for (size_t d = 0; d < rank; ++d) offset = offset * shape[d] + index[d];
      want.push_back(offset);
      more = false;
      for (size_t d = rank; d-- > 0;) {
        if (++index[d] < r[d].end) {
          more = true;
          break;
        }
        index[d] = r[d].begin;
      }
    }
    std::vector<int64_t> runs, rows;
    tiling::for_each_run(shape, r, [&](int64_t offset, int64_t run) {
      for (int64_t i = 0; i < run; ++i) runs.push_back(offset + i);
    });
    tiling::for_each_row(shape, r, [&](int64_t offset, const std::vector<int64_t>& at) {
      int64_t from_index = 0;
      for (size_t d = 0; d < rank; ++d) from_index = from_index * shape[d] + at[d];
      ASSERT_EQ(offset, from_index) << "case " << c;
      for (int64_t i = 0; i < (rank ? r.back().size() : 1); ++i) rows.push_back(offset + i);
    });
    ASSERT_EQ(runs, want) << "case " << c << ": for_each_run, shape " << shape_str(shape);
    ASSERT_EQ(rows, want) << "case " << c << ": for_each_row, shape " << shape_str(shape);
  }
}

TEST(TilingElementwise, UnaryOpsOverEveryGrid) {
  for (const char* op : {"Relu", "Sigmoid", "Tanh", "Erf", "Exp", "Neg", "HardSwish", "Abs", "Softplus"}) {
    auto stats = check_tiling(NodeBuilder(op, 17, 1), {random_f32({2, 3, 5}, 1, -3, 3)}, kFloatTol);
    EXPECT_GT(stats.tiles, 30u) << op;
  }
  check_tiling(NodeBuilder("Sqrt", 17, 1), {random_f32({3, 7}, 2, 0.1f, 4)}, kFloatTol);
  check_tiling(NodeBuilder("LeakyRelu", 17, 1).f("alpha", 0.3f), {random_f32({4, 5}, 3)}, kFloatTol);
  check_tiling(NodeBuilder("Cast", 17, 1).i("to", 7), {random_f32({3, 4}, 4, -9, 9)}, 0);
  // Cast's own runs: int32 -> float (a dynamically quantized conv's sums), float <-> float16.
  Tensor sums(DType::i32, {2, 3, 5});
  for (int64_t i = 0; i < sums.numel(); ++i) sums.data<int32_t>()[i] = static_cast<int32_t>(i * 7919 % 20011) - 10000;
  EXPECT_GT(check_tiling(NodeBuilder("Cast", 17, 1).i("to", 1), {sums}, 0).tiles, 30u);
  check_tiling(NodeBuilder("Cast", 17, 1).i("to", 10), {random_f32({3, 7}, 4, -70000, 70000)}, 0);
  Tensor halves(DType::f16, {3, 7});
  for (int64_t i = 0; i < halves.numel(); ++i) reinterpret_cast<uint16_t*>(halves.raw())[i] = static_cast<uint16_t>(i * 3001);
  check_tiling(NodeBuilder("Cast", 17, 1).i("to", 1), {halves}, 0);
  check_tiling(NodeBuilder("Identity", 17, 1), {random_f32({5}, 5)}, 0);
  check_tiling(NodeBuilder("Relu", 17, 1), {random_f32({}, 6)}, 0);  // a scalar: one tile
}

// Bilinear Resize of the last two dims: tiles take runs of (image, channel) planes. A batch dim
// resized stays one tile.
TEST(TilingResize, BilinearPlanesOverEveryGrid) {
  const Tensor x = random_f32({2, 5, 7, 9}, 31);
  const Tensor scales = optest::f32({4}, {1, 1, 1.5f, 2});
  auto stats = check_tiling(NodeBuilder("Resize", 13, 3).s("mode", "linear"), {x, Tensor(), scales}, 0);
  EXPECT_GT(stats.tiles, 5u);
  const Tensor sizes = optest::ints1d({2, 5, 4, 13});
  check_tiling(NodeBuilder("Resize", 13, 4).s("mode", "linear").s("coordinate_transformation_mode", "asymmetric"),
               {x, Tensor(), Tensor(), sizes}, 0);
  const Tensor batch = optest::f32({4}, {2, 1, 1, 1});
  const auto whole = check_tiling(NodeBuilder("Resize", 13, 3).s("mode", "linear"), {x, Tensor(), batch}, 0);
  EXPECT_LT(whole.tiles, stats.tiles) << "a resized batch dim: one tile per grid";
}

// Nearest Resize of the last two dims (4-byte elements): runs of planes too, each output the
// element the reference picks (check_tiling compares with the reference, inputs poisoned
// outside `needs`). PyTorch's upsampling (asymmetric, floor), a downsample rounding half up, sizes
// under half_pixel, and int32 elements; a resized channel dim stays one tile.
TEST(TilingResize, NearestPlanesOverEveryGrid) {
  const Tensor x = random_f32({2, 5, 7, 9}, 32);
  const Tensor up = optest::f32({4}, {1, 1, 2, 2});
  const auto stats = check_tiling(
      NodeBuilder("Resize", 13, 3).s("coordinate_transformation_mode", "asymmetric").s("nearest_mode", "floor"),
      {x, Tensor(), up}, 0);
  EXPECT_GT(stats.tiles, 5u);
  const Tensor down = optest::f32({4}, {1, 1, 0.6f, 0.45f});
  check_tiling(NodeBuilder("Resize", 13, 3).s("nearest_mode", "round_prefer_ceil"), {x, Tensor(), down}, 0);
  check_tiling(NodeBuilder("Resize", 13, 4), {x, Tensor(), Tensor(), optest::ints1d({2, 5, 11, 4})}, 0);
  Tensor ints(DType::i32, {1, 3, 4, 5});
  for (int64_t i = 0; i < ints.numel(); ++i) ints.data<int32_t>()[i] = static_cast<int32_t>(i * 7919);
  check_tiling(NodeBuilder("Resize", 13, 3), {ints, Tensor(), up}, 0);
  const auto whole = check_tiling(NodeBuilder("Resize", 13, 3), {x, Tensor(), optest::f32({4}, {1, 2, 1, 1})}, 0);
  EXPECT_LT(whole.tiles, stats.tiles) << "a resized channel dim: one tile per grid";
}

TEST(TilingElementwise, ClipWithScalarBounds) {
  check_tiling(NodeBuilder("Clip", 13, 3), {random_f32({3, 5}, 7, -2, 2), Tensor::scalar(-0.5f), Tensor::scalar(0.7f)}, 0);
  check_tiling(NodeBuilder("Clip", 13, 3), {random_f32({4, 2}, 8, -2, 2), Tensor(), optest::f32({1}, {0.1f})}, 0);
  check_tiling(NodeBuilder("Clip", 6, 1).f("min", -0.2f).f("max", 0.3f), {random_f32({2, 9}, 9)}, 0);
}

TEST(TilingElementwise, BroadcastingBinaryOps) {
  // Broadcast on either side, scalars, and a rank-lower operand.
  check_tiling(NodeBuilder("Add", 14, 2), {random_f32({2, 3, 4, 5}, 10), random_f32({3, 1, 5}, 11)}, 0);
  check_tiling(NodeBuilder("Sub", 14, 2), {random_f32({4, 5}, 12), random_f32({2, 3, 4, 5}, 13)}, 0);
  check_tiling(NodeBuilder("Mul", 14, 2), {random_f32({3, 4}, 14), Tensor::scalar(2.5f)}, 0);
  check_tiling(NodeBuilder("Div", 14, 2), {random_f32({2, 1, 4}, 15), random_f32({3, 1}, 16, 0.5f, 2)}, 0);
  check_tiling(NodeBuilder("Add", 14, 2), {random_f32({1, 6}, 17), random_f32({5, 1}, 18)}, 0);
  check_tiling(NodeBuilder("Pow", 15, 2), {random_f32({3, 4}, 19, 0.1f, 2), random_f32({4}, 20)}, kFloatTol);
  check_tiling(NodeBuilder("Max", 13, 3), {random_f32({2, 3}, 21), random_f32({3}, 22), random_f32({2, 1}, 23)}, 0);
  check_tiling(NodeBuilder("Mean", 13, 2), {random_f32({4, 3}, 24), random_f32({1, 3}, 25)}, kFloatTol);
  check_tiling(NodeBuilder("PRelu", 16, 2), {random_f32({2, 3, 4, 2}, 26), random_f32({3, 1, 1}, 27)}, 0);
  // Integer and bool outputs go through the same rule.
  check_tiling(NodeBuilder("Add", 14, 2), {i64({2, 3}, {1, 2, 3, 4, 5, 6}), i64({3}, {10, 20, 30})}, 0);
  Tensor a = random_f32({3, 4}, 28), b = a.clone();
  b.data<float>()[5] = 9;
  check_tiling(NodeBuilder("Less", 13, 2), {a, random_f32({4}, 29)}, 0);
  check_tiling(NodeBuilder("Equal", 13, 2), {a, b}, 0);
}

TEST(TilingElementwise, WhereBroadcastsAllThree) {
  check_tiling(NodeBuilder("Where", 16, 3), {random_bool({1, 4}, 30), random_f32({3, 4}, 31), random_f32({3, 1}, 32)}, 0);
  check_tiling(NodeBuilder("Where", 16, 3), {random_bool({2, 1, 3}, 33), random_f32({3}, 34), Tensor::scalar(-1.0f)}, 0);
}

TEST(TilingElementwise, NeedsMapThroughBroadcasting) {
  Node add = NodeBuilder("Add", 14, 2);
  auto needs = needs_of(add, {random_f32({2, 3, 4}, 1), random_f32({3, 1}, 2)}, {{1, 2}, {0, 2}, {1, 3}});
  EXPECT_EQ(needs[0], (Region{{1, 2}, {0, 2}, {1, 3}}));
  EXPECT_EQ(needs[1], (Region{{0, 2}, {0, 1}}));
  EXPECT_EQ(cuttable_of(add, {random_f32({2, 3, 4}, 1), random_f32({3, 1}, 2)}), (std::vector<int64_t>{1, 1, 1}));
}

TEST(TilingElementwise, RegionOutsideOutputIsAnError) {
  Tensor x = random_f32({2, 3}, 1), y(DType::f32, {2, 3});
  std::vector<const Tensor*> in = {&x};
  std::vector<Tensor*> out = {&y};
  Node relu = NodeBuilder("Relu", 14, 1);
  TileScratch scratch;
  optest::expect_error([&] { find_tile_rule(relu)->run_tile(relu, in, out, {{0, 2}, {1, 4}}, nullptr, scratch); }, "does not fit");
  optest::expect_error([&] { find_tile_rule(relu)->run_tile(relu, in, out, {{0, 2}}, nullptr, scratch); }, "does not fit");
}

// ---- Movement

TEST(TilingMovement, TransposeAnyPermutation) {
  check_tiling(NodeBuilder("Transpose", 13, 1).ints("perm", {0, 2, 3, 1}), {random_f32({2, 3, 4, 5}, 40)}, 0);
  check_tiling(NodeBuilder("Transpose", 13, 1), {random_f32({3, 1, 5}, 41)}, 0);  // default: reversed
  check_tiling(NodeBuilder("Transpose", 13, 1).ints("perm", {1, 0}), {i64({2, 3}, {1, 2, 3, 4, 5, 6})}, 0);
  // Bytes in 4-D take their own loop (the channels-last layout changes): every permutation,
  // with the long dim read or written contiguously, and a 1-wide dim.
  std::vector<int64_t> perm = {0, 1, 2, 3};
  uint32_t seed = 60;
  do {
    // The second shape has two dims past the 16 x 16 blocks of the channels-last transposes.
    for (Shape shape : {Shape{2, 3, 1, 7}, Shape{1, 18, 2, 17}}) {
      Tensor bytes(DType::u8, shape);
      std::mt19937 rng(seed++);
      for (uint8_t& v : bytes.span<uint8_t>()) v = static_cast<uint8_t>(rng());
      check_tiling(NodeBuilder("Transpose", 13, 1).ints("perm", perm), {bytes}, 0);
    }
  } while (std::next_permutation(perm.begin(), perm.end()));
  auto needs = needs_of(NodeBuilder("Transpose", 13, 1).ints("perm", {2, 0, 1}), {random_f32({2, 3, 4}, 1)},
                        {{1, 3}, {0, 1}, {2, 3}});
  EXPECT_EQ(needs[0], (Region{{0, 1}, {2, 3}, {1, 3}}));
}

TEST(TilingMovement, ConcatReadsOnlyTheInputsItsRegionCovers) {
  Node concat = NodeBuilder("Concat", 13, 3).i("axis", 1);
  std::vector<Tensor> in = {random_f32({2, 1, 3}, 42), random_f32({2, 4, 3}, 43), random_f32({2, 2, 3}, 44)};
  check_tiling(concat, in, 0);
  auto needs = needs_of(concat, in, {{0, 2}, {2, 4}, {1, 2}});
  EXPECT_EQ(needs[0], Region{});
  EXPECT_EQ(needs[1], (Region{{0, 2}, {1, 3}, {1, 2}}));
  EXPECT_EQ(needs[2], Region{});
  check_tiling(NodeBuilder("Concat", 13, 2).i("axis", -1), {random_f32({3, 2}, 45), random_f32({3, 5}, 46)}, 0);
  // NCHW planes: a tile covering whole rows copies each channel's rows as one run.
  check_tiling(NodeBuilder("Concat", 13, 2).i("axis", 1), {random_f32({2, 3, 4, 5}, 47), random_f32({2, 2, 4, 5}, 48)}, 0);
}

TEST(TilingMovement, SliceWithStepsAndNegativeIndices) {
  Tensor x = random_f32({5, 7, 6}, 50);
  check_tiling(NodeBuilder("Slice", 13, 5), {x, ints1d({1, -1}), ints1d({5, 0}), ints1d({0, 1}), ints1d({2, -2})}, 0);
  check_tiling(NodeBuilder("Slice", 13, 3), {x, ints1d({0, 1, 2}), ints1d({4, 6, 100})}, 0);
  check_tiling(NodeBuilder("Slice", 13, 5), {x, ints1d({-1}), ints1d({-100}), ints1d({2}), ints1d({-3})}, 0);
  check_tiling(NodeBuilder("Slice", 9, 1).ints("starts", {1}).ints("ends", {3}).ints("axes", {1}), {x}, 0);
  auto needs = needs_of(NodeBuilder("Slice", 13, 5), {x, ints1d({1, 5}), ints1d({5, 0}), ints1d({0, 1}), ints1d({2, -2})},
                        {{1, 2}, {0, 2}, {0, 6}});
  EXPECT_EQ(needs[0], (Region{{3, 4}, {3, 6}, {0, 6}}));  // rows 1*2+1; columns 5 and 3
}

// A scalar has no dims to cut or merge: the fuzzer's graph with a Slice of a rank-0 value read
// past the empty shape and strides.
TEST(TilingMovement, ScalarsMoveWhole) {
  check_tiling(NodeBuilder("Slice", 13, 3), {Tensor::scalar<float>(3), ints1d({}), ints1d({})}, 0);
  check_tiling(NodeBuilder("Transpose", 13, 1), {Tensor::scalar<float>(4)}, 0);
}

TEST(TilingMovement, SliceWithoutConstantsIsOneWholeTile) {
  Node slice = NodeBuilder("Slice", 13, 3);
  Tensor x = random_f32({4, 4}, 1), starts = ints1d({1}), ends = ints1d({3});
  std::vector<ValueInfo> in = {{DType::f32, {4, 4}, &x, true}, {DType::i64, {1}, nullptr, true}, {DType::i64, {1}, nullptr, true}};
  std::vector<ValueInfo> out = {{DType::f32, {2, 4}}};
  const TileRule* rule = find_tile_rule(slice);
  EXPECT_EQ(rule->cuttable(slice, in, out), (std::vector<int64_t>{0, 0}));
  std::vector<Region> needs(3);
  rule->needs(slice, in, out, {{0, 2}, {0, 4}}, needs);
  EXPECT_EQ(needs[0], full_region({4, 4}));
}

// ---- Reshape family

TEST(TilingReshape, CutsSharedLeadingDimsAndWholeBlocksOfTheFirstOtherDim) {
  Node reshape = NodeBuilder("Reshape", 14, 2);
  Tensor x = random_f32({2, 3, 4}, 60);
  // [2,3,4] -> [6,4]: blocks of 3 rows are one index of the input's dim 0; the 4s match.
  EXPECT_EQ(cuttable_of(reshape, {x, ints1d({6, 4})}), (std::vector<int64_t>{3, 1}));
  check_tiling(reshape, {x, ints1d({6, 4})}, 0);
  // [2,3,4] -> [2,12]: blocks of 4 of the merged dim are one index of the 3.
  EXPECT_EQ(cuttable_of(reshape, {x, ints1d({2, 12})}), (std::vector<int64_t>{1, 4}));
  check_tiling(reshape, {x, ints1d({2, 12})}, 0);
  EXPECT_EQ(cuttable_of(reshape, {x, ints1d({2, 3, 2, 2})}), (std::vector<int64_t>{1, 1, 1, 0}));
  check_tiling(reshape, {x, ints1d({2, 3, 2, 2})}, 0);
  // [4,6] -> [2,2,3,2]: groups 4 <-> 2,2 and 6 <-> 3,2; each splits its input dim.
  Tensor y = random_f32({4, 6}, 61);
  EXPECT_EQ(cuttable_of(reshape, {y, ints1d({2, 2, 3, 2})}), (std::vector<int64_t>{1, 0, 1, 0}));
  check_tiling(reshape, {y, ints1d({2, 2, 3, 2})}, 0);
  auto needs = needs_of(reshape, {y, ints1d({2, 2, 3, 2})}, {{1, 2}, {0, 2}, {0, 3}, {0, 2}});
  EXPECT_EQ(needs[0], (Region{{2, 4}, {0, 6}}));
  // [4,6] -> [3,8]: neither divides, so one tile.
  EXPECT_EQ(cuttable_of(reshape, {y, ints1d({3, 8})}), (std::vector<int64_t>{0, 0}));
  check_tiling(reshape, {y, ints1d({3, 8})}, 0);
  check_tiling(reshape, {random_f32({1}, 62), ints1d({})}, 0);  // to a scalar
}

TEST(TilingReshape, FlattenSqueezeUnsqueeze) {
  Tensor x = random_f32({2, 3, 1, 4}, 63);
  check_tiling(NodeBuilder("Flatten", 13, 1).i("axis", 2), {x}, 0);
  check_tiling(NodeBuilder("Flatten", 13, 1).i("axis", 0), {x}, 0);
  EXPECT_EQ(cuttable_of(NodeBuilder("Flatten", 13, 1).i("axis", 2), {x}), (std::vector<int64_t>{3, 1}));
  EXPECT_EQ(cuttable_of(NodeBuilder("Flatten", 13, 1).i("axis", 0), {x}), (std::vector<int64_t>{1, 12}));
  check_tiling(NodeBuilder("Squeeze", 13, 2), {x, ints1d({2})}, 0);
  check_tiling(NodeBuilder("Unsqueeze", 13, 2), {x, ints1d({0, 3})}, 0);
  EXPECT_EQ(cuttable_of(NodeBuilder("Unsqueeze", 13, 2), {x, ints1d({0, 3})}), (std::vector<int64_t>{1, 1, 1, 1, 1, 1}));
  Node reshape = NodeBuilder("Reshape", 14, 2);
  // The transformer head split [1, 5, 12] -> [1, 5, 3, 4] cuts tokens and heads.
  EXPECT_EQ(cuttable_of(reshape, {random_f32({1, 5, 12}, 64), ints1d({1, 5, 3, 4})}), (std::vector<int64_t>{1, 1, 1, 0}));
  check_tiling(reshape, {random_f32({1, 5, 12}, 64), ints1d({1, 5, 3, 4})}, 0);
  check_tiling(reshape, {random_f32({1, 5, 3, 4}, 65), ints1d({5, 12})}, 0);
  EXPECT_EQ(cuttable_of(NodeBuilder("Squeeze", 13, 2), {x, ints1d({2})}), (std::vector<int64_t>{1, 1, 1}));
}

}  // namespace
}  // namespace grove
