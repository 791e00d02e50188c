// Compress, Unique and ReverseSequence (src/ops/movement/select.cpp) on the inputs the ONNX node tests
// leave out: empty tensors whose other dims are huge (they must allocate and loop over
// nothing), and bad attributes and inputs (one-line errors).
#include <gtest/gtest.h>

#include "op_test_util.h"

using namespace grove;
using namespace grove::optest;

namespace {

constexpr int64_t kHuge = int64_t{1} << 40;

Tensor bools(std::vector<bool> v) {
  Tensor t(DType::boolean, {static_cast<int64_t>(v.size())});
  for (size_t i = 0; i < v.size(); ++i) t.data<bool>()[i] = v[i];
  return t;
}

TEST(Select, CompressAlongAnAxisAndFlattened) {
  Tensor x = iota_f32({3, 2});
  Tensor keep = bools({true, false, true});
  expect_tensor(run(NodeBuilder("Compress", 11, 2).i("axis", 0), {&x, &keep}), {2, 2}, {0, 1, 4, 5});
  // No axis: the flattened input; a condition shorter than it selects among its first entries.
  expect_tensor(run(NodeBuilder("Compress", 11, 2), {&x, &keep}), {2}, {0, 2});
  Tensor too_long = bools({true, true, true, true, true, true, true});
  expect_error([&] { run(NodeBuilder("Compress", 11, 2), {&x, &too_long}); }, "entries");
  Tensor not_bool = ints1d({1, 0});
  expect_error([&] { run(NodeBuilder("Compress", 11, 2), {&x, &not_bool}); }, "bool");
}

TEST(Select, EmptyTensorsWithHugeDims) {
  Tensor x(DType::f32, {kHuge, 3, 0});
  Tensor keep = bools({true, false, true});
  EXPECT_EQ(run(NodeBuilder("Compress", 11, 2).i("axis", 1), {&x, &keep}).shape(), (Shape{kHuge, 2, 0}));
  // Unique over slices of no elements: they are all equal, so one slice (only Y is named:
  // inverse_indices would rightly need kHuge entries).
  Tensor e(DType::f32, {0, kHuge});
  EXPECT_EQ(run(NodeBuilder("Unique", 11, 1, 1).i("axis", 1), {&e}).shape(), (Shape{0, 1}));
  Tensor few(DType::f32, {0, 5});
  std::vector<Tensor> u = run_all(NodeBuilder("Unique", 11, 1, 4).i("axis", 1), {&few});
  expect_tensor(u.at(1), {1}, {0});
  expect_tensor(u.at(2), {5}, {0, 0, 0, 0, 0});
  expect_tensor(u.at(3), {1}, {5});
  // ReverseSequence over a huge time axis of empty rows: returns at once.
  Tensor r(DType::f32, {int64_t{1} << 56, 3, 0});
  Tensor lens = ints1d({0, 0, 0});
  EXPECT_EQ(run(NodeBuilder("ReverseSequence", 10, 2), {&r, &lens}).shape(), (Shape{int64_t{1} << 56, 3, 0}));
}

TEST(Select, UniqueSortedAndInFirstOccurrenceOrder) {
  Tensor x = f32({6}, {2, 1, 2, NAN, 3, 1});
  std::vector<Tensor> sorted = run_all(NodeBuilder("Unique", 11, 1, 4), {&x});
  expect_close(sorted.at(0), {4}, {1, 2, 3, NAN});
  expect_tensor(sorted.at(3), {4}, {2, 2, 1, 1});
  std::vector<Tensor> unsorted = run_all(NodeBuilder("Unique", 11, 1, 4).i("sorted", 0), {&x});
  expect_close(unsorted.at(0), {4}, {2, 1, NAN, 3});
  expect_tensor(unsorted.at(1), {4}, {0, 1, 3, 4});
  expect_tensor(unsorted.at(2), {6}, {0, 1, 0, 2, 3, 1});
}

TEST(Select, ReverseSequenceChecksItsAxesAndLengths) {
  Tensor x = iota_f32({3, 2});  // [time, batch]
  Tensor lens = ints1d({3, 1});
  expect_tensor(run(NodeBuilder("ReverseSequence", 10, 2), {&x, &lens}), {3, 2}, {4, 1, 2, 3, 0, 5});
  expect_error([&] { run(NodeBuilder("ReverseSequence", 10, 2).i("batch_axis", 0), {&x, &lens}); }, "batch_axis");
  Tensor too_long = ints1d({4, 1});
  expect_error([&] { run(NodeBuilder("ReverseSequence", 10, 2), {&x, &too_long}); }, "outside");
}

}  // namespace
