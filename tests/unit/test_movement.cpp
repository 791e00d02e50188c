// Movement-family references against hand-computed values: Transpose, Concat, Split in both
// opset forms, Slice's clamping and negative steps, Gather/GatherElements with negative
// indices, Tile, Pad's three modes and cropping, DepthToSpace/SpaceToDepth and Trilu.
#include <gtest/gtest.h>

#include <limits>

#include "op_test_util.h"

using namespace grove;
using namespace grove::optest;

namespace {

constexpr int64_t kMax = std::numeric_limits<int64_t>::max();
constexpr int64_t kMin = std::numeric_limits<int64_t>::min();

TEST(Movement, TransposeDefaultReversesAndPerm) {
  Tensor x = iota_f32({2, 3});
  expect_tensor(run(NodeBuilder("Transpose", 13, 1), {&x}), {3, 2}, {0, 3, 1, 4, 2, 5});
  Tensor c = iota_f32({2, 2, 3});
  // y[k, i, j] = x[i, j, k]
  expect_tensor(run(NodeBuilder("Transpose", 13, 1).ints("perm", {2, 0, 1}), {&c}), {3, 2, 2},
                {0, 3, 6, 9, 1, 4, 7, 10, 2, 5, 8, 11});
  expect_error([&] { run(NodeBuilder("Transpose", 13, 1).ints("perm", {0, 0, 1}), {&c}); }, "permutation");
  expect_error([&] { run(NodeBuilder("Transpose", 13, 1).ints("perm", {0, 1}), {&c}); }, "perm has 2");
}

TEST(Movement, ConcatNegativeAxisAnyDtype) {
  Tensor a = i64({2, 1}, {1, 2}), b = i64({2, 2}, {3, 4, 5, 6});
  Tensor y = run(NodeBuilder("Concat", 13, 2).i("axis", -1), {&a, &b});
  EXPECT_EQ(y.dtype(), DType::i64);
  expect_tensor(y, {2, 3}, {1, 3, 4, 2, 5, 6});
  Tensor empty(DType::i64, {2, 0});
  expect_tensor(run(NodeBuilder("Concat", 13, 2).i("axis", 1), {&a, &empty}), {2, 1}, {1, 2});
  Tensor c = i64({3, 1}, {7, 8, 9});
  expect_error([&] { run(NodeBuilder("Concat", 13, 2).i("axis", 1), {&a, &c}); }, "cannot concatenate");
}

TEST(Movement, SplitEqualAndVariable) {
  Tensor x = iota_f32({2, 4});
  auto halves = run_all(NodeBuilder("Split", 13, 1, 2).i("axis", 1), {&x});
  expect_tensor(halves[0], {2, 2}, {0, 1, 4, 5});
  expect_tensor(halves[1], {2, 2}, {2, 3, 6, 7});
  Tensor lengths = ints1d({1, 3});
  auto parts = run_all(NodeBuilder("Split", 13, 2, 2).i("axis", -1), {&x, &lengths});
  expect_tensor(parts[0], {2, 1}, {0, 4});
  expect_tensor(parts[1], {2, 3}, {1, 2, 3, 5, 6, 7});
  auto old = run_all(NodeBuilder("Split", 11, 1, 2).ints("split", {3, 1}).i("axis", 1), {&x});
  expect_tensor(old[1], {2, 1}, {3, 7});
  expect_error([&] { run_all(NodeBuilder("Split", 13, 1, 3).i("axis", 1), {&x}); }, "equal parts");
  Tensor bad = ints1d({1, 2});
  expect_error([&] { run_all(NodeBuilder("Split", 13, 2, 2).i("axis", 1), {&x, &bad}); }, "sum to 3");
}

TEST(Movement, SliceClampsAndStepsBackwards) {
  Tensor x = iota_f32({2, 5});
  Tensor starts = ints1d({0, 1}), ends = ints1d({kMax, 1000}), axes = ints1d({0, 1}), steps = ints1d({1, 2});
  expect_tensor(run(NodeBuilder("Slice", 13, 5), {&x, &starts, &ends, &axes, &steps}), {2, 2}, {1, 3, 6, 8});
  // Backwards from past-the-end to the very start: the start clamps to dim-1, INT64_MIN to "before 0".
  Tensor rs = ints1d({100}), re = ints1d({kMin}), ra = ints1d({-1}), rstep = ints1d({-2});
  expect_tensor(run(NodeBuilder("Slice", 13, 5), {&x, &rs, &re, &ra, &rstep}), {2, 3}, {4, 2, 0, 9, 7, 5});
  // A negative end counts from the back; an empty range gives a zero dim.
  Tensor es = ints1d({-1}), ee = ints1d({-4}), ea = ints1d({1}), estep = ints1d({-1});
  expect_tensor(run(NodeBuilder("Slice", 13, 5), {&x, &es, &ee, &ea, &estep}), {2, 3}, {4, 3, 2, 9, 8, 7});
  Tensor fs = ints1d({3}), fe = ints1d({1});
  EXPECT_EQ(run(NodeBuilder("Slice", 13, 4), {&x, &fs, &fe, &ea}).shape(), (Shape{2, 0}));
  Tensor zero = ints1d({0});
  expect_error([&] { run(NodeBuilder("Slice", 13, 5), {&x, &fs, &fe, &ea, &zero}); }, "zero");
  // Opset 9 keeps starts/ends/axes in attributes.
  expect_tensor(run(NodeBuilder("Slice", 9, 1).ints("starts", {-2}).ints("ends", {kMax}).ints("axes", {1}), {&x}),
                {2, 2}, {3, 4, 8, 9});
}

// An empty tensor may have huge dims (fuzz_model: a Slice of a [0, 2^40] input ran out of
// memory building per-dim offset tables). Ops that copy through offset tables allocate nothing.
TEST(Movement, EmptyTensorsWithHugeDimsAllocateNothing) {
  const int64_t huge = int64_t{1} << 40;
  Tensor x(DType::f32, {0, huge});
  Tensor starts = ints1d({0}), ends = ints1d({kMax}), axes = ints1d({1});
  EXPECT_EQ(run(NodeBuilder("Slice", 13, 4), {&x, &starts, &ends, &axes}).shape(), (Shape{0, huge}));
  EXPECT_EQ(run(NodeBuilder("Transpose", 13, 1), {&x}).shape(), (Shape{huge, 0}));
  Tensor repeats = ints1d({1, 1});
  EXPECT_EQ(run(NodeBuilder("Tile", 13, 2), {&x, &repeats}).shape(), (Shape{0, huge}));
  Tensor pads = ints1d({0, 1, 0, 1});
  EXPECT_EQ(run(NodeBuilder("Pad", 13, 2), {&x, &pads}).shape(), (Shape{0, huge + 2}));
  Tensor shape = ints1d({0, huge});
  EXPECT_EQ(run(NodeBuilder("Expand", 13, 2), {&x, &shape}).shape(), (Shape{0, huge}));
}

TEST(Movement, GatherNegativeIndicesAndAxes) {
  Tensor x = iota_f32({3, 2});
  Tensor idx = i64({2}, {-1, 0});
  expect_tensor(run(NodeBuilder("Gather", 13, 2), {&x, &idx}), {2, 2}, {4, 5, 0, 1});
  Tensor idx2 = i32({2, 2}, {1, 0, 0, 1});
  expect_tensor(run(NodeBuilder("Gather", 13, 2).i("axis", 1), {&x, &idx2}), {3, 2, 2},
                {1, 0, 0, 1, 3, 2, 2, 3, 5, 4, 4, 5});
  Tensor scalar = Tensor::scalar<int64_t>(1);
  expect_tensor(run(NodeBuilder("Gather", 13, 2), {&x, &scalar}), {2}, {2, 3});
  Tensor out_of_range = i64({1}, {3});
  expect_error([&] { run(NodeBuilder("Gather", 13, 2), {&x, &out_of_range}); }, "out of range");
}

TEST(Movement, GatherElements) {
  Tensor x = f32({2, 2}, {1, 2, 3, 4});
  Tensor idx = i64({2, 2}, {0, 0, -1, 0});
  expect_tensor(run(NodeBuilder("GatherElements", 13, 2).i("axis", 1), {&x, &idx}), {2, 2}, {1, 1, 4, 3});
  Tensor rows = i64({1, 2}, {1, 0});
  expect_tensor(run(NodeBuilder("GatherElements", 13, 2), {&x, &rows}), {1, 2}, {3, 2});
}

TEST(Movement, GatherNDWithBatchDims) {
  Tensor x = iota_f32({2, 2, 2});
  Tensor pairs = i64({2, 2}, {0, 1, 1, -1});  // full tuples pick rows; -1 counts from the back
  expect_tensor(run(NodeBuilder("GatherND", 13, 2), {&x, &pairs}), {2, 2}, {2, 3, 6, 7});
  Tensor per_batch = i64({2, 1}, {1, 0});
  expect_tensor(run(NodeBuilder("GatherND", 13, 2).i("batch_dims", 1), {&x, &per_batch}), {2, 2}, {2, 3, 4, 5});
  Tensor too_deep = i64({1, 4}, {0, 0, 0, 0});
  expect_error([&] { run(NodeBuilder("GatherND", 13, 2), {&x, &too_deep}); }, "last indices dim");
}

TEST(Movement, Tile) {
  Tensor x = i32({2, 1}, {1, 2});
  Tensor repeats = ints1d({2, 3});
  expect_tensor(run(NodeBuilder("Tile", 13, 2), {&x, &repeats}), {4, 3}, {1, 1, 1, 2, 2, 2, 1, 1, 1, 2, 2, 2});
  Tensor none = ints1d({0, 1});
  EXPECT_EQ(run(NodeBuilder("Tile", 13, 2), {&x, &none}).shape(), (Shape{0, 1}));
  Tensor wrong = ints1d({2});
  expect_error([&] { run(NodeBuilder("Tile", 13, 2), {&x, &wrong}); }, "repeats has 1");
}

TEST(Movement, PadModes) {
  Tensor x = f32({1, 3}, {1, 2, 3});
  Tensor pads = ints1d({0, 2, 0, 1});
  Tensor value = Tensor::scalar<float>(9);
  expect_tensor(run(NodeBuilder("Pad", 13, 3), {&x, &pads, &value}), {1, 6}, {9, 9, 1, 2, 3, 9});
  expect_tensor(run(NodeBuilder("Pad", 13, 2).s("mode", "reflect"), {&x, &pads}), {1, 6}, {3, 2, 1, 2, 3, 2});
  expect_tensor(run(NodeBuilder("Pad", 13, 2).s("mode", "edge"), {&x, &pads}), {1, 6}, {1, 1, 1, 2, 3, 3});
  // Negative pads crop; opset 2 keeps pads and value in attributes.
  Tensor crop = ints1d({0, -1, 1, 0});
  expect_tensor(run(NodeBuilder("Pad", 13, 2), {&x, &crop}), {2, 2}, {2, 3, 0, 0});
  expect_tensor(run(NodeBuilder("Pad", 9, 1).ints("pads", {0, 1, 0, 0}).f("value", -1), {&x}), {1, 4}, {-1, 1, 2, 3});
  Tensor long_pads = ints1d({0, 0, 0, 5});  // reflect further than the dim: periodic, like numpy
  expect_tensor(run(NodeBuilder("Pad", 13, 2).s("mode", "reflect"), {&x, &long_pads}), {1, 8}, {1, 2, 3, 2, 1, 2, 3, 2});
  EXPECT_TRUE(expect_error([&] { run(NodeBuilder("Pad", 13, 2).s("mode", "wrap"), {&x, &pads}); }, "wrap"));
  Tensor short_pads = ints1d({1, 1});
  expect_error([&] { run(NodeBuilder("Pad", 13, 2), {&x, &short_pads}); }, "pads has 2");
  Tensor int_x = i64({2}, {5, 6});
  Tensor one_pad = ints1d({1, 0});
  expect_tensor(run(NodeBuilder("Pad", 13, 2), {&int_x, &one_pad}), {3}, {0, 5, 6});
}

TEST(Movement, DepthToSpaceAndBack) {
  Tensor x = iota_f32({1, 4, 1, 1});
  expect_tensor(run(NodeBuilder("DepthToSpace", 13, 1).i("blocksize", 2), {&x}), {1, 1, 2, 2}, {0, 1, 2, 3});
  Tensor x2 = iota_f32({1, 8, 1, 1});
  // DCR reads channel (i*b+j)*C' + c; CRD reads c*b*b + i*b + j.
  expect_tensor(run(NodeBuilder("DepthToSpace", 13, 1).i("blocksize", 2), {&x2}), {1, 2, 2, 2},
                {0, 2, 4, 6, 1, 3, 5, 7});
  expect_tensor(run(NodeBuilder("DepthToSpace", 13, 1).i("blocksize", 2).s("mode", "CRD"), {&x2}), {1, 2, 2, 2},
                {0, 1, 2, 3, 4, 5, 6, 7});
  Tensor image = iota_f32({1, 2, 2, 4});
  Tensor packed = run(NodeBuilder("SpaceToDepth", 13, 1).i("blocksize", 2), {&image});
  EXPECT_EQ(packed.shape(), (Shape{1, 8, 1, 2}));
  Tensor back = run(NodeBuilder("DepthToSpace", 13, 1).i("blocksize", 2), {&packed});
  expect_tensor(back, {1, 2, 2, 4}, image.to_f64());
}

TEST(Movement, Trilu) {
  Tensor x = iota_f32({2, 3});
  expect_tensor(run(NodeBuilder("Trilu", 14, 1), {&x}), {2, 3}, {0, 1, 2, 0, 4, 5});
  Tensor k = Tensor::scalar<int64_t>(-1);
  expect_tensor(run(NodeBuilder("Trilu", 14, 2).i("upper", 0), {&x, &k}), {2, 3}, {0, 0, 0, 3, 0, 0});
}

}  // namespace
