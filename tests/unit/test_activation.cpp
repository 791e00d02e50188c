// Activations against hand-computed values.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "op_test_util.h"

using namespace grove;
using namespace grove::optest;

namespace {

Tensor run_op(const std::string& op, const Tensor& x) { return run(NodeBuilder(op, 13, 1), x); }

// -3, -1, 0, 1, 3
Tensor sample() { return f32({5}, {-3, -1, 0, 1, 3}); }

double sigmoid(double x) { return 1 / (1 + std::exp(-x)); }
double softplus(double x) { return std::log(1 + std::exp(x)); }

}  // namespace

TEST(Activation, ReluFamily) {
  Tensor x = sample();
  expect_close(run_op("Relu", x), DType::f32, {5}, {0, 0, 0, 1, 3});
  Tensor xi = Tensor::from<int32_t>({3}, std::vector<int32_t>{-5, 0, 5});
  expect_close(run_op("Relu", xi), DType::i32, {3}, {0, 0, 5});
  expect_close(run_op("LeakyRelu", x), DType::f32, {5}, {-0.03, -0.01, 0, 1, 3});
  Node leaky = NodeBuilder("LeakyRelu", 13, 1);
  set_float(leaky, "alpha", 0.5f);
  expect_close(run(leaky, {&x}), DType::f32, {5}, {-1.5, -0.5, 0, 1, 3});
  expect_close(run_op("ThresholdedRelu", x), DType::f32, {5}, {0, 0, 0, 0, 3});  // strictly above alpha = 1
  expect_close(run_op("Elu", x), DType::f32, {5}, {std::exp(-3.0) - 1, std::exp(-1.0) - 1, 0, 1, 3});
  const double alpha = 1.6732632423543772, gamma = 1.0507009873554805;
  expect_close(run_op("Selu", x), DType::f32, {5},
                {gamma * alpha * (std::exp(-3.0) - 1), gamma * alpha * (std::exp(-1.0) - 1), 0, gamma, 3 * gamma});
  Node celu = NodeBuilder("Celu", 13, 1);
  set_float(celu, "alpha", 2.0f);
  expect_close(run(celu, {&x}), DType::f32, {5}, {2 * (std::exp(-1.5) - 1), 2 * (std::exp(-0.5) - 1), 0, 1, 3});
  set_float(celu, "alpha", 0.0f);
  EXPECT_THROW(run(celu, {&x}), Error);
}

TEST(Activation, SigmoidFamily) {
  Tensor x = sample();
  expect_close(run_op("Sigmoid", x), DType::f32, {5}, {sigmoid(-3), sigmoid(-1), 0.5, sigmoid(1), sigmoid(3)});
  Tensor extreme = f32({2}, {-1000, 1000});
  expect_close(run_op("Sigmoid", extreme), DType::f32, {2}, {0, 1});
  expect_close(run_op("Tanh", x), DType::f32, {5}, {std::tanh(-3.0), std::tanh(-1.0), 0, std::tanh(1.0), std::tanh(3.0)});
  expect_close(run_op("HardSigmoid", x), DType::f32, {5}, {0, 0.3, 0.5, 0.7, 1});
  expect_close(run_op("HardSwish", x), DType::f32, {5}, {0, -1.0 / 3, 0, 2.0 / 3, 3});
  expect_close(run_op("Softplus", x), DType::f32, {5}, {softplus(-3), softplus(-1), std::log(2.0), softplus(1), softplus(3)});
  expect_close(run_op("Softplus", extreme), DType::f32, {2}, {0, 1000});
  expect_close(run_op("Softsign", x), DType::f32, {5}, {-0.75, -0.5, 0, 0.5, 0.75});
  expect_close(run_op("Mish", x), DType::f32, {5},
                {-3 * std::tanh(softplus(-3)), -std::tanh(softplus(-1)), 0, std::tanh(softplus(1)), 3 * std::tanh(softplus(3))});
  Tensor d = Tensor::from<double>({1}, std::vector<double>{2});
  expect_close(run_op("Sigmoid", d), DType::f64, {1}, {sigmoid(2)});
}

TEST(Activation, PReluSlopeBroadcastsOneWay) {
  Tensor x = f32({2, 3}, {-1, -2, 3, -4, 5, -6});
  Tensor slope = f32({3}, {0.1f, 0.2f, 0.3f});
  expect_close(run(NodeBuilder("PRelu", 13, 2), {&x, &slope}), DType::f32, {2, 3}, {-0.1, -0.4, 3, -0.4, 5, -1.8});
  Tensor column = f32({2, 1}, {1, 2});
  expect_close(run(NodeBuilder("PRelu", 13, 2), {&x, &column}), DType::f32, {2, 3}, {-1, -2, 3, -8, 5, -12});
  Tensor wider = f32({2, 2, 3}, std::vector<float>(12, 1));
  EXPECT_THROW(run(NodeBuilder("PRelu", 13, 2), {&x, &wider}), Error);  // would grow X
  Tensor bad = f32({2}, {1, 2});
  EXPECT_THROW(run(NodeBuilder("PRelu", 13, 2), {&x, &bad}), Error);
}

TEST(Activation, ClipInputsFromOpset11) {
  Tensor x = sample();
  Tensor lo = Tensor::scalar<float>(-1.5f);
  Tensor hi = Tensor::scalar<float>(2);
  expect_close(run(NodeBuilder("Clip", 13, 3), {&x, &lo, &hi}), DType::f32, {5}, {-1.5, -1, 0, 1, 2});
  Node only_max = NodeBuilder("Clip", 13, 3);
  only_max.inputs[1] = "";
  expect_close(run(only_max, {&x, nullptr, &hi}), DType::f32, {5}, {-3, -1, 0, 1, 2});
  expect_close(run(NodeBuilder("Clip", 13, 1), {&x}), DType::f32, {5}, {-3, -1, 0, 1, 3});
  // min > max: everything becomes max.
  Tensor lo_big = Tensor::scalar<float>(5);
  expect_close(run(NodeBuilder("Clip", 13, 3), {&x, &lo_big, &hi}), DType::f32, {5}, {2, 2, 2, 2, 2});
  Tensor xi = Tensor::from<int8_t>({3}, std::vector<int8_t>{-100, 0, 100});
  Tensor lo_i = Tensor::scalar<int8_t>(-10);
  expect_close(run(NodeBuilder("Clip", 13, 2), {&xi, &lo_i}), DType::i8, {3}, {-10, 0, 100});
  EXPECT_THROW(run(NodeBuilder("Clip", 13, 2), {&x, &lo_i}), Error);  // dtype mismatch
  Tensor two = f32({2}, {0, 1});
  EXPECT_THROW(run(NodeBuilder("Clip", 13, 2), {&x, &two}), Error);  // not a scalar
}

TEST(Activation, ClipAttributesBeforeOpset11) {
  Tensor x = sample();
  Node n = NodeBuilder("Clip", 6, 1);
  set_float(n, "min", -2);
  expect_close(run(n, {&x}), DType::f32, {5}, {-2, -1, 0, 1, 3});
  set_float(n, "max", 0.5f);
  expect_close(run(n, {&x}), DType::f32, {5}, {-2, -1, 0, 0.5, 0.5});
  Tensor lo = Tensor::scalar<float>(0);
  EXPECT_THROW(run(NodeBuilder("Clip", 6, 2), {&x, &lo}), Error);  // no bound inputs before 11
}
