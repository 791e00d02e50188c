// Normalizations and the softmax family against hand-computed values.
#include <gtest/gtest.h>

#include <cmath>

#include "op_test_util.h"

using namespace grove;
using namespace grove::optest;

TEST(Softmax, LastAxisByDefault) {
  Tensor x = f32({2, 2}, {0, std::log(3.0f), 1, 1});
  expect_close(run(NodeBuilder("Softmax", 13, 1), {&x}), {2, 2}, {0.25, 0.75, 0.5, 0.5});
  Node axis0 = NodeBuilder("Softmax", 13, 1);
  set_int(axis0, "axis", 0);
  const double e = std::exp(1.0);
  expect_close(run(axis0, {&x}), {2, 2}, {1 / (1 + e), 3 / (3 + e), e / (1 + e), e / (3 + e)});
}

TEST(Softmax, BeforeOpset13CoercesTo2D) {
  // [1,2,2] zeros with axis 1: opset 11 spreads over all 4 trailing values, opset 13 over 2.
  Tensor x(DType::f32, {1, 2, 2});
  Node old_node = NodeBuilder("Softmax", 11, 1), new_node = NodeBuilder("Softmax", 13, 1);
  set_int(old_node, "axis", 1);
  set_int(new_node, "axis", 1);
  expect_close(run(old_node, {&x}), {1, 2, 2}, {0.25, 0.25, 0.25, 0.25});
  expect_close(run(new_node, {&x}), {1, 2, 2}, {0.5, 0.5, 0.5, 0.5});
  // Default axis 1 before 13: a [2,3] input normalizes each row.
  Tensor y = f32({2, 3}, {0, 0, 0, 5, 5, 5});
  expect_close(run(NodeBuilder("Softmax", 11, 1), {&y}), {2, 3}, std::vector<double>(6, 1.0 / 3));
}

TEST(Softmax, LogSoftmaxIsStableForLargeInputs) {
  Tensor x = f32({1, 2}, {1000, 1000});
  expect_close(run(NodeBuilder("LogSoftmax", 13, 1), {&x}), {1, 2}, {-std::log(2.0), -std::log(2.0)});
  expect_close(run(NodeBuilder("Softmax", 13, 1), {&x}), {1, 2}, {0.5, 0.5});
}

TEST(Softmax, HardmaxPicksFirstMax) {
  Tensor x = f32({2, 3}, {1, 3, 3, 4, 0, -1});
  expect_close(run(NodeBuilder("Hardmax", 13, 1), {&x}), {2, 3}, {0, 1, 0, 1, 0, 0});
  Node axis0 = NodeBuilder("Hardmax", 13, 1);
  set_int(axis0, "axis", -2);
  expect_close(run(axis0, {&x}), {2, 3}, {0, 1, 1, 1, 0, 0});
}

TEST(Softmax, BadAxisAndDtype) {
  Tensor x = f32({2, 3}, {1, 2, 3, 4, 5, 6});
  Node n = NodeBuilder("Softmax", 13, 1);
  set_int(n, "axis", 2);
  EXPECT_THROW(run_all(n, {&x}), Error);
  Tensor i = Tensor::from<int64_t>({2}, std::vector<int64_t>{1, 2});
  expect_unsupported(NodeBuilder("Softmax", 13, 1), {&i});
}

TEST(BatchNorm, InferenceFormula) {
  Tensor x = f32({1, 2, 1, 2}, {1, 2, 3, 4});
  Tensor scale = f32({2}, {1, 2}), bias = f32({2}, {0, 1}), mean = f32({2}, {1, 3}), var = f32({2}, {4, 1});
  Node n = NodeBuilder("BatchNormalization", 15, 5);
  set_float(n, "epsilon", 0);
  expect_close(run(n, {&x, &scale, &bias, &mean, &var}), {1, 2, 1, 2}, {0, 0.5, 1, 3});
  // Rank 2 ([N,C]) as exported from BatchNorm1d.
  Tensor x2 = f32({2, 2}, {1, 3, 5, 4});
  expect_close(run(n, {&x2, &scale, &bias, &mean, &var}), {2, 2}, {0, 1, 2, 3});
}

// training_mode=1: normalise with the batch's own statistics (population variance) and
// update the running statistics with momentum.
TEST(BatchNorm, TrainingModeUsesBatchStatistics) {
  Tensor x = f32({2, 2, 1, 1}, {1, 2, 3, 6});
  Tensor scale = f32({2}, {1, 2}), bias = f32({2}, {0, 1});
  Tensor mean = f32({2}, {0, 0}), var = f32({2}, {1, 1});
  Node n = NodeBuilder("BatchNormalization", 15, 5, 3);
  set_int(n, "training_mode", 1);
  set_float(n, "epsilon", 0);
  set_float(n, "momentum", 0.5f);
  std::vector<Tensor> out = run_all(n, {&x, &scale, &bias, &mean, &var});
  expect_close(out.at(0), {2, 2, 1, 1}, {-1, -1, 1, 3});
  expect_close(out.at(1), {2}, {1, 2});
  expect_close(out.at(2), {2}, {1, 2.5});
  // Opset 9 signals training by naming the saved statistics: not supported.
  Tensor p = f32({2}, {1, 1});
  Node old_training = NodeBuilder("BatchNormalization", 9, 5, 5);
  expect_unsupported(old_training, {&x, &p, &p, &p, &p});
  Tensor wrong = f32({3}, {1, 1, 1});
  EXPECT_THROW(run_all(NodeBuilder("BatchNormalization", 15, 5), {&x, &wrong, &p, &p, &p}), Error);
}

TEST(InstanceNorm, PerChannelPerSample) {
  Tensor x = f32({1, 2, 2}, {1, 3, 2, 4});
  Tensor scale = f32({2}, {2, 3}), bias = f32({2}, {1, -1});
  Node n = NodeBuilder("InstanceNormalization", 6, 3);
  set_float(n, "epsilon", 0);
  expect_close(run(n, {&x, &scale, &bias}), {1, 2, 2}, {-1, 3, -4, 2});
  Tensor wrong = f32({1}, {1});
  EXPECT_THROW(run_all(n, {&x, &wrong, &bias}), Error);
}

TEST(LayerNorm, LastAxisWithStatistics) {
  Tensor x = f32({2, 2}, {1, 3, 0, 4});
  Tensor w = f32({2}, {1, 2}), b = f32({2}, {0, 1});
  Node n = NodeBuilder("LayerNormalization", 17, 3, 3);
  set_float(n, "epsilon", 0);
  std::vector<Tensor> out = run_all(n, {&x, &w, &b});
  expect_close(out[0], {2, 2}, {-1, 3, -1, 3});
  expect_close(out[1], {2, 1}, {2, 2});
  expect_close(out[2], {2, 1}, {1, 0.5});
}

TEST(LayerNorm, AxisZeroBroadcastsScaleAndSkipsOptionalOutputs) {
  Tensor x = f32({2, 2}, {1, 3, 0, 4});
  Tensor w = f32({2}, {1, 2});
  Node n = NodeBuilder("LayerNormalization", 17, 2, 1);
  set_int(n, "axis", 0);
  set_float(n, "epsilon", 0);
  const double inv = 1 / std::sqrt(2.5);
  std::vector<Tensor> out = run_all(n, {&x, &w});
  ASSERT_EQ(out.size(), 1u);
  expect_close(out[0], {2, 2}, {-inv, 2 * inv, -2 * inv, 4 * inv});
  Node named = NodeBuilder("LayerNormalization", 17, 2, 3);
  named.outputs[1] = "";
  out = run_all(named, {&x, &w});
  EXPECT_TRUE(out[1].empty());
  expect_close(out[2], {2, 1}, {1, 0.5});
}

TEST(LayerNorm, BadAttributes) {
  Tensor x = f32({2, 2}, {1, 3, 0, 4});
  Tensor w3 = f32({3}, {1, 1, 1});
  EXPECT_THROW(run_all(NodeBuilder("LayerNormalization", 17, 2), {&x, &w3}), Error);
  Node n = NodeBuilder("LayerNormalization", 17, 2);
  set_int(n, "axis", 2);
  Tensor w = f32({2}, {1, 1});
  EXPECT_THROW(run_all(n, {&x, &w}), Error);
  Node stash = NodeBuilder("LayerNormalization", 17, 2);
  set_int(stash, "stash_type", 11);
  expect_unsupported(stash, {&x, &w});
}

TEST(LRN, ChannelWindow) {
  Tensor x = f32({1, 3, 1, 1}, {1, 2, 3});
  Node n = NodeBuilder("LRN", 13, 1);
  set_int(n, "size", 2);
  set_float(n, "alpha", 2);
  set_float(n, "beta", 1);
  // Window [c, c+1]: sums 5, 13, 9; y = x / (1 + sum).
  expect_close(run(n, {&x}), {1, 3, 1, 1}, {1.0 / 6, 2.0 / 14, 3.0 / 10});
  Node no_size = NodeBuilder("LRN", 13, 1);
  EXPECT_THROW(run_all(no_size, {&x}), Error);
}
