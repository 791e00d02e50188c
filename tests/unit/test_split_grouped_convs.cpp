// Grouped convs split into one conv per group (passes/split_grouped_convs.cpp): generated
// chains of grouped convs (group counts, channels per group, kernels, strides, pads,
// dilations, bias, a Relu between, a reader of the Concat beside the next conv, batch) give
// the reference executor's numbers on the graph as written, through the plan at several tile
// counts, thread counts, both schedules and both conv layouts; consecutive convs of one group
// count become one chain per group; what must stay grouped stays grouped.
#include <gtest/gtest.h>

#include <random>

#include "passes/passes.h"
#include "plan_test_util.h"
#include "runtime/reference_executor.h"

namespace grove {
namespace {

using namespace grove::test;

struct ChainCase {
  TestModel model;
  std::string what;
};

// x [batch, g0 * c, h, h] -> up to three grouped convs (each with its own group count, kernel,
// stride, pads, dilation, optional bias and Relu) -> y; sometimes a second output reads the
// first conv's output too (so its Concat stays for that reader).
ChainCase generated_chain(uint32_t seed) {
  std::mt19937 rng(seed);
  auto pick = [&](std::vector<int64_t> v) { return v[std::uniform_int_distribution<size_t>(0, v.size() - 1)(rng)]; };
  OnnxBuilder b(13);
  const int64_t batch = pick({1, 1, 2}), h = pick({5, 8, 11});
  const int64_t layers = pick({1, 2, 2, 3});
  int64_t groups = pick({2, 3, 4, 16});
  int64_t channels = groups * pick({2, 3, 5});
  b.input("x", kF32, {batch, channels, h, h});
  std::string in = "x", what = "batch " + std::to_string(batch) + " " + std::to_string(h) + "x" + std::to_string(h);
  int64_t size = h;
  const bool side = pick({0, 1}) == 1;
  for (int64_t l = 0; l < layers; ++l) {
    if (l > 0 && pick({0, 0, 1}) == 1) groups = pick({2, 4});  // mostly the same group count: a chain
    if (channels % groups != 0) groups = channels % 2 == 0 ? 2 : 1;
    const int64_t out_channels = groups * pick({2, 4, 7});
    const int64_t kernel = pick({1, 3}), stride = pick({1, 1, 2}), dilation = kernel == 3 ? pick({1, 1, 2}) : 1;
    const int64_t pad = kernel == 3 ? pick({0, 1, dilation}) : 0;
    const int64_t reach = (kernel - 1) * dilation + 1;
    if (size + 2 * pad < reach) break;
    const std::string name = "c" + std::to_string(l);
    weight(b, name + "_w", {out_channels, channels / groups, kernel, kernel}, seed * 7 + uint32_t(l));
    const bool bias = pick({0, 1}) == 1;
    if (bias) weight(b, name + "_b", {out_channels}, seed * 11 + uint32_t(l));
    auto& conv = bias ? b.node("Conv", {in, name + "_w", name + "_b"}, {name}, name)
                      : b.node("Conv", {in, name + "_w"}, {name}, name);
    OnnxBuilder::attr_int(conv, "group", groups);
    OnnxBuilder::attr_ints(conv, "strides", {stride, stride});
    OnnxBuilder::attr_ints(conv, "pads", {pad, pad, pad, pad});
    OnnxBuilder::attr_ints(conv, "dilations", {dilation, dilation});
    in = name;
    if (pick({0, 1}) == 1) {
      b.node("Relu", {name}, {name + "_relu"}, name + "_relu");
      in = name + "_relu";
    }
    what += " | g" + std::to_string(groups) + " " + std::to_string(channels) + "->" + std::to_string(out_channels) +
            " k" + std::to_string(kernel) + " s" + std::to_string(stride) + " p" + std::to_string(pad) + " d" +
            std::to_string(dilation) + (bias ? " bias" : "");
    size = (size + 2 * pad - reach) / stride + 1;
    channels = out_channels;
    if (l == 0 && side && layers > 1) {
      b.node("Sigmoid", {in}, {"side"}, "side");
      b.output("side", kF32, {batch, channels, size, size});
      what += " (+ a reader of its output)";
    }
  }
  b.output(in, kF32, {batch, channels, size, size});
  return {{"chain", b.bytes(), {}}, what};
}

int count_ops(const Graph& g, const std::string& op) {
  int n = 0;
  for (const Node& node : g.nodes) n += node.op_type == op ? 1 : 0;
  return n;
}

TEST(SplitGroupedConvs, GeneratedChainsGiveTheReferenceNumbers) {
  int split = 0, chained = 0;
  for (uint32_t seed = 1; seed <= 60; ++seed) {
    ChainCase c = generated_chain(seed);
    Graph written = unfused_graph(c.model);
    const ValueInfo& x = written.values.at("x");
    c.model.inputs = {{"x", seeded_tensor(x.shape, seed)}};
    const TensorMap want = run_reference(written, c.model.inputs);
    Model model = load_test_model(c.model);
    const Graph optimised = bound_graph(model);
    split += count_ops(optimised, "Concat");
    for (const Node& n : optimised.nodes)  // a group's conv reading the group's output of the conv before
      chained += n.op_type == "Conv" && n.inputs[0].size() > 2 && n.inputs[0].ends_with("/y") ? 1 : 0;
    for (int threads : {1, 2, 3})
      for (Schedule schedule : {Schedule::aspen, Schedule::barrier})
        for (ConvLayout layout : {ConvLayout::channels_last, ConvLayout::nchw}) {
          PlanOptions o;
          o.threads = threads;
          o.schedule = schedule;
          o.conv_layout = layout;
          o.tiles_per_op = threads == 3 ? 5 : 0;
          PlannedRun run(make_plan(optimised, o), c.model.inputs, PlannedRunOptions{true});  // poisoned buffers
          run_serial(run, seed);
          expect_close(run.outputs(), want, 1e-4,
                       "seed " + std::to_string(seed) + " threads " + std::to_string(threads) + ": " + c.what);
          if (HasFatalFailure()) return;
        }
  }
  EXPECT_GT(split, 40);    // the cases do split convs
  EXPECT_GT(chained, 20);  // and chain consecutive ones group to group
}

// Two convs of 4 groups with a Relu between: four convs each, the second conv's group k
// reading the first's group k directly (no Slice of the first's Concat, which is gone).
// Grouped convs the pass leaves alone: depthwise, 32 groups, and one with a fused residual;
// 16 groups of 2 channels are split.
TEST(SplitGroupedConvs, ConsecutiveConvsOfOneGroupCountBecomeOneChainPerGroup) {
  OnnxBuilder b(13);
  b.input("x", kF32, {1, 16, 8, 8}).output("y", kF32, {1, 32, 8, 8});
  weight(b, "w1", {16, 4, 3, 3}, 1);
  weight(b, "w2", {32, 4, 3, 3}, 2);
  auto& c1 = b.node("Conv", {"x", "w1"}, {"a"}, "c1");
  OnnxBuilder::attr_int(c1, "group", 4);
  OnnxBuilder::attr_ints(c1, "pads", {1, 1, 1, 1});
  b.node("Relu", {"a"}, {"r"}, "relu");
  auto& c2 = b.node("Conv", {"r", "w2"}, {"y"}, "c2");
  OnnxBuilder::attr_int(c2, "group", 4);
  OnnxBuilder::attr_ints(c2, "pads", {1, 1, 1, 1});
  Model model = load_test_model({"two", b.bytes(), {}});
  const Graph g = bound_graph(model);
  EXPECT_EQ(count_ops(g, "Conv"), 8);
  EXPECT_EQ(count_ops(g, "Slice"), 4);   // the first conv's groups only
  EXPECT_EQ(count_ops(g, "Concat"), 1);  // the second's: y
  for (const Node& n : g.nodes)
    if (n.op_type == "Conv" && n.name.rfind("c2/group", 0) == 0)
      EXPECT_EQ(n.inputs[0], "c1/group" + n.name.substr(std::string("c2/group").size()) + "/y") << n.name;

  OnnxBuilder keep(13);
  keep.input("x", kF32, {1, 32, 8, 8}).input("x64", kF32, {1, 64, 8, 8});
  keep.output("d", kF32, {1, 32, 8, 8}).output("wide", kF32, {1, 32, 8, 8}).output("res", kF32, {1, 32, 8, 8});
  keep.output("over", kF32, {1, 32, 8, 8});
  weight(keep, "wd", {32, 1, 3, 3}, 3);
  weight(keep, "w32", {32, 1 * 2, 1, 1}, 4);
  weight(keep, "wr", {32, 16, 1, 1}, 5);
  weight(keep, "wo", {32, 2, 1, 1}, 6);
  auto& dw = keep.node("Conv", {"x", "wd"}, {"d"}, "dw");
  OnnxBuilder::attr_int(dw, "group", 32);
  OnnxBuilder::attr_ints(dw, "pads", {1, 1, 1, 1});
  auto& many = keep.node("Conv", {"x", "w32"}, {"wide"}, "many");
  OnnxBuilder::attr_int(many, "group", 16);  // 16 groups of 2: split
  auto& res = keep.node("Conv", {"x", "wr"}, {"rc"}, "res_conv");
  OnnxBuilder::attr_int(res, "group", 2);
  keep.node("Add", {"rc", "x"}, {"res"}, "add");  // fused as the conv's residual: stays grouped
  auto& over = keep.node("Conv", {"x64", "wo"}, {"over"}, "over");
  OnnxBuilder::attr_int(over, "group", 32);  // more than 16 groups: stays grouped
  Model kept_model = load_test_model({"keep", keep.bytes(), {}});
  const Graph k = bound_graph(kept_model);
  int grouped = 0, many_groups = 0;
  for (const Node& n : k.nodes) {
    if (n.op_type == "Conv" && n.attr_int("group", 1) > 1) ++grouped;
    if (n.op_type == "Conv" && n.name.rfind("many/group", 0) == 0) ++many_groups;
  }
  EXPECT_EQ(grouped, 3);  // the depthwise conv, the one with a residual and the one of 32 groups
  EXPECT_EQ(many_groups, 16);
}

// A dense conv then a grouped one, channels-last: each group's Slice slices the dense conv's
// channels-last output (passes/layout_f32.cpp), so the only Transposes are the input's and the
// output's, not one back to NCHW and one per group forward again; the numbers stay the
// reference's.
TEST(SplitGroupedConvs, GroupsSliceTheChannelsLastValue) {
  OnnxBuilder b(13);
  b.input("x", kF32, {1, 32, 8, 8}).output("y", kF32, {1, 32, 8, 8});
  weight(b, "w1", {32, 32, 3, 3}, 1);
  weight(b, "w2", {32, 16, 3, 3}, 2);
  OnnxBuilder::attr_ints(b.node("Conv", {"x", "w1"}, {"a"}, "dense"), "pads", {1, 1, 1, 1});
  auto& grouped = b.node("Conv", {"a", "w2"}, {"y"}, "grouped");
  OnnxBuilder::attr_int(grouped, "group", 2);
  OnnxBuilder::attr_ints(grouped, "pads", {1, 1, 1, 1});
  TestModel m{"slices", b.bytes(), {{"x", seeded_tensor({1, 32, 8, 8}, 3)}}};
  Model model = load_test_model(m);
  PlanOptions o;
  o.conv_layout = ConvLayout::channels_last;
  o.machine.transpose_flops = 0.01;  // channels-last whatever the Transposes cost
  auto plan = make_plan(bound_graph(model), o);
  EXPECT_EQ(count_ops(plan->graph, "ConvNhwc"), 3);
  EXPECT_EQ(count_ops(plan->graph, "Transpose"), 2);
  PlannedRun run(plan, m.inputs, PlannedRunOptions{true});
  run_serial(run, 5);
  expect_close(run.outputs(), run_reference(unfused_graph(m), m.inputs), 1e-4, "channels-last slices");
}

}  // namespace
}  // namespace grove
