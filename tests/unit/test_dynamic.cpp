// Dynamic sub-nets (docs/dynamic.md): the metadata format, slicing, DynamicSession and the
// latency controller.
//
// The slicing oracle needs no second implementation: a sub-net that keeps the first k
// channels of a layer computes what the full model computes when the consumers' weights of
// channels k.. are zero, so each test compares the sliced graph with the full one, zeroed.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <atomic>
#include <mutex>
#include <random>
#include <set>
#include <thread>

#include "dynamic/latency_controller.h"
#include "dynamic/slice_subnet.h"
#include "dynamic/subnet_spec.h"
#include "grove/dynamic.h"
#include "onnx/import.h"
#include "onnx_builder.h"
#include "runtime/session.h"

namespace grove {
namespace {

using test::OnnxBuilder;

std::vector<float> random_values(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> d(-1, 1);
  std::vector<float> v(n);
  for (auto& x : v) x = d(rng);
  return v;
}

// x[1,2,6,6] -> conv0(8) -> BN -> Relu -> conv1(8, bias) -> Relu -> conv2(6, 1x1) -> + c ->
// GlobalAveragePool -> Flatten -> fc(3). Weights are named after their node.
struct Weights {
  std::vector<float> w0 = random_values(8 * 2 * 9, 1), w1 = random_values(8 * 8 * 9, 2), b1 = random_values(8, 3),
                     w2 = random_values(6 * 8, 4), c = random_values(6, 5), fc = random_values(3 * 6, 6),
                     fcb = random_values(3, 7), scale = random_values(8, 8), shift = random_values(8, 9),
                     mean = random_values(8, 10), var = std::vector<float>(8, 0.5f);
};

OnnxBuilder chain_model(const Weights& w, const std::string& metadata) {
  OnnxBuilder b;
  b.input("x", onnx::TensorProto::FLOAT, {1, 2, 6, 6}).output("y", onnx::TensorProto::FLOAT, {1, 3});
  b.initializer_f32("conv0.weight", {8, 2, 3, 3}, w.w0);
  b.initializer_f32("bn0.scale", {8}, w.scale);
  b.initializer_f32("bn0.bias", {8}, w.shift);
  b.initializer_f32("bn0.mean", {8}, w.mean);
  b.initializer_f32("bn0.var", {8}, w.var);
  b.initializer_f32("conv1.weight", {8, 8, 3, 3}, w.w1);
  b.initializer_f32("conv1.bias", {8}, w.b1);
  b.initializer_f32("conv2.weight", {6, 8, 1, 1}, w.w2);
  b.initializer_f32("c", {1, 6, 1, 1}, w.c);
  b.initializer_f32("fc.weight", {3, 6}, w.fc);
  b.initializer_f32("fc.bias", {3}, w.fcb);
  OnnxBuilder::attr_ints(b.node("Conv", {"x", "conv0.weight"}, {"a0"}, "conv0"), "pads", {1, 1, 1, 1});
  b.node("BatchNormalization", {"a0", "bn0.scale", "bn0.bias", "bn0.mean", "bn0.var"}, {"a1"}, "bn0");
  b.node("Relu", {"a1"}, {"a2"}, "relu0");
  OnnxBuilder::attr_ints(b.node("Conv", {"a2", "conv1.weight", "conv1.bias"}, {"a3"}, "conv1"), "pads", {1, 1, 1, 1});
  b.node("Relu", {"a3"}, {"a4"}, "relu1");
  b.node("Conv", {"a4", "conv2.weight"}, {"a5"}, "conv2");
  b.node("Add", {"a5", "c"}, {"a6"}, "add");
  b.node("GlobalAveragePool", {"a6"}, {"a7"}, "pool");
  b.node("Flatten", {"a7"}, {"a8"}, "flatten");
  OnnxBuilder::attr_int(b.node("Gemm", {"a8", "fc.weight", "fc.bias"}, {"y"}, "fc"), "transB", 1);
  if (!metadata.empty()) {
    auto* p = b.proto().add_metadata_props();
    p->set_key("grove.subnets");
    p->set_value(metadata);
  }
  return b;
}

// The full model with consumers' weights zeroed beyond the kept channels k1 (of conv1) and
// k2 (of conv2).
Weights zeroed(Weights w, int k1, int k2) {
  for (int o = 0; o < 6; ++o)
    for (int i = k1; i < 8; ++i) w.w2[o * 8 + i] = 0;
  for (int o = 0; o < 3; ++o)
    for (int i = k2; i < 6; ++i) w.fc[o * 6 + i] = 0;
  return w;
}

Tensor input_x() { return Tensor::from<float>({1, 2, 6, 6}, random_values(72, 42)); }

Tensor run(Graph g) { return model_from_graph(std::move(g)).run_reference({{"x", input_x()}}).at("y"); }

Graph import(const OnnxBuilder& b) { return load_onnx_bytes(b.bytes(), "test.onnx"); }

void expect_close(const Tensor& a, const Tensor& b) {
  ASSERT_EQ(a.shape(), b.shape());
  for (int64_t i = 0; i < a.numel(); ++i) EXPECT_NEAR(a.data<float>()[i], b.data<float>()[i], 1e-4) << i;
}

TEST(DynamicSpec, ParsesUniformAndPerLayerSubnets) {
  const auto spec = parse_dynamic_spec("exempt conv0 fc\nsubnet w50 ratio=0.5 accuracy=0.9;subnet nu conv1=3 conv2=5\n\n");
  ASSERT_EQ(spec.subnets.size(), 2u);
  EXPECT_TRUE(spec.exempt_given);
  EXPECT_EQ(spec.exempt, (std::vector<std::string>{"conv0", "fc"}));
  EXPECT_EQ(spec.subnets[0].ratio, 0.5);
  EXPECT_EQ(spec.subnets[0].accuracy, 0.9);
  EXPECT_EQ(spec.subnets[1].channels.at("conv2"), 5);
}

TEST(DynamicSpec, BadTextIsAnErrorNamingTheLine) {
  auto error_of = [](const std::string& text) {
    try {
      parse_dynamic_spec(text);
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  EXPECT_NE(error_of("subnet a ratio=0").find("outside (0, 1]"), std::string::npos);
  EXPECT_NE(error_of("subnet a ratio=1.5").find("line 1"), std::string::npos);
  EXPECT_NE(error_of("subnet a conv1=0").find("whole number >= 1"), std::string::npos);
  EXPECT_NE(error_of("subnet a conv1=2.5").find("whole number"), std::string::npos);
  EXPECT_NE(error_of("subnet a ratio=x").find("not a number"), std::string::npos);
  EXPECT_NE(error_of("subnet a ratio=0.5 conv1=2").find("not both"), std::string::npos);
  EXPECT_NE(error_of("subnet a ratio=0.5\nsubnet a ratio=0.25").find("line 2: sub-net 'a' is defined twice"),
            std::string::npos);
  EXPECT_NE(error_of("widen all").find("unknown statement 'widen'"), std::string::npos);
  EXPECT_NE(error_of("exempt fc").find("no `subnet` line"), std::string::npos);
  EXPECT_THROW(uniform_dynamic_spec({0.5, 0.5}), Error);
  EXPECT_THROW(uniform_dynamic_spec({-1}), Error);
}

TEST(SliceSubnet, UniformRatioEqualsTheFullModelWithDroppedChannelsZeroed) {
  const Weights w;
  const Graph full = import(chain_model(w, ""));
  DynamicSpec spec = uniform_dynamic_spec({0.5});
  spec.exempt = {"conv0", "fc"};
  spec.exempt_given = true;
  const SlicedSubnet s = slice_subnet(full, spec, spec.subnets[0]);
  // conv0 and fc are exempt; conv1 keeps 4 of 8, conv2 3 of 6.
  ASSERT_EQ(s.layers.size(), 4u);
  EXPECT_EQ(s.layers[1].kept, 4);
  EXPECT_EQ(s.layers[2].kept, 3);
  EXPECT_EQ(s.layers[3].kept, 3);  // fc: exempt, 3 of 3
  expect_close(run(s.graph), run(import(chain_model(zeroed(w, 4, 3), ""))));
  // And it is not simply the full model.
  EXPECT_GT(std::abs(run(s.graph).data<float>()[0] - run(full).data<float>()[0]), 1e-4);
}

TEST(SliceSubnet, PerLayerChannelsAndAPrivateBatchNorm) {
  Weights w;
  OnnxBuilder b = chain_model(w, "exempt conv0 fc\nsubnet nu conv1=2 conv2.weight=5\nsubnet whole ratio=1");
  const std::vector<float> own_mean = random_values(8, 99);
  b.initializer_f32("bn0.mean@nu", {8}, own_mean);
  const Graph full = import(b);
  const DynamicSpec spec = parse_dynamic_spec(full.metadata.at("grove.subnets"));
  const SlicedSubnet nu = slice_subnet(full, spec, spec.subnets[0]);
  Weights expect = zeroed(w, 2, 5);
  expect.mean = own_mean;
  expect_close(run(nu.graph), run(import(chain_model(expect, ""))));
  // The other sub-net keeps the graph's own statistics, and the variant is dropped from both.
  const SlicedSubnet whole = slice_subnet(full, spec, spec.subnets[1]);
  expect_close(run(whole.graph), run(import(chain_model(w, ""))));
  EXPECT_EQ(whole.graph.initializers.count("bn0.mean@nu"), 0u);
}

std::string slice_error(const std::string& metadata) {
  const Graph full = import(chain_model(Weights{}, metadata));
  const DynamicSpec spec = parse_dynamic_spec(metadata);
  try {
    slice_subnet(full, spec, spec.subnets[0]);
  } catch (const Error& e) {
    return e.what();
  }
  return "no error";
}

TEST(SliceSubnet, BadMetadataIsAClearError) {
  EXPECT_NE(slice_error("exempt conv0 fc\nsubnet a conv9=3").find("names unknown layer 'conv9' (layers: conv0, conv1, conv2, fc)"),
            std::string::npos);
  EXPECT_NE(slice_error("exempt fc\nsubnet a conv1=20").find("keeps 20 channels but the layer has 8"), std::string::npos);
  EXPECT_NE(slice_error("exempt conv0\nsubnet a ratio=0.5").find("output 'y' would lose channels: mark layer 'fc' exempt"),
            std::string::npos);
  EXPECT_NE(slice_error("exempt conv0 fc\nsubnet a fc=2").find("is exempt but the sub-net gives it a channel count"),
            std::string::npos);
}

// x -> conv0(4) -> conv1(4) -> concat(conv0 out, depthwise(conv1 out)) -> conv2(2, 1x1) -> y
OnnxBuilder concat_model(std::vector<float> w2) {
  OnnxBuilder b;
  b.input("x", onnx::TensorProto::FLOAT, {1, 2, 5, 5}).output("y", onnx::TensorProto::FLOAT, {1, 2, 5, 5});
  b.initializer_f32("w0", {4, 2, 1, 1}, random_values(8, 11));
  b.initializer_f32("w1", {4, 4, 1, 1}, random_values(16, 12));
  b.initializer_f32("wd", {4, 1, 3, 3}, random_values(36, 13));
  b.initializer_f32("bd", {4}, random_values(4, 14));
  b.initializer_f32("w2", {2, 8, 1, 1}, std::move(w2));
  b.node("Conv", {"x", "w0"}, {"a"}, "conv0");
  b.node("Conv", {"a", "w1"}, {"b"}, "conv1");
  auto& dw = b.node("Conv", {"b", "wd", "bd"}, {"c"}, "dw");
  OnnxBuilder::attr_int(dw, "group", 4);
  OnnxBuilder::attr_ints(dw, "pads", {1, 1, 1, 1});
  OnnxBuilder::attr_int(b.node("Concat", {"a", "c"}, {"d"}, "concat"), "axis", 1);
  b.node("Conv", {"d", "w2"}, {"y"}, "conv2");
  return b;
}

TEST(SliceSubnet, ConcatAndDepthwiseFollowTheKeptChannels) {
  const std::vector<float> w2 = random_values(16, 15);
  const Graph full = import(concat_model(w2));
  const DynamicSpec spec = parse_dynamic_spec("exempt conv0 conv2\nsubnet a conv1=1");
  const SlicedSubnet s = slice_subnet(full, spec, spec.subnets[0]);
  // Concat channels 0..3 come from conv0 (whole), 4..7 from the depthwise conv of conv1's
  // output, of which only channel 4 survives.
  std::vector<float> zero = w2;
  for (int o = 0; o < 2; ++o)
    for (int i = 5; i < 8; ++i) zero[static_cast<size_t>(o * 8 + i)] = 0;
  const TensorMap in{{"x", Tensor::from<float>({1, 2, 5, 5}, random_values(50, 16))}};
  expect_close(model_from_graph(s.graph).run_reference(in).at("y"), model_from_graph(import(concat_model(zero))).run_reference(in).at("y"));
}

TEST(SliceSubnet, AResidualOfDifferentlySlicedBranchesIsAnError) {
  OnnxBuilder b;
  b.input("x", onnx::TensorProto::FLOAT, {1, 2, 3, 3}).output("y", onnx::TensorProto::FLOAT, {1, 2, 3, 3});
  for (const char* w : {"w0", "w1", "w2"}) b.initializer_f32(w, {4, 2, 1, 1}, random_values(8, 1));
  b.initializer_f32("w3", {2, 4, 1, 1}, random_values(8, 2));
  b.node("Conv", {"x", "w0"}, {"a"}, "conv0");
  b.node("Conv", {"x", "w1"}, {"b"}, "left");
  b.node("Conv", {"x", "w2"}, {"c"}, "right");
  b.node("Add", {"b", "c"}, {"d"}, "add");
  b.node("Conv", {"d", "w3"}, {"y"}, "conv3");
  const Graph full = import(b);
  const DynamicSpec spec = parse_dynamic_spec("exempt conv0 conv3\nsubnet a left=1 right=3");
  try {
    slice_subnet(full, spec, spec.subnets[0]);
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("node 'add' (Add): adds tensors sliced differently"), std::string::npos)
        << e.what();
  }
}

// Sliced channels that reach an op by an input other than its first (here a conv's output as a
// BatchNormalization's bias; the fuzzer's model) are refused naming the node: the slicer read
// the first input's slice, which it does not have.
TEST(SliceSubnet, SlicedChannelsAsAStatisticAreAnError) {
  OnnxBuilder b;
  b.input("x", onnx::TensorProto::FLOAT, {1, 2, 3, 3}).output("y", onnx::TensorProto::FLOAT, {1, 2, 3, 3});
  b.initializer_f32("w0", {4, 2, 1, 1}, random_values(8, 1));
  b.initializer_f32("a", {1, 4, 3, 3}, random_values(36, 2));
  for (const char* w : {"s", "m", "v"}) b.initializer_f32(w, {4}, std::vector<float>(4, 0.5f));
  b.initializer_f32("w1", {2, 4, 1, 1}, random_values(8, 3));
  b.node("Conv", {"x", "w0"}, {"c"}, "conv0");
  b.node("BatchNormalization", {"a", "s", "c", "m", "v"}, {"n"}, "bn");
  b.node("Conv", {"n", "w1"}, {"y"}, "conv1");
  const Graph full = import(b);
  const DynamicSpec spec = parse_dynamic_spec("exempt conv1\nsubnet a ratio=0.5");
  try {
    slice_subnet(full, spec, spec.subnets[0]);
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("node 'bn' (BatchNormalization): cannot take sliced channels"), std::string::npos)
        << e.what();
  }
}

// torch 1.13 shares equal initializers through Identity nodes: two convs whose biases are one
// initializer, each read through an Identity. The slicer takes them as the constants they are.
TEST(SliceSubnet, WeightsSharedThroughIdentityAreConstants) {
  OnnxBuilder b;
  b.input("x", onnx::TensorProto::FLOAT, {1, 2, 6, 6}).output("y", onnx::TensorProto::FLOAT, {1, 2, 6, 6});
  b.initializer_f32("w0", {4, 2, 1, 1}, random_values(8, 1));
  b.initializer_f32("w1", {4, 4, 1, 1}, random_values(16, 2));
  b.initializer_f32("w2", {2, 4, 1, 1}, random_values(8, 3));
  b.initializer_f32("bias", {4}, random_values(4, 4));
  b.node("Identity", {"bias"}, {"bias0"}, "share0");
  b.node("Identity", {"bias"}, {"bias1"}, "share1");
  b.node("Conv", {"x", "w0", "bias0"}, {"a"}, "conv0");
  b.node("Conv", {"a", "w1", "bias1"}, {"c"}, "conv1");
  b.node("Conv", {"c", "w2"}, {"y"}, "conv2");
  const Graph full = import(b);
  const DynamicSpec spec = parse_dynamic_spec("exempt conv2\nsubnet a ratio=0.5");
  const SlicedSubnet s = slice_subnet(full, spec, spec.subnets[0]);
  ASSERT_EQ(s.layers.size(), 3u);
  EXPECT_EQ(s.layers[0].kept, 2);
  EXPECT_EQ(s.layers[1].kept, 2);
  EXPECT_EQ(run(s.graph).shape(), (Shape{1, 2, 6, 6}));
}

// x -> conv0(4) -> Relu -> conv1(4) -> + (identity shortcut) -> conv2(2): a residual block.
OnnxBuilder residual_model(std::vector<float> w1, std::vector<float> w2) {
  OnnxBuilder b;
  b.input("x", onnx::TensorProto::FLOAT, {1, 3, 4, 4}).output("y", onnx::TensorProto::FLOAT, {1, 2, 4, 4});
  b.initializer_f32("w0", {4, 3, 1, 1}, random_values(12, 21));
  b.initializer_f32("w1", {4, 4, 3, 3}, std::move(w1));
  b.initializer_f32("w2", {2, 4, 1, 1}, std::move(w2));
  b.node("Conv", {"x", "w0"}, {"a"}, "conv0");
  b.node("Relu", {"a"}, {"b"}, "relu");
  OnnxBuilder::attr_ints(b.node("Conv", {"b", "w1"}, {"c"}, "conv1"), "pads", {1, 1, 1, 1});
  b.node("Add", {"c", "b"}, {"d"}, "add");
  b.node("Conv", {"d", "w2"}, {"y"}, "conv2");
  return b;
}

TEST(SliceSubnet, ByDefaultOnlyTheLastLayerIsExemptSoIdentityShortcutsStayAligned) {
  const std::vector<float> w1 = random_values(144, 22), w2 = random_values(8, 23);
  const Graph full = import(residual_model(w1, w2));
  const DynamicSpec spec = uniform_dynamic_spec({0.5});
  const SlicedSubnet s = slice_subnet(full, spec, spec.subnets[0]);
  std::vector<float> z1 = w1, z2 = w2;
  for (int o = 0; o < 4; ++o)
    for (int i = 2; i < 4; ++i)
      for (int k = 0; k < 9; ++k) z1[static_cast<size_t>((o * 4 + i) * 9 + k)] = 0;
  for (int o = 0; o < 2; ++o)
    for (int i = 2; i < 4; ++i) z2[static_cast<size_t>(o * 4 + i)] = 0;
  const TensorMap in{{"x", Tensor::from<float>({1, 3, 4, 4}, random_values(48, 24))}};
  expect_close(model_from_graph(s.graph).run_reference(in).at("y"), model_from_graph(import(residual_model(z1, z2))).run_reference(in).at("y"));
}

std::string write_model(const OnnxBuilder& b, const std::string& name) {
  const auto path = std::filesystem::temp_directory_path() / name;
  std::ofstream(path, std::ios::binary) << b.bytes();
  return path.string();
}

TEST(DynamicSession, PlansEverySubnetAtLoadAndSwitchesWithoutReplanning) {
  const Weights w;
  const std::string path = write_model(
      chain_model(w, "exempt conv0 fc\nsubnet big ratio=1 accuracy=0.9\nsubnet small ratio=0.25 accuracy=0.5\n"
                     "subnet mid ratio=0.5 accuracy=0.8"),
      "grove_dynamic_test.onnx");
  Engine engine({.threads = 2});
  DynamicSession d(engine, path);
  ASSERT_EQ(d.subnets().size(), 3u);
  EXPECT_EQ(d.subnets()[0].name, "small");  // ordered by FLOPs
  EXPECT_EQ(d.subnets()[2].name, "big");
  EXPECT_LT(d.subnets()[0].flops, d.subnets()[1].flops);
  EXPECT_LT(d.subnets()[1].flops, d.subnets()[2].flops);
  EXPECT_EQ(d.find("mid"), 1);
  EXPECT_EQ(d.find("0.25"), 0);
  EXPECT_EQ(d.find("nope"), -1);
  const ShapeMap shapes{{"x", {1, 2, 6, 6}}};
  std::vector<std::shared_ptr<const Plan>> plans;
  for (int i = 0; i < 3; ++i) plans.push_back(plan_for(d.session(i), shapes));
  const TensorMap in{{"x", input_x()}};
  for (int round = 0; round < 3; ++round)
    for (int i : {2, 0, 1}) {
      const Tensor y = d.run(in, i).at("y");
      const int k1 = std::vector<int>{2, 4, 8}[static_cast<size_t>(i)], k2 = std::vector<int>{2, 3, 6}[static_cast<size_t>(i)];
      expect_close(y, run(import(chain_model(zeroed(w, k1, k2), ""))));
    }
  for (int i = 0; i < 3; ++i) EXPECT_EQ(plan_for(d.session(i), shapes), plans[static_cast<size_t>(i)]);
  EXPECT_THROW(d.run(in, 3), Error);
  EXPECT_THROW(d.run_within(in, 0), Error);
  std::filesystem::remove(path);
}

TEST(DynamicSession, ConcurrentRunsUnderTargetsGetTheirSubnetsOutputs) {
  const std::string path = write_model(
      chain_model(Weights{}, "exempt conv0 fc\nsubnet a ratio=0.25\nsubnet b ratio=0.5\nsubnet c ratio=1"),
      "grove_dynamic_concurrent.onnx");
  Engine engine({.threads = 2});
  DynamicSession d(engine, path);
  const TensorMap in{{"x", input_x()}};
  std::vector<Tensor> expected;
  for (int i = 0; i < 3; ++i) expected.push_back(d.run(in, i).at("y"));
  std::vector<std::thread> threads;
  std::atomic<int> wrong{0};
  std::set<int> seen;
  std::mutex seen_mutex;
  for (int t = 0; t < 4; ++t)
    threads.emplace_back([&, t] {
      for (int k = 0; k < 25; ++k) {
        SubnetChoice c;
        const Tensor y = d.run_within(in, t % 2 ? 1e6 : 1e-6, &c).at("y");
        const Tensor& want = expected[static_cast<size_t>(c.subnet)];
        for (int64_t i = 0; i < y.numel(); ++i)
          if (std::abs(y.data<float>()[i] - want.data<float>()[i]) > 1e-5f) ++wrong;
        std::lock_guard<std::mutex> lock(seen_mutex);
        seen.insert(c.subnet);
      }
    });
  for (auto& th : threads) th.join();
  EXPECT_EQ(wrong.load(), 0);
  EXPECT_EQ(seen, (std::set<int>{0, 2}));  // the impossible target: the cheapest; the loose one: the widest
  std::filesystem::remove(path);
}

TEST(DynamicSession, APlainModelSlicesAtRatiosAndBadMetadataFailsAtLoad) {
  const std::string plain = write_model(chain_model(Weights{}, ""), "grove_dynamic_plain.onnx");
  Engine engine({.threads = 1});
  EXPECT_THROW(DynamicSession(engine, plain), Error);  // no metadata, no ratios
  DynamicSession d(engine, plain, {}, {1.0, 0.5});
  EXPECT_EQ(d.subnets()[0].name, "0.5");
  const std::string bad = write_model(chain_model(Weights{}, "subnet a conv1=99"), "grove_dynamic_bad.onnx");
  try {
    DynamicSession(engine, bad);
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("grove_dynamic_bad.onnx: sub-net 'a': node 'conv1' (Conv): keeps 99 channels"),
              std::string::npos)
        << e.what();
  }
  std::filesystem::remove(plain);
  std::filesystem::remove(bad);
}

TEST(LatencyController, PicksTheWidestSubnetPredictedToMeetTheTarget) {
  LatencyController c({100, 400, 1600});
  double predicted = -1;
  EXPECT_EQ(c.choose(10, 0, 0.0, &predicted), 0);  // nothing known: the cheapest, to learn
  EXPECT_EQ(predicted, 0);
  c.observe(0, 0, 1.0, 0.0);
  EXPECT_DOUBLE_EQ(c.predict(1, 0, 0.0), 4.0);  // scaled by FLOPs from sub-net 0
  EXPECT_EQ(c.choose(5, 0, 0.0), 1);
  c.observe(2, 0, 8.0, 0.0);
  EXPECT_EQ(c.choose(10, 0, 0.0, &predicted), 2);
  EXPECT_DOUBLE_EQ(predicted, 8.0);
  // Under one co-running job the full net waited 8 ms longer: that excess is charged to
  // every sub-net without runs of its own at that load, and the full net's own runs
  // predict it once there are enough of them.
  for (int i = 0; i < 40; ++i) c.observe(2, 1, 16.0, 0.1);
  EXPECT_DOUBLE_EQ(c.predict(2, 1, 0.1), 16.0);
  EXPECT_DOUBLE_EQ(c.predict(0, 1, 0.1), 9.0);
  EXPECT_EQ(c.choose(10, 1, 0.1, &predicted), 0);
  EXPECT_EQ(c.choose(12, 1, 0.1), 0);  // predicted 12: under load it aims 10% lower
  EXPECT_EQ(c.choose(13.5, 1, 0.1), 1);
  EXPECT_EQ(c.choose(10, 0, 0.1), 2);  // the load is gone: back to the full net
  // An unseen heavier load: the heaviest lighter one seen plus one more run per extra job.
  EXPECT_DOUBLE_EQ(c.predict(0, 2, 0.1), 1.0 + 8.0 + 1.0);
  EXPECT_EQ(c.choose(0.5, 3, 0.1), 0);  // nothing meets it: the cheapest
  // Samples expire: seconds later the load's runs no longer count, and sub-net 0 at load 1
  // is back to its base plus nothing seen: one run per other job.
  EXPECT_DOUBLE_EQ(c.predict(0, 1, 60.0), 2.0);
  EXPECT_DOUBLE_EQ(LatencyController({100}).predict(0, 2, 0.0), 0.0);  // nothing observed
}

TEST(LatencyController, ALoadSeenAMomentAgoStillCounts) {
  LatencyController c({100});
  EXPECT_EQ(c.load(0, 0.0), 0);
  EXPECT_EQ(c.load(2, 1.0), 2);
  EXPECT_EQ(c.load(0, 1.05), 2);  // a gap between the co-runner's runs
  EXPECT_EQ(c.load(1, 1.08), 2);
  EXPECT_EQ(c.load(0, 1.5), 0);  // gone
  EXPECT_EQ(c.load(1, 1.6), 1);
}

}  // namespace
}  // namespace grove
