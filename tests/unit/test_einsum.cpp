// Einsum against hand-computed values: explicit and implicit outputs, ellipsis broadcasting,
// diagonals and traces from repeated labels, integer dtypes, and malformed equations.
#include <gtest/gtest.h>

#include "op_test_util.h"

using namespace grove;
using namespace grove::optest;

namespace {

NodeBuilder einsum(const std::string& equation, size_t inputs) {
  return std::move(NodeBuilder("Einsum", 12, inputs).s("equation", equation));
}

TEST(Einsum, MatMulTransposeAndSum) {
  Tensor a = iota_f32({2, 3}), b = iota_f32({3, 2});
  // [[0,1,2],[3,4,5]] x [[0,1],[2,3],[4,5]]
  expect_tensor(run(einsum("ij,jk->ik", 2), {&a, &b}), {2, 2}, {10, 13, 28, 40});
  expect_tensor(run(einsum(" i j , j k -> k i ", 2), {&a, &b}), {2, 2}, {10, 28, 13, 40});
  expect_tensor(run(einsum("ij->ji", 1), {&a}), {3, 2}, {0, 3, 1, 4, 2, 5});
  expect_tensor(run(einsum("ij->i", 1), {&a}), {2}, {3, 12});
  expect_tensor(run(einsum("ij->", 1), {&a}), {}, {15});
}

TEST(Einsum, ImplicitOutputIsSortedSingleLabels) {
  Tensor a = iota_f32({2, 3}), b = iota_f32({3, 2});
  // "ij,jk" -> "ik"; "ba" -> "ab" (a transpose); "i,i" -> "" (inner product).
  expect_tensor(run(einsum("ij,jk", 2), {&a, &b}), {2, 2}, {10, 13, 28, 40});
  expect_tensor(run(einsum("ba", 1), {&a}), {3, 2}, {0, 3, 1, 4, 2, 5});
  Tensor v = f32({3}, {1, 2, 3});
  expect_tensor(run(einsum("i,i", 2), {&v, &v}), {}, {14});
  // Outer product keeps both labels.
  Tensor w = f32({2}, {10, 20});
  expect_tensor(run(einsum("i,j", 2), {&v, &w}), {3, 2}, {10, 20, 20, 40, 30, 60});
}

TEST(Einsum, RepeatedLabelsGiveDiagonalAndTrace) {
  Tensor m = iota_f32({3, 3});
  expect_tensor(run(einsum("ii->i", 1), {&m}), {3}, {0, 4, 8});
  expect_tensor(run(einsum("ii", 1), {&m}), {}, {12});
  Tensor batch = iota_f32({2, 2, 2});
  expect_tensor(run(einsum("...ii->...i", 1), {&batch}), {2, 2}, {0, 3, 4, 7});
  Tensor rect = iota_f32({2, 3});
  expect_error([&] { run(einsum("ii->i", 1), {&rect}); }, "different sizes");
}

TEST(Einsum, EllipsisBroadcastsBatchDims) {
  Tensor a = iota_f32({2, 1, 2});  // batch dims [2]; b has [3] after broadcasting against a's 2
  Tensor b = f32({2, 1}, {1, 1});
  // a: batch 2 of [1x2], b: [2x1] with no batch dims -> per-batch sums of rows.
  expect_tensor(run(einsum("...ij,jk->...ik", 2), {&a, &b}), {2, 1, 1}, {1, 5});
  Tensor x = iota_f32({2, 1, 3}), y = f32({4, 3}, {1, 0, 0, 0, 1, 0, 0, 0, 1, 1, 1, 1});
  // x's ellipsis [2, 1] broadcasts with y's [4] to [2, 4].
  expect_tensor(run(einsum("...j,...j->...", 2), {&x, &y}), {2, 4}, {0, 1, 2, 3, 3, 4, 5, 12});
  // Implicit output puts the ellipsis dims first.
  expect_tensor(run(einsum("i...", 1), {&x}), {1, 3, 2}, {0, 3, 1, 4, 2, 5});
  expect_error([&] { run(einsum("...ij->ij", 1), {&x}); }, "no '...'");
}

TEST(Einsum, IntegerDtypes) {
  Tensor a = i64({2, 2}, {1, 2, 3, 4}), b = i64({2, 2}, {5, 6, 7, 8});
  Tensor y = run(einsum("ij,jk->ik", 2), {&a, &b});
  EXPECT_EQ(y.dtype(), DType::i64);
  EXPECT_EQ(y.to_i64(), (std::vector<int64_t>{19, 22, 43, 50}));
  Tensor c = i32({3}, {1, -2, 3});
  EXPECT_EQ(run(einsum("i->", 1), {&c}).to_i64(), (std::vector<int64_t>{2}));
  Tensor f = f32({2, 2}, {1, 2, 3, 4});
  expect_error([&] { run(einsum("ij,jk->ik", 2), {&a, &f}); }, "different dtypes");
}

TEST(Einsum, MalformedEquationsAreErrors) {
  Tensor m = iota_f32({2, 2}), v = f32({2}, {1, 2}), w = f32({3}, {1, 2, 3});
  expect_error([&] { run(NodeBuilder("Einsum", 12, 1), {&m}); }, "'equation' is required");
  expect_error([&] { run(einsum("ij->i->j", 1), {&m}); }, "more than one '->'");
  expect_error([&] { run(einsum("i1->i", 1), {&m}); }, "invalid character '1'");
  expect_error([&] { run(einsum("i..j", 1), {&m}); }, "not part of '...'");
  expect_error([&] { run(einsum("......", 1), {&m}); }, "more than one '...'");
  expect_error([&] { run(einsum("i", 1), {&m}); }, "has rank 2");
  expect_error([&] { run(einsum("ij,jk->ik", 1), {&m}); }, "2 operand terms for 1 inputs");
  expect_error([&] { run(einsum("ij->k", 1), {&m}); }, "'k' appears in no input");
  expect_error([&] { run(einsum("ij->ii", 1), {&m}); }, "appears twice");
  expect_error([&] { run(einsum("i,i", 2), {&v, &w}); }, "do not broadcast");
}

}  // namespace
