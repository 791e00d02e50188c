// Dynamic feature-map pruning (Antidote, docs/dynamic.md): the decision op's choice, the
// pruned conv against an independent oracle (the Conv with the pruned channels' weights
// zeroed and the pruned positions of x zeroed), its tile rule against its reference, and the
// plan rewrite from a model's metadata.
#include <gtest/gtest.h>

#include <algorithm>
#include <functional>
#include <map>

#include "grove/session.h"
#include "kernels/conv_rows.h"
#include "onnx/import.h"
#include "onnx_builder.h"
#include "ops/conv/channels_last.h"
#include "ops/pruning/feature_pruning.h"
#include "ops/op.h"
#include "plan/feature_pruning.h"
#include "runtime/model.h"
#include "runtime/session.h"
#include "tiling_test_util.h"

namespace grove {
namespace {

using optest::NodeBuilder;
using tiletest::random_f32;

std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  return "no error";
}

TEST(AttentionKeep, KeepsTheHighestMeansAndTiesGoToTheLowerIndex) {
  // Channel means 1, 1, 0; position means 4/3, 1/3, 1/3, 2/3.
  const Tensor x = optest::f32({1, 3, 2, 2}, {1, 1, 1, 1, 3, 0, 0, 1, 0, 0, 0, 0});
  std::vector<int64_t> keep(4);
  AttentionKeepScratch scratch;
  attention_keep(x.data<float>(), 3, 2, 2, 2, 2, keep.data(), scratch);
  EXPECT_EQ(keep, (std::vector<int64_t>{0, 1, 0, 3}));
  keep.assign(4, -1);
  attention_keep(x.data<float>(), 3, 2, 2, 1, 3, keep.data(), scratch);
  EXPECT_EQ(keep, (std::vector<int64_t>{0, 0, 1, 3}));  // positions 1 and 2 tie: 1 is kept
  // Every channel or every position kept: all of them, ascending (their sums are skipped).
  keep.assign(5, -1);
  attention_keep(x.data<float>(), 3, 2, 2, 3, 2, keep.data(), scratch);
  EXPECT_EQ(keep, (std::vector<int64_t>{0, 1, 2, 0, 3}));
  keep.assign(6, -1);
  attention_keep(x.data<float>(), 3, 2, 2, 2, 4, keep.data(), scratch);
  EXPECT_EQ(keep, (std::vector<int64_t>{0, 1, 0, 1, 2, 3}));
  const Tensor x_nhwc = nchw_to_nhwc(x);
  keep.assign(5, -1);
  attention_keep_nhwc(x_nhwc.data<float>(), 3, 2, 2, 3, 2, keep.data(), scratch);
  EXPECT_EQ(keep, (std::vector<int64_t>{0, 1, 2, 0, 3}));
  keep.assign(6, -1);
  attention_keep_nhwc(x_nhwc.data<float>(), 3, 2, 2, 2, 4, keep.data(), scratch);
  EXPECT_EQ(keep, (std::vector<int64_t>{0, 1, 0, 1, 2, 3}));
}

// Blocks of 2 x 2 on a 3 x 3 plane: blocks 0 (the top left 2 x 2), 1 (the right column's top
// two), 2 (the bottom row's left two) and 3 (the corner), each scored by its positions' mean.
TEST(AttentionKeep, KeepsTheHighestBlocksAndTheirPositions) {
  const Tensor x = optest::f32({1, 1, 3, 3}, {1, 0, 5, 1, 0, 5, 0, 0, 2});  // block means 0.5, 5, 0, 2
  std::vector<int64_t> keep(3, -1);
  AttentionKeepScratch scratch;
  attention_keep(x.data<float>(), 1, 3, 3, 1, 2, keep.data(), scratch, 2);
  EXPECT_EQ(keep, (std::vector<int64_t>{0, 1, 3}));
  keep.assign(3, -1);
  attention_keep_nhwc(x.data<float>(), 1, 3, 3, 1, 2, keep.data(), scratch, 2);  // one channel: the same bytes
  EXPECT_EQ(keep, (std::vector<int64_t>{0, 1, 3}));
  NodeBuilder b("ApplyKeep", 13, 2);
  b.i(kAttrKeepChannels, 1).i(kAttrKeepPositions, 2).i(kAttrKeepBlock, 2);
  KeepFlags flags;
  keep_flags(b.node, keep.data(), 1, 2, 1, 3, 3, flags);
  EXPECT_EQ(flags.kept_position, (std::vector<unsigned char>{0, 0, 1, 0, 0, 1, 0, 0, 1}));
  keep[2] = 4;  // past the 4 blocks
  EXPECT_THROW(keep_flags(b.node, keep.data(), 1, 2, 1, 3, 3, flags), Error);
}

TEST(AttentionKeep, TilesOfImagesEqualTheReference) {
  NodeBuilder b("AttentionKeep", 13, 1);
  b.i(kAttrKeepChannels, 5).i(kAttrKeepPositions, 11);
  b.node.domain = kGroveDomain;
  const auto stats = tiletest::check_tiling(b.node, {random_f32({4, 7, 3, 5}, 11)}, 0);
  EXPECT_GT(stats.tiles, 4u);
}

Node pruned_conv(int64_t channels, int64_t positions, int64_t stride, bool residual) {
  NodeBuilder b("PrunedConv", 13, 5);
  b.ints("pads", {1, 1, 1, 1}).ints("strides", {stride, stride}).i(kAttrKeepChannels, channels).i(kAttrKeepPositions, positions);
  b.epilogue(residual ? "Add+Relu" : "Relu", FusedActivation::relu);
  b.node.domain = kGroveDomain;
  if (!residual) b.node.inputs[3] = "";
  return b.node;
}

// keep rows of x [N, C, H, W] as AttentionKeep computes them.
Tensor keep_of(const Tensor& x, int64_t channels, int64_t positions) {
  const int64_t plane = x.dim(2) * x.dim(3);
  Tensor keep(DType::i64, {x.dim(0), channels + positions});
  AttentionKeepScratch scratch;
  for (int64_t n = 0; n < x.dim(0); ++n)
    attention_keep(x.data<float>() + n * x.dim(1) * plane, x.dim(1), x.dim(2), x.dim(3), channels, positions,
                   keep.data<int64_t>() + n * (channels + positions), scratch);
  return keep;
}

TEST(PrunedConv, EqualsTheConvOfTheMaskedMapAtTheKeptCentres) {
  for (int64_t stride : {1, 2}) {
    const Tensor x = random_f32({2, 6, 5, 7}, 1, -1, 1), w = random_f32({4, 6, 3, 3}, 2), b = random_f32({4}, 3);
    const Tensor keep = keep_of(x, 3, 20);
    const Node node = pruned_conv(3, 20, stride, false);
    const Tensor got = evaluate_node(node, std::vector<const Tensor*>{&x, &w, &b, nullptr, &keep}).at(0);
    // The oracle zeroes x where keep does not name the channel and position, runs Conv, and
    // zeroes the outputs whose window centre (3x3, pad 1: row o * stride, column likewise)
    // is a pruned position.
    Tensor masked = x.clone();
    for (int64_t n = 0; n < 2; ++n)
      for (int64_t c = 0; c < 6; ++c)
        for (int64_t p = 0; p < 35; ++p) {
          const int64_t* k = keep.data<int64_t>() + n * 23;
          const bool kept = std::count(k, k + 3, c) && std::count(k + 3, k + 23, p);
          if (!kept) masked.data<float>()[(n * 6 + c) * 35 + p] = 0;
        }
    Tensor want = evaluate_node(pruned_conv_twin(node), std::vector<const Tensor*>{&masked, &w, &b}).at(0);
    ASSERT_EQ(got.shape(), want.shape());
    const int64_t oh = want.dim(2), ow = want.dim(3);
    int skipped = 0;
    for (int64_t n = 0; n < 2; ++n)
      for (int64_t i = 0; i < oh; ++i)
        for (int64_t j = 0; j < ow; ++j) {
          const int64_t* k = keep.data<int64_t>() + n * 23;
          if (std::count(k + 3, k + 23, i * stride * 7 + j * stride)) continue;
          ++skipped;
          for (int64_t o = 0; o < 4; ++o) want.data<float>()[((n * 4 + o) * oh + i) * ow + j] = 0;
        }
    EXPECT_GT(skipped, 0) << "no output skipped: the test cannot tell";
    const Tensor unpruned = evaluate_node(pruned_conv_twin(node), std::vector<const Tensor*>{&x, &w, &b}).at(0);
    int differing = 0;
    for (int64_t i = 0; i < got.numel(); ++i) {
      EXPECT_NEAR(got.data<float>()[i], want.data<float>()[i], 1e-5) << "stride " << stride << ", " << i;
      differing += std::fabs(got.data<float>()[i] - unpruned.data<float>()[i]) > 1e-3;
    }
    EXPECT_GT(differing, 0) << "pruning changed nothing: the test cannot tell";
  }
}

TEST(PrunedConv, TilesEqualTheReference) {
  for (int64_t stride : {1, 2})
    for (bool residual : {false, true}) {
      const int64_t images = residual ? 3 : 1;  // rows are cut for one image, images for several
      const Tensor x = random_f32({images, 6, 9, 7}, 4, -1, 1), w = random_f32({5, 6, 3, 3}, 5), b = random_f32({5}, 6);
      const Tensor keep = keep_of(x, 4, 40);
      const Shape y = stride == 1 ? Shape{images, 5, 9, 7} : Shape{images, 5, 5, 4};
      const Tensor r = residual ? random_f32(y, 7) : Tensor();
      const auto stats = tiletest::check_tiling(pruned_conv(4, 40, stride, residual), {x, w, b, r, keep}, 1e-5);
      EXPECT_GE(stats.tiles, 4u);
    }
  // Few pixels and many output channels: the transposed form (output channels in the panels).
  // Few kept channels of many are gathered; most kept run every channel on the zeroed map.
  for (bool residual : {false, true})
    for (int64_t kept : {6, 32}) {
      const Tensor x = random_f32({2, 40, 4, 3}, 12, -1, 1), w = random_f32({32, 40, 3, 3}, 13), b = random_f32({32}, 14);
      const Tensor r = residual ? random_f32({2, 32, 4, 3}, 15) : Tensor();
      tiletest::check_tiling(pruned_conv(kept, 9, 1, residual), {x, w, b, r, keep_of(x, kept, 9)}, 1e-4);
    }
  // Enough kept channels that the weights are gathered in several blocks of rows.
  const Tensor x = random_f32({1, 400, 4, 3}, 8, -1, 1), w = random_f32({40, 400, 3, 3}, 9), b = random_f32({40}, 10);
  tiletest::check_tiling(pruned_conv(350, 10, 1, false), {x, w, b, Tensor(), keep_of(x, 350, 10)}, 1e-4);
}

// x[N,2,S,S] -> conv0(C) -> BN -> Relu (a2) -> conv1(6) -> Relu (a4) -> GlobalAveragePool -> Flatten -> fc(3)
// (S = 6, C = 8 unless given; from 16 channels a2 is channels-last)
test::OnnxBuilder chain(const std::string& metadata, int64_t batch = 2, int64_t channels = 8, int64_t side = 6) {
  test::OnnxBuilder b;
  b.input("x", onnx::TensorProto::FLOAT, {batch, 2, side, side}).output("y", onnx::TensorProto::FLOAT, {batch, 3});
  auto values = [](int64_t n, uint32_t seed) {
    const Tensor t = random_f32({n}, seed);
    return std::vector<float>(t.data<float>(), t.data<float>() + n);
  };
  b.initializer_f32("w0", {channels, 2, 3, 3}, values(channels * 18, 1));
  b.initializer_f32("scale", {channels}, values(channels, 2));
  b.initializer_f32("shift", {channels}, values(channels, 3));
  b.initializer_f32("mean", {channels}, values(channels, 4));
  b.initializer_f32("var", {channels}, std::vector<float>(size_t(channels), 0.5f));
  b.initializer_f32("w1", {6, channels, 3, 3}, values(6 * channels * 9, 5));
  b.initializer_f32("fc", {3, 6}, values(18, 6));
  test::OnnxBuilder::attr_ints(b.node("Conv", {"x", "w0"}, {"a0"}, "conv0"), "pads", {1, 1, 1, 1});
  b.node("BatchNormalization", {"a0", "scale", "shift", "mean", "var"}, {"a1"}, "bn0");
  b.node("Relu", {"a1"}, {"a2"}, "relu0");
  test::OnnxBuilder::attr_ints(b.node("Conv", {"a2", "w1"}, {"a3"}, "conv1"), "pads", {1, 1, 1, 1});
  b.node("Relu", {"a3"}, {"a4"}, "relu1");
  b.node("GlobalAveragePool", {"a4"}, {"a5"}, "pool");
  b.node("Flatten", {"a5"}, {"a6"}, "flatten");
  test::OnnxBuilder::attr_int(b.node("Gemm", {"a6", "fc"}, {"y"}, "fc"), "transB", 1);
  if (!metadata.empty()) {
    auto* p = b.proto().add_metadata_props();
    p->set_key(kFeaturePruningKey);
    p->set_value(metadata);
  }
  return b;
}

// The oracle of a pruned session: the plan's own rewritten graph on the reference executor
// (the ops' references). The pruned run must give its numbers within `tolerance`, and they
// must differ from the unpruned run's by more than `changed` somewhere, or the test cannot tell.
void expect_pruned_run(Session& pruned, Session& whole, const Plan& plan, const Tensor& x, double tolerance,
                       double changed_by) {
  const Tensor want = model_from_graph(plan.graph).run_reference({{"x", x}}).at("y");
  const Tensor got = pruned.run({{"x", x}}).at("y");
  const Tensor unpruned = whole.run({{"x", x}}).at("y");
  bool changed = false;
  for (int64_t i = 0; i < want.numel(); ++i) {
    EXPECT_NEAR(got.data<float>()[i], want.data<float>()[i], tolerance) << i;
    changed |= std::fabs(unpruned.data<float>()[i] - want.data<float>()[i]) > changed_by;
  }
  EXPECT_TRUE(changed);
}

TEST(FeaturePruning, MetadataPrunesTheRunAndThePlanSaysWhat) {
  Engine engine({.threads = 2, .pin = false});
  const Tensor x = random_f32({2, 2, 6, 6}, 9);
  const auto bytes = chain("prune a2 channels=0.5 positions=0.5  # half of each").bytes();
  Session pruned(engine, model_from_graph(load_onnx_bytes(bytes, "m.onnx")), SessionOptions{.tiles_per_op = 3});
  Session whole(engine, model_from_graph(load_onnx_bytes(bytes, "m.onnx")), SessionOptions{.feature_pruning = "off"});
  const auto plan = plan_for(pruned, {{"x", x.shape()}});
  ASSERT_TRUE(plan);
  EXPECT_EQ(plan->pruning.gates, 1);
  EXPECT_EQ(plan->pruning.pruned_convs, 1);
  // The fused Relu counts whole either way; the products are a quarter: 4 of 8 channels, at
  // half the output positions (stride 1: those of the 18 kept positions of 36).
  const int64_t relu = 2 * 6 * 6 * 6;
  EXPECT_EQ((plan->pruning.kept_flops - relu) * 4, plan->pruning.dense_flops - relu);
  EXPECT_EQ(plan_for(whole, {{"x", x.shape()}})->pruning.gates, 0);
  expect_pruned_run(pruned, whole, *plan, x, 1e-5, 1e-4);
}

// A map that only convs read has no decision node: each pruned conv's tile waits for its
// image's whole map and ranks it itself, so no core waits while another decides. Both
// layouts, cut into more tiles than the window needs rows of the map.
TEST(FeaturePruning, AMapOnlyConvsReadIsRankedByEachConvTile) {
  for (int threads : {1, 2, 3}) {
    Engine engine({.threads = threads, .pin = false});
    for (int64_t channels : {8, 32}) {
      SCOPED_TRACE(std::to_string(threads) + " threads, " + std::to_string(channels) + " channels");
      const Tensor x = random_f32({1, 2, 16, 16}, 31);
      const auto bytes = chain("prune a2 channels=0.5 positions=0.5", 1, channels, 16).bytes();
      Session pruned(engine, model_from_graph(load_onnx_bytes(bytes, "m.onnx")), SessionOptions{.tiles_per_op = 4});
      Session whole(engine, model_from_graph(load_onnx_bytes(bytes, "m.onnx")), SessionOptions{.feature_pruning = "off"});
      const auto plan = plan_for(pruned, {{"x", x.shape()}});
      ASSERT_TRUE(plan);
      EXPECT_EQ(plan->pruning.gates, 1);
      const Graph& g = plan->graph;
      int conv = -1;
      for (size_t i = 0; i < g.nodes.size(); ++i) {
        EXPECT_FALSE(g.nodes[i].op_type.starts_with("AttentionKeep")) << g.nodes[i].name;
        if (g.nodes[i].op_type.starts_with("PrunedConv")) conv = int(i);
      }
      ASSERT_GE(conv, 0);
      const Node& pc = g.nodes[size_t(conv)];
      EXPECT_EQ(pc.op_type, channels >= 16 ? "PrunedConvNhwc" : "PrunedConv");
      EXPECT_LE(pc.inputs.size(), kPrunedConvKeepInput);
      const auto producer = std::find_if(g.nodes.begin(), g.nodes.end(), [&](const Node& n) {
        return std::find(n.outputs.begin(), n.outputs.end(), pc.inputs[0]) != n.outputs.end();
      });
      ASSERT_NE(producer, g.nodes.end());
      const auto p = producer - g.nodes.begin();
      const TileGraph& tg = plan->tiles;
      EXPECT_GT(tg.tile_count[size_t(conv)], 1);
      EXPECT_GT(tg.tile_count[size_t(p)], 2);
      // Every tile of the conv waits for every tile of the map's producer (one image).
      std::map<int32_t, int> from_producer;
      for (int32_t t = tg.first_tile[size_t(p)]; t < tg.first_tile[size_t(p)] + tg.tile_count[size_t(p)]; ++t)
        for (int64_t c = tg.child_begin[size_t(t)]; c < tg.child_begin[size_t(t) + 1]; ++c)
          if (tg.node[size_t(tg.children[size_t(c)])] == conv) ++from_producer[tg.children[size_t(c)]];
      EXPECT_EQ(int(from_producer.size()), tg.tile_count[size_t(conv)]);
      for (const auto& [tile, parents] : from_producer) EXPECT_EQ(parents, tg.tile_count[size_t(p)]) << tile;
      expect_pruned_run(pruned, whole, *plan, x, 1e-5, 1e-4);
    }
  }
}

TEST(ApplyKeep, TilesEqualTheReference) {
  NodeBuilder b("ApplyKeep", 13, 2);
  b.i(kAttrKeepChannels, 3).i(kAttrKeepPositions, 8);
  b.node.domain = kGroveDomain;
  const Tensor x = random_f32({3, 5, 4, 3}, 21);
  const auto stats = tiletest::check_tiling(b.node, {x, keep_of(x, 3, 8)}, 0);
  EXPECT_GT(stats.tiles, 4u);
}

// A residual block of `width` channels: a2 feeds conv1 (as x) and, after conv2, the residual
// Add. From 16 channels its convs run channels-last.
test::OnnxBuilder residual_block(const std::string& metadata, int64_t width = 8) {
  test::OnnxBuilder b;
  b.input("x", onnx::TensorProto::FLOAT, {2, 2, 6, 6}).output("y", onnx::TensorProto::FLOAT, {2, 3});
  auto values = [](size_t n, uint32_t seed) {
    const Tensor t = random_f32({int64_t(n)}, seed);
    return std::vector<float>(t.data<float>(), t.data<float>() + n);
  };
  const auto c = static_cast<size_t>(width);
  b.initializer_f32("w0", {width, 2, 3, 3}, values(c * 18, 1));
  b.initializer_f32("w1", {width, width, 3, 3}, values(c * c * 9, 2));
  b.initializer_f32("w2", {width, width, 3, 3}, values(c * c * 9, 3));
  b.initializer_f32("fc", {3, width}, values(c * 3, 4));
  test::OnnxBuilder::attr_ints(b.node("Conv", {"x", "w0"}, {"a0"}, "conv0"), "pads", {1, 1, 1, 1});
  b.node("Relu", {"a0"}, {"a2"}, "relu0");
  test::OnnxBuilder::attr_ints(b.node("Conv", {"a2", "w1"}, {"a3"}, "conv1"), "pads", {1, 1, 1, 1});
  b.node("Relu", {"a3"}, {"a4"}, "relu1");
  test::OnnxBuilder::attr_ints(b.node("Conv", {"a4", "w2"}, {"a5"}, "conv2"), "pads", {1, 1, 1, 1});
  b.node("Add", {"a5", "a2"}, {"a6"}, "add");
  b.node("GlobalAveragePool", {"a6"}, {"a7"}, "pool");
  b.node("Flatten", {"a7"}, {"a8"}, "flatten");
  test::OnnxBuilder::attr_int(b.node("Gemm", {"a8", "fc"}, {"y"}, "fc"), "transB", 1);
  auto* p = b.proto().add_metadata_props();
  p->set_key(kFeaturePruningKey);
  p->set_value(metadata);
  return b;
}

TEST(FeaturePruning, OtherReadersOfAPrunedMapReadItMasked) {
  Engine engine({.threads = 2, .pin = false});
  const Tensor x = random_f32({2, 2, 6, 6}, 22);
  const auto bytes = residual_block("prune a2 channels=0.5 positions=0.75").bytes();
  Session pruned(engine, model_from_graph(load_onnx_bytes(bytes, "m.onnx")), SessionOptions{.tiles_per_op = 2});
  Session whole(engine, model_from_graph(load_onnx_bytes(bytes, "m.onnx")), SessionOptions{.feature_pruning = "off"});
  const auto plan = plan_for(pruned, {{"x", x.shape()}});
  ASSERT_TRUE(plan);
  EXPECT_EQ(plan->pruning.pruned_convs, 1);
  const auto masks = std::count_if(plan->graph.nodes.begin(), plan->graph.nodes.end(),
                                   [](const Node& n) { return n.op_type == "ApplyKeep"; });
  EXPECT_EQ(masks, 1);  // the residual reads the masked map
  expect_pruned_run(pruned, whole, *plan, x, 1e-4, 1e-3);
}

// From 16 channels the block runs channels-last: the gate reads the map's channels-last copy,
// conv1 becomes PrunedConvNhwc, and conv2, which reads the map as its fused residual, reads it
// through ApplyKeepNhwc; nothing goes back to NCHW for the pruning.
TEST(FeaturePruning, ChannelsLastMapsArePrunedChannelsLast) {
  Engine engine({.threads = 2, .pin = false});
  for (const char* metadata : {"prune a2 channels=0.5 positions=0.5", "prune a2 positions=0.25", "prune a2 channels=0.75"}) {
    SCOPED_TRACE(metadata);
    const Tensor x = random_f32({2, 2, 6, 6}, 23);
    const auto bytes = residual_block(metadata, 16).bytes();
    Session pruned(engine, model_from_graph(load_onnx_bytes(bytes, "m.onnx")), SessionOptions{.tiles_per_op = 3});
    Session whole(engine, model_from_graph(load_onnx_bytes(bytes, "m.onnx")), SessionOptions{.feature_pruning = "off"});
    const auto plan = plan_for(pruned, {{"x", x.shape()}});
    ASSERT_TRUE(plan);
    std::map<std::string, int> ops;
    for (const Node& n : plan->graph.nodes) ++ops[n.op_type];
    EXPECT_EQ(ops["AttentionKeepNhwc"], 1);
    EXPECT_EQ(ops["PrunedConvNhwc"], 1);
    EXPECT_EQ(ops["ApplyKeepNhwc"], 1);
    EXPECT_EQ(ops["AttentionKeep"] + ops["PrunedConv"] + ops["ApplyKeep"] + ops["Transpose"], 0);
    expect_pruned_run(pruned, whole, *plan, x, 1e-4, 1e-3);
  }
}

// A channels-last map "a" (plane x plane, 64 channels) read by a conv the layout pass put on
// Winograd.
Graph winograd_reader(int64_t plane = 14) {
  Graph g;
  auto conv = [&](const std::string& x, const std::string& w, const std::string& y, bool winograd) {
    Node n;
    n.name = y;
    n.op_type = "ConvNhwc";
    n.domain = kGroveDomain;
    n.opset = 13;
    n.inputs = {x, w};
    n.outputs = {y};
    n.attrs["pads"].kind = Attribute::Kind::ints;
    n.attrs["pads"].ints = {1, 1, 1, 1};
    if (winograd) n.decisions.conv = ConvPrimitive::winograd;
    g.initializers[w] = random_f32({64, 64, 3, 3}, 31);
    g.values[w] = ValueInfo{DType::f32, {64, 64, 3, 3}};
    g.values[y] = ValueInfo{DType::f32, {1, plane, plane, 64}};
    g.nodes.push_back(n);
  };
  g.inputs.push_back(ValueDecl{"x/nhwc", DType::f32});
  g.values["x/nhwc"] = ValueInfo{DType::f32, {1, plane, plane, 64}};
  conv("x/nhwc", "w0", "a/nhwc", false);
  conv("a/nhwc", "w1", "b/nhwc", true);
  g.values["a"] = ValueInfo{DType::f32, {1, 64, plane, plane}};  // the NCHW value the statement names
  g.outputs.push_back(ValueDecl{"b/nhwc"});
  return g;
}

// A Winograd conv is always pruned: it stays on Winograd (its GEMMs adding up the kept
// channels, blocks with no kept centre skipped) where that costs less than the pruned GEMM
// over the kept share at the probe's gain, and the rewritten graph computes what the pruned
// conv computes either way: the zeroed outputs at pruned centres too (a conv left whole on the
// masked map would not).
TEST(FeaturePruning, WinogradConvsArePrunedOnWinogradOrWherePruningBeatsIt) {
  struct Expect {
    const char* statement;
    double gain, half_kept;
    bool on_winograd;
    int threads = 1;
    int64_t plane = 14;
  };
  // Half the positions one by one leave 1/9 + 8/9 x 0.5 of a computed output's taps reading
  // kept positions; where the row path skips the others (AVX-512), it costs 1.37 x 0.556 of
  // its time on every tap (64 channels): 2.4 x 0.5 x 0.76 = 0.91 against 1, elsewhere 1.2.
  const bool tap_by_tap = kernels::conv_row_supported(kernels::active_isa(), kernels::Precision::f32);
  for (const Expect& e : {Expect{"prune a channels=0.75", 1.5, 0.75, true},   // 0.875 against 1.125
                          Expect{"prune a positions=0.5", 2.4, 0.75, !tap_by_tap},
                          Expect{"prune a channels=0.5", 1.5, 0.75, true},    // 0.75 against 0.75
                          Expect{"prune a channels=0.25", 1.5, 0.75, false},  // 0.625 against 0.375
                          Expect{"prune a channels=0.25", 3.0, 0.75, true},   // 0.625 against 0.75
                          Expect{"prune a channels=0.75", 1.5, 0.0, true},    // unmeasured: 0.75
                          Expect{"prune a channels=0.75", 0.0, 0.75, false},  // unmeasured gain: the GEMM
                          Expect{"prune a positions=0.5", 1.5, 0.75, false},  // nearly every block: 1 against 0.75
                          Expect{"prune a positions=0.75", 1.5, 0.75, true},  // 1 against 1.125
                          Expect{"prune a channels=0.75 positions=0.75", 2.0, 0.75, true},
                          Expect{"prune a channels=0.75 positions=0.75", 1.2, 0.75, false},
                          // 2 threads: the 14x14 plane (3.2 channels per GEMM column) is cut by rows,
                          // as at 1 thread; the 6x6 plane (10.7) into 2 channel tiles, each
                          // transforming the whole input: 0.25 x 3 + 0.25 against 0.75.
                          Expect{"prune a channels=0.5", 1.5, 0.75, true, 2},
                          Expect{"prune a channels=0.5", 1.5, 0.75, false, 2, 6},
                          Expect{"prune a channels=0.75", 1.5, 0.75, true, 2, 6}}) {  // 1.125 against 1.125
    SCOPED_TRACE(std::string(e.statement) + " gain " + std::to_string(e.gain) + " half kept " +
                 std::to_string(e.half_kept) + " threads " + std::to_string(e.threads) + " plane " +
                 std::to_string(e.plane));
    const Tensor x = random_f32({1, e.plane, e.plane, 64}, 32);
    auto reference = [&](const Graph& g) { return model_from_graph(g).run_reference({{"x/nhwc", x}}).at("b/nhwc"); };
    Graph g = winograd_reader(e.plane), gemm = winograd_reader(e.plane);
    const FeaturePruningReport r =
        apply_feature_pruning(g, parse_feature_pruning(e.statement), {e.gain, e.half_kept, e.threads});
    apply_feature_pruning(gemm, parse_feature_pruning(e.statement), {});
    const Node& conv = *std::find_if(g.nodes.begin(), g.nodes.end(), [](const Node& n) { return n.name == "b/nhwc"; });
    EXPECT_EQ(r.gates, 1);
    EXPECT_EQ(r.pruned_convs, 1);
    EXPECT_EQ(r.pruned_winograd, e.on_winograd ? 1 : 0);
    EXPECT_EQ(conv.op_type, "PrunedConvNhwc");
    EXPECT_EQ(conv.inputs[0], "a/nhwc");
    EXPECT_EQ(conv_primitive_choice(conv), e.on_winograd ? ConvPrimitive::winograd : ConvPrimitive::unset);
    const Tensor want = reference(gemm), got = reference(g);
    for (int64_t i = 0; i < want.numel(); ++i) ASSERT_EQ(got.data<float>()[i], want.data<float>()[i]) << i;
  }
}

// A tuning choice made for the dense conv (primitive and tile grid, predicted on the dense
// graph) does not stop the conv from being pruned: its grid is the dense conv's, not the
// pruned one's, and is left to the rule.
TEST(FeaturePruning, AConvsChosenGridDoesNotBindItsPrunedForm) {
  Engine engine({.threads = 2, .pin = false});
  const Tensor x = random_f32({2, 2, 6, 6}, 24);
  const auto bytes = residual_block("prune a2 channels=0.5 positions=0.5", 16).bytes();
  SessionOptions options{.tiles_per_op = 0};
  options.choices = {NodeChoice{"conv1", "nchwc", {1, 2, 3, 6, 8}}};
  Session pruned(engine, model_from_graph(load_onnx_bytes(bytes, "m.onnx")), options);
  const auto plan = plan_for(pruned, {{"x", x.shape()}});
  ASSERT_TRUE(plan);
  EXPECT_EQ(plan->pruning.pruned_convs, 1);
  EXPECT_EQ(plan->pruning.pruned_nodes.count("conv1"), 1u);
  const Tensor want = model_from_graph(plan->graph).run_reference({{"x", x}}).at("y");
  const Tensor got = pruned.run({{"x", x}}).at("y");
  for (int64_t i = 0; i < want.numel(); ++i) EXPECT_NEAR(got.data<float>()[i], want.data<float>()[i], 1e-4) << i;
}

TEST(FeaturePruning, BadStatementsAreOneLineErrors) {
  Engine engine({.threads = 1, .pin = false});
  const Shape x{2, 2, 6, 6};
  auto plan_error = [&](const std::string& metadata) {
    return error_of([&] {
      Session s(engine, model_from_graph(load_onnx_bytes(chain(metadata).bytes(), "m.onnx")));
      plan_for(s, {{"x", x}});
    });
  };
  EXPECT_NE(plan_error("prune a2 channels=2").find("m.onnx: grove.antidote line 1: channels=2 is not a ratio in (0, 1]"),
            std::string::npos);
  EXPECT_NE(plan_error("prune a2 width=0.5").find("unknown setting 'width=0.5'"), std::string::npos);
  EXPECT_NE(plan_error("keep a2").find("expected 'prune VALUE"), std::string::npos);
  EXPECT_NE(plan_error("prune a2\nprune a2").find("line 2: 'a2' is pruned twice"), std::string::npos);
  EXPECT_NE(plan_error("prune nothing channels=0.5").find("'nothing': no node computes this value"), std::string::npos);
  EXPECT_NE(plan_error("prune a4 channels=0.5").find("'a4': no 2-D Conv of one group reads it as x"), std::string::npos);
  EXPECT_NE(plan_error("prune y channels=0.5").find("must be a float32 [N, C, H, W] feature map"), std::string::npos);
  // Given in the options, statements replace the metadata; "off" drops it.
  Session off(engine, model_from_graph(load_onnx_bytes(chain("prune a4 channels=0.5").bytes(), "m.onnx")),
              SessionOptions{.feature_pruning = "off"});
  EXPECT_EQ(plan_for(off, {{"x", x}})->pruning.gates, 0);
  Session given(engine, model_from_graph(load_onnx_bytes(chain("prune a4 channels=0.5").bytes(), "m.onnx")),
                SessionOptions{.feature_pruning = "prune a2 channels=0.25"});
  EXPECT_EQ(plan_for(given, {{"x", x}})->pruning.gates, 1);
}

}  // namespace
}  // namespace grove
