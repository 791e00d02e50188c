// Empty tensors whose other dims are huge, on the ops whose loops or tables follow those dims
// (TfIdfVectorizer, the losses): they must return at once or give a one-line error, never hang,
// run out of memory or overflow. Movement and select ops have theirs in their own files.
#include <gtest/gtest.h>

#include "op_test_util.h"

using namespace grove;
using namespace grove::optest;

namespace {

constexpr int64_t kHuge = int64_t{1} << 40;

TEST(HostileShapes, TfIdfWithoutNgramsOverHugeEmptyRows) {
  Tensor ids(DType::i64, {kHuge, 0});
  Node n = NodeBuilder("TfIdfVectorizer", 9, 1).s("mode", "TF").i("min_gram_length", 1).i("max_gram_length", 1);
  EXPECT_EQ(run(n, {&ids}).shape(), (Shape{kHuge, 0}));
}

TEST(HostileShapes, LossOverEmptyBatchWithLongTrailingDims) {
  Tensor scores(DType::f32, {0, 3, kHuge, 1000});
  Tensor target(DType::i64, {0, kHuge, 1000});
  EXPECT_EQ(run(NodeBuilder("NegativeLogLikelihoodLoss", 13, 2).s("reduction", "none"), {&scores, &target}).shape(),
            (Shape{0, kHuge, 1000}));
}

// Such shapes cannot even be made now (numel bounds the product of the non-zero dims), so
// the ops above never see a product that overflows.
TEST(HostileShapes, EmptyTensorsWhoseOtherDimsOverflowAreRejected) {
  expect_error([] { Tensor(DType::f32, {0, 3, kHuge, kHuge}); }, "too many elements");
}

}  // namespace
