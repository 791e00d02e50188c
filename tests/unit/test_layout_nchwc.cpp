// Channel-blocked float convolutions: grove.internal ConvNchwc's tile rule against Conv's
// reference on blocked tensors, and the plan-time pass (passes/layout_nchwc.cpp) that runs the
// convs a choice names "nchwc" on it: chains share their blocked values, a plan computes the
// model's reference, and a conv the layout cannot hold is refused naming it.
#include <gtest/gtest.h>

#include "graph/node_decisions.h"
#include "kernels/conv_nchwc.h"
#include "ops/conv/channels_blocked.h"
#include "ops/op.h"
#include "plan_test_util.h"
#include "runtime/reference_executor.h"
#include "tiling_test_util.h"

namespace grove {
namespace {

using namespace grove::test;
using optest::NodeBuilder;

// Every tile grid the rule allows (images, output blocks in pairs, rows), with and without
// prepared weights and with inputs poisoned outside `needs`, within float rounding of the
// reference. The cases take x read in place (1x1, stride 1, no pads), padded rows, row and
// column strides, a 7x7 stride-2 kernel, an odd number of output blocks, bands of padded rows
// (a plane of many blocks), two images, depthwise convs and the fused residual and
// activations; both block widths.
TEST(ConvNchwc, TileRuleMatchesReference) {
  struct Case { Shape x, w; int64_t stride, pad; bool bias, relu, residual; int64_t group = 1; };
  const std::vector<Case> cases = {
      {{2, 32, 5, 8}, {48, 32, 1, 1}, 1, 0, true, false, false},
      {{1, 16, 9, 12}, {32, 16, 3, 3}, 1, 1, true, true, true},
      {{1, 16, 11, 9}, {48, 16, 3, 3}, 2, 1, false, false, false},
      {{1, 16, 12, 12}, {16, 16, 7, 7}, 2, 3, true, true, false},
      {{1, 32, 6, 6}, {32, 32, 1, 1}, 2, 0, true, false, true},
      {{1, 256, 30, 40}, {16, 256, 3, 3}, 1, 1, true, true, true},
      // Depthwise: each output block reads its own input block.
      {{2, 48, 9, 11}, {48, 1, 3, 3}, 1, 1, true, true, true, 48},
      {{1, 32, 13, 12}, {32, 1, 5, 5}, 2, 2, false, false, false, 32},
  };
  uint32_t seed = 70;
  for (int64_t block : {8, 16})
    for (const Case& c : cases) {
      NodeBuilder node("ConvNchwc", 13, c.residual ? 4 : 3);
      node.node.domain = kGroveDomain;
      node.ints("strides", {c.stride, c.stride}).ints("pads", {c.pad, c.pad, c.pad, c.pad});
      if (c.group != 1) node.i("group", c.group);
      if (c.residual || c.relu)
        node.epilogue(c.residual ? (c.relu ? "Add+Relu" : "Add") : "Relu", c.relu ? FusedActivation::relu : FusedActivation::none);
      const Tensor x = tiletest::random_f32(c.x, seed++), w = tiletest::random_f32(c.w, seed++);
      std::vector<Tensor> in = {nchw_to_blocked(x, block), w, c.bias ? tiletest::random_f32({c.w[0]}, seed++) : Tensor()};
      if (c.residual) {
        Node conv = node.node;
        conv.op_type = "Conv";
        conv.domain.clear();
        conv.inputs.resize(3);
        conv.decisions.epilogue = {};
        std::vector<const Tensor*> plain = {&x, &w, c.bias ? &in[2] : nullptr};
        in.push_back(nchw_to_blocked(tiletest::random_f32(evaluate_node(conv, plain).at(0).shape(), seed++), block));
      }
      const auto stats = tiletest::check_tiling(node, in, 1e-4);
      EXPECT_GT(stats.tiles, 2u) << shape_str(c.x) << " block " << block;
    }
}

// x -> conv_a (3x3) -> Relu -> conv_b (1x1) -> + conv_skip(x) -> Relu -> y -> MaxPool -> p: the
// Relus and the Add fuse into the convs' epilogues, so all three convs chosen "nchwc" are one
// blocked chain.
TestModel blocked_block() {
  OnnxBuilder b(13);
  b.input("x", kF32, {2, 32, 10, 9}).output("y", kF32, {2, 32, 10, 9}).output("p", kF32, {2, 32, 5, 4});
  weight(b, "wa", {64, 32, 3, 3}, 1);
  weight(b, "ba", {64}, 2);
  weight(b, "wb", {32, 64, 1, 1}, 3);
  weight(b, "ws", {32, 32, 1, 1}, 4);
  OnnxBuilder::attr_ints(b.node("Conv", {"x", "wa", "ba"}, {"a"}, "conv_a"), "pads", {1, 1, 1, 1});
  b.node("Relu", {"a"}, {"ar"}, "relu_a");
  b.node("Conv", {"ar", "wb"}, {"cb"}, "conv_b");
  b.node("Conv", {"x", "ws"}, {"s"}, "conv_skip");
  b.node("Add", {"cb", "s"}, {"sum"}, "add");
  b.node("Relu", {"sum"}, {"y"}, "relu");
  OnnxBuilder::attr_ints(b.node("MaxPool", {"y"}, {"p"}, "pool"), "kernel_shape", {2, 2});
  return {"blocked_block", b.bytes(), {{"x", seeded_tensor({2, 32, 10, 9}, 5)}}};
}

int count_op(const Plan& plan, const std::string& op) {
  int n = 0;
  for (const Node& node : plan.graph.nodes) n += node.op_type == op;
  return n;
}

TEST(LayoutNchwc, ChosenChainRunsBlockedAndComputesTheReference) {
  const TestModel m = blocked_block();
  Model model = load_test_model(m);
  const TensorMap want = run_reference(bound_graph(model), m.inputs);
  for (int threads : {1, 2}) {
    PlanOptions options;
    options.threads = threads;
    for (const char* conv : {"conv_a", "conv_b", "conv_skip"}) options.choices.push_back({conv, "nchwc", {}});
    auto plan = make_plan(bound_graph(model), options);
    EXPECT_EQ(count_op(*plan, "ConvNchwc"), 3);
    EXPECT_EQ(count_op(*plan, "Conv"), 0);
    EXPECT_EQ(count_op(*plan, "ConvNhwc"), 0);
    // x in; y back for the output and the pool. The skip conv's y reaches conv_b as its
    // blocked residual, and conv_a's as its blocked x: nothing goes back between them.
    EXPECT_EQ(count_op(*plan, "Transpose"), 2);
    for (uint32_t seed : {1u, 2u}) {
      PlannedRun run(plan, m.inputs, PlannedRunOptions{true});
      run_serial(run, seed);
      expect_close(run.outputs(), want, 1e-4, "blocked plan, " + std::to_string(threads) + " threads");
    }
  }
}

// conv_b blocked between channels-last conv_a and conv_skip (Transposes priced at nothing, so
// that those stay channels-last): it reads both their channels-last copies straight, one
// Transpose each, where going through NCHW would take two.
TEST(LayoutNchwc, OneBlockedConvAmongChannelsLastOnesComputesTheReference) {
  const TestModel m = blocked_block();
  Model model = load_test_model(m);
  const TensorMap want = run_reference(bound_graph(model), m.inputs);
  PlanOptions options;
  options.machine.transpose_flops = 0;
  options.choices = {{"conv_b", "nchwc", {}}};
  auto plan = make_plan(bound_graph(model), options);
  EXPECT_EQ(count_op(*plan, "ConvNchwc"), 1);
  EXPECT_EQ(count_op(*plan, "ConvNhwc"), 2);
  // x to channels-last; a's and s's copies to blocked; y back to NCHW for the output and pool.
  EXPECT_EQ(count_op(*plan, "Transpose"), 4);
  PlannedRun run(plan, m.inputs, PlannedRunOptions{true});
  run_serial(run, 3);
  expect_close(run.outputs(), want, 1e-4, "one blocked conv");
}

// An inverted residual block: 1x1 expand -> Clip -> depthwise 3x3 -> Clip -> 1x1 project + x.
// All three chosen "nchwc" run blocked, the depthwise one included, and reorder only x in and
// y out.
TEST(LayoutNchwc, InvertedResidualBlockRunsBlockedAndComputesTheReference) {
  OnnxBuilder b(13);
  b.input("x", kF32, {1, 32, 10, 10}).output("y", kF32, {1, 32, 10, 10});
  weight(b, "we", {96, 32, 1, 1}, 1);
  weight(b, "wd", {96, 1, 3, 3}, 2);
  weight(b, "bd", {96}, 3);
  weight(b, "wp", {32, 96, 1, 1}, 4);
  b.node("Conv", {"x", "we"}, {"e"}, "expand");
  b.node("Relu", {"e"}, {"er"}, "relu_e");
  auto& dw = b.node("Conv", {"er", "wd", "bd"}, {"d"}, "depthwise");
  OnnxBuilder::attr_ints(dw, "pads", {1, 1, 1, 1});
  OnnxBuilder::attr_int(dw, "group", 96);
  b.node("Relu", {"d"}, {"dr"}, "relu_d");
  b.node("Conv", {"dr", "wp"}, {"p"}, "project");
  b.node("Add", {"p", "x"}, {"y"}, "add");
  const TestModel m{"inverted_residual", b.bytes(), {{"x", seeded_tensor({1, 32, 10, 10}, 6)}}};
  Model model = load_test_model(m);
  const TensorMap want = run_reference(bound_graph(model), m.inputs);
  for (int threads : {1, 2}) {
    PlanOptions options;
    options.threads = threads;
    for (const char* conv : {"expand", "depthwise", "project"}) options.choices.push_back({conv, "nchwc", {}});
    auto plan = make_plan(bound_graph(model), options);
    EXPECT_EQ(count_op(*plan, "ConvNchwc"), 3);
    EXPECT_EQ(count_op(*plan, "DepthwiseConvNhwc"), 0);
    EXPECT_EQ(count_op(*plan, "Transpose"), 2);
    PlannedRun run(plan, m.inputs, PlannedRunOptions{true});
    run_serial(run, 7);
    expect_close(run.outputs(), want, 1e-4, "blocked inverted residual, " + std::to_string(threads) + " threads");
  }
}

TEST(LayoutNchwc, AConvTheLayoutCannotHoldIsRefusedNamingIt) {
  OnnxBuilder b(13);
  b.input("x", kF32, {1, 12, 6, 6}).output("y", kF32, {1, 16, 6, 6});
  weight(b, "w", {16, 12, 1, 1}, 1);
  b.node("Conv", {"x", "w"}, {"y"}, "odd_channels");
  const TestModel m{"odd", b.bytes(), {{"x", seeded_tensor({1, 12, 6, 6}, 5)}}};
  Model model = load_test_model(m);
  PlanOptions options;
  options.choices = {{"odd_channels", "nchwc", {}}};
  try {
    make_plan(bound_graph(model), options);
    FAIL() << "a conv of 12 input channels was planned channel-blocked";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("odd_channels"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("channel-blocked"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace grove
