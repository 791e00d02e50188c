// Normalizations and the softmax family against hand-computed values.
#include <gtest/gtest.h>

#include <cmath>

#include "ops/evaluate.h"

using namespace grove;

namespace {

Node norm_node(const std::string& op, int opset, size_t inputs, size_t outputs = 1) {
  Node n;
  n.name = "n";
  n.op_type = op;
  n.opset = opset;
  for (size_t i = 0; i < inputs; ++i) n.inputs.push_back("in" + std::to_string(i));
  for (size_t i = 0; i < outputs; ++i) n.outputs.push_back("out" + std::to_string(i));
  return n;
}

void set_int(Node& n, const std::string& key, int64_t v) { n.attrs[key] = Attribute{.kind = Attribute::Kind::i, .i = v}; }
void set_float(Node& n, const std::string& key, float v) { n.attrs[key] = Attribute{.kind = Attribute::Kind::f, .f = v}; }

std::vector<Tensor> run(const Node& n, std::vector<const Tensor*> in) { return evaluate_node(n, in); }

Tensor f32(Shape shape, std::vector<float> v) { return Tensor::from<float>(std::move(shape), v); }

void expect_near(const Tensor& t, const Shape& shape, const std::vector<double>& want) {
  EXPECT_EQ(t.shape(), shape);
  std::vector<double> got = t.to_f64();
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < want.size(); ++i) EXPECT_NEAR(got[i], want[i], 1e-5 * (1 + std::fabs(want[i]))) << "at " << i;
}

void expect_unsupported(const Node& n, std::vector<const Tensor*> in) {
  try {
    run(n, in);
    FAIL() << "expected an Unsupported error";
  } catch (const Error& e) {
    EXPECT_TRUE(e.unsupported()) << e.what();
  }
}

}  // namespace

TEST(Softmax, LastAxisByDefault) {
  Tensor x = f32({2, 2}, {0, std::log(3.0f), 1, 1});
  expect_near(run(norm_node("Softmax", 13, 1), {&x})[0], {2, 2}, {0.25, 0.75, 0.5, 0.5});
  Node axis0 = norm_node("Softmax", 13, 1);
  set_int(axis0, "axis", 0);
  const double e = std::exp(1.0);
  expect_near(run(axis0, {&x})[0], {2, 2}, {1 / (1 + e), 3 / (3 + e), e / (1 + e), e / (3 + e)});
}

TEST(Softmax, BeforeOpset13CoercesTo2D) {
  // [1,2,2] zeros with axis 1: opset 11 spreads over all 4 trailing values, opset 13 over 2.
  Tensor x(DType::f32, {1, 2, 2});
  Node old_node = norm_node("Softmax", 11, 1), new_node = norm_node("Softmax", 13, 1);
  set_int(old_node, "axis", 1);
  set_int(new_node, "axis", 1);
  expect_near(run(old_node, {&x})[0], {1, 2, 2}, {0.25, 0.25, 0.25, 0.25});
  expect_near(run(new_node, {&x})[0], {1, 2, 2}, {0.5, 0.5, 0.5, 0.5});
  // Default axis 1 before 13: a [2,3] input normalizes each row.
  Tensor y = f32({2, 3}, {0, 0, 0, 5, 5, 5});
  expect_near(run(norm_node("Softmax", 11, 1), {&y})[0], {2, 3}, std::vector<double>(6, 1.0 / 3));
}

TEST(Softmax, LogSoftmaxIsStableForLargeInputs) {
  Tensor x = f32({1, 2}, {1000, 1000});
  expect_near(run(norm_node("LogSoftmax", 13, 1), {&x})[0], {1, 2}, {-std::log(2.0), -std::log(2.0)});
  expect_near(run(norm_node("Softmax", 13, 1), {&x})[0], {1, 2}, {0.5, 0.5});
}

TEST(Softmax, HardmaxPicksFirstMax) {
  Tensor x = f32({2, 3}, {1, 3, 3, 4, 0, -1});
  expect_near(run(norm_node("Hardmax", 13, 1), {&x})[0], {2, 3}, {0, 1, 0, 1, 0, 0});
  Node axis0 = norm_node("Hardmax", 13, 1);
  set_int(axis0, "axis", -2);
  expect_near(run(axis0, {&x})[0], {2, 3}, {0, 1, 1, 1, 0, 0});
}

TEST(Softmax, BadAxisAndDtype) {
  Tensor x = f32({2, 3}, {1, 2, 3, 4, 5, 6});
  Node n = norm_node("Softmax", 13, 1);
  set_int(n, "axis", 2);
  EXPECT_THROW(run(n, {&x}), Error);
  Tensor i = Tensor::from<int64_t>({2}, std::vector<int64_t>{1, 2});
  expect_unsupported(norm_node("Softmax", 13, 1), {&i});
}

TEST(BatchNorm, InferenceFormula) {
  Tensor x = f32({1, 2, 1, 2}, {1, 2, 3, 4});
  Tensor scale = f32({2}, {1, 2}), bias = f32({2}, {0, 1}), mean = f32({2}, {1, 3}), var = f32({2}, {4, 1});
  Node n = norm_node("BatchNormalization", 15, 5);
  set_float(n, "epsilon", 0);
  expect_near(run(n, {&x, &scale, &bias, &mean, &var})[0], {1, 2, 1, 2}, {0, 0.5, 1, 3});
  // Rank 2 ([N,C]) as exported from BatchNorm1d.
  Tensor x2 = f32({2, 2}, {1, 3, 5, 4});
  expect_near(run(n, {&x2, &scale, &bias, &mean, &var})[0], {2, 2}, {0, 1, 2, 3});
}

TEST(BatchNorm, TrainingIsUnsupported) {
  Tensor x = f32({1, 2, 1, 1}, {1, 2});
  Tensor p = f32({2}, {1, 1});
  Node n = norm_node("BatchNormalization", 15, 5, 3);
  set_int(n, "training_mode", 1);
  expect_unsupported(n, {&x, &p, &p, &p, &p});
  Node old_training = norm_node("BatchNormalization", 9, 5, 5);
  expect_unsupported(old_training, {&x, &p, &p, &p, &p});
  Tensor wrong = f32({3}, {1, 1, 1});
  EXPECT_THROW(run(norm_node("BatchNormalization", 15, 5), {&x, &wrong, &p, &p, &p}), Error);
}

TEST(InstanceNorm, PerChannelPerSample) {
  Tensor x = f32({1, 2, 2}, {1, 3, 2, 4});
  Tensor scale = f32({2}, {2, 3}), bias = f32({2}, {1, -1});
  Node n = norm_node("InstanceNormalization", 6, 3);
  set_float(n, "epsilon", 0);
  expect_near(run(n, {&x, &scale, &bias})[0], {1, 2, 2}, {-1, 3, -4, 2});
  Tensor wrong = f32({1}, {1});
  EXPECT_THROW(run(n, {&x, &wrong, &bias}), Error);
}

TEST(LayerNorm, LastAxisWithStatistics) {
  Tensor x = f32({2, 2}, {1, 3, 0, 4});
  Tensor w = f32({2}, {1, 2}), b = f32({2}, {0, 1});
  Node n = norm_node("LayerNormalization", 17, 3, 3);
  set_float(n, "epsilon", 0);
  std::vector<Tensor> out = run(n, {&x, &w, &b});
  expect_near(out[0], {2, 2}, {-1, 3, -1, 3});
  expect_near(out[1], {2, 1}, {2, 2});
  expect_near(out[2], {2, 1}, {1, 0.5});
}

TEST(LayerNorm, AxisZeroBroadcastsScaleAndSkipsOptionalOutputs) {
  Tensor x = f32({2, 2}, {1, 3, 0, 4});
  Tensor w = f32({2}, {1, 2});
  Node n = norm_node("LayerNormalization", 17, 2, 1);
  set_int(n, "axis", 0);
  set_float(n, "epsilon", 0);
  const double inv = 1 / std::sqrt(2.5);
  std::vector<Tensor> out = run(n, {&x, &w});
  ASSERT_EQ(out.size(), 1u);
  expect_near(out[0], {2, 2}, {-inv, 2 * inv, -2 * inv, 4 * inv});
  Node named = norm_node("LayerNormalization", 17, 2, 3);
  named.outputs[1] = "";
  out = run(named, {&x, &w});
  EXPECT_TRUE(out[1].empty());
  expect_near(out[2], {2, 1}, {1, 0.5});
}

TEST(LayerNorm, BadAttributes) {
  Tensor x = f32({2, 2}, {1, 3, 0, 4});
  Tensor w3 = f32({3}, {1, 1, 1});
  EXPECT_THROW(run(norm_node("LayerNormalization", 17, 2), {&x, &w3}), Error);
  Node n = norm_node("LayerNormalization", 17, 2);
  set_int(n, "axis", 2);
  Tensor w = f32({2}, {1, 1});
  EXPECT_THROW(run(n, {&x, &w}), Error);
  Node stash = norm_node("LayerNormalization", 17, 2);
  set_int(stash, "stash_type", 11);
  expect_unsupported(stash, {&x, &w});
}

TEST(LRN, ChannelWindow) {
  Tensor x = f32({1, 3, 1, 1}, {1, 2, 3});
  Node n = norm_node("LRN", 13, 1);
  set_int(n, "size", 2);
  set_float(n, "alpha", 2);
  set_float(n, "beta", 1);
  // Window [c, c+1]: sums 5, 13, 9; y = x / (1 + sum).
  expect_near(run(n, {&x})[0], {1, 3, 1, 1}, {1.0 / 6, 2.0 / 14, 3.0 / 10});
  Node no_size = norm_node("LRN", 13, 1);
  EXPECT_THROW(run(no_size, {&x}), Error);
}
