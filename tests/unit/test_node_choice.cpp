// Per-node choices in the plan (plan/node_choice.h): the Conv primitive and the tile grid a
// tuning record picks override the rules, give the reference's answer on the tile runtime,
// and a choice that does not fit the node is an error naming it, never a wrong kernel.
#include <gtest/gtest.h>

#include <cmath>

#include "graph/node_decisions.h"
#include "ops/conv/tile_conv_winograd.h"
#include "plan_test_util.h"
#include "runtime/reference_executor.h"

namespace grove {
namespace {

using namespace grove::test;

// x [1,16,32,32]: a 3x3 conv the rule puts on Winograd, a 3x3 conv on a 12x12 plane the rule
// keeps on im2col (too few GEMM columns), a stride-2 3x3 conv Winograd cannot take.
TestModel three_convs() {
  OnnxBuilder b(13);
  b.input("x", kF32, {1, 16, 32, 32}).output("y", kF32, {1, 16, 6, 6});
  weight(b, "wa", {16, 16, 3, 3}, 1);
  weight(b, "wb", {16, 16, 3, 3}, 2);
  weight(b, "wc", {16, 16, 3, 3}, 3);
  OnnxBuilder::attr_ints(b.node("Conv", {"x", "wa"}, {"a"}, "big_plane"), "pads", {1, 1, 1, 1});
  auto& pool = b.node("MaxPool", {"a"}, {"p"}, "pool");
  OnnxBuilder::attr_ints(pool, "kernel_shape", {2, 2});
  OnnxBuilder::attr_ints(pool, "strides", {2, 2});
  b.node("Conv", {"p", "wb"}, {"c"}, "small_plane");
  auto& s2 = b.node("Conv", {"c", "wc"}, {"y"}, "stride2");
  OnnxBuilder::attr_ints(s2, "strides", {2, 2});
  OnnxBuilder::attr_ints(s2, "pads", {1, 1, 1, 1});
  return {"three_convs", b.bytes(), {{"x", seeded_tensor({1, 16, 32, 32}, 9)}}};
}

const Node& node_named(const Plan& plan, const std::string& name) {
  for (const Node& n : plan.graph.nodes)
    if (n.name == name) return n;
  throw Error("no node " + name);
}

int32_t index_of(const Plan& plan, const std::string& name) {
  for (size_t n = 0; n < plan.graph.nodes.size(); ++n)
    if (plan.graph.nodes[n].name == name) return static_cast<int32_t>(n);
  return -1;
}

bool uses_winograd(const Plan& plan, const std::string& name) {
  const Node& n = node_named(plan, name);
  return tiling::conv_node_uses_winograd(n, plan.graph.values.at(n.inputs[0]).shape,
                                         plan.graph.values.at(n.inputs[1]).shape);
}

double max_difference(const Tensor& a, const Tensor& b) {
  double worst = 0;
  for (int64_t i = 0; i < numel(a.shape()); ++i)
    worst = std::max(worst, std::abs(double(a.data<float>()[i]) - b.data<float>()[i]));
  return worst;
}

TEST(NodeChoice, PrimitivesOverrideTheRuleBothWays) {
  const TestModel m = three_convs();
  const Graph g = unfused_graph(m);
  auto by_rule = make_plan(g, PlanOptions{});
  ASSERT_TRUE(uses_winograd(*by_rule, "big_plane"));
  ASSERT_FALSE(uses_winograd(*by_rule, "small_plane"));

  PlanOptions options;
  options.choices = {{"big_plane", "gemm", {}}, {"small_plane", "winograd", {}}};
  auto chosen = make_plan(g, options);
  EXPECT_FALSE(uses_winograd(*chosen, "big_plane"));
  EXPECT_TRUE(uses_winograd(*chosen, "small_plane"));
  EXPECT_EQ(conv_primitive_choice(node_named(*chosen, "big_plane")), ConvPrimitive::gemm);
  EXPECT_EQ(node_named(*chosen, "big_plane").decisions.conv_source, DecisionSource::record);
  EXPECT_EQ(conv_primitive_choice(node_named(*by_rule, "big_plane")), ConvPrimitive::unset);

  // Both plans give the reference's answer; they differ from each other only by rounding
  // (Winograd sums in another order), which shows the choice reached the kernels.
  const TensorMap want = run_reference(g, m.inputs);
  PlannedRun a(by_rule, m.inputs, PlannedRunOptions{true}), b(chosen, m.inputs, PlannedRunOptions{true});
  run_serial(a, 1);
  run_serial(b, 2);
  EXPECT_LT(max_difference(want.at("y"), a.outputs().at("y")), 1e-3);
  EXPECT_LT(max_difference(want.at("y"), b.outputs().at("y")), 1e-3);
  EXPECT_GT(max_difference(a.outputs().at("y"), b.outputs().at("y")), 0.0);
}

// The direct kernel, which the rule keeps for convs of few input channels, runs any conv of
// one group it fits when chosen: here a 16-channel stride-2 conv, to the reference's answer.
TEST(NodeChoice, DirectKernelRunsAChosenConv) {
  const TestModel m = three_convs();
  const Graph g = unfused_graph(m);
  PlanOptions options;
  options.choices = {{"stride2", "direct", {}}};
  auto chosen = make_plan(g, options);
  const Node& n = node_named(*chosen, "stride2");
  EXPECT_EQ(conv_primitive_choice(n), ConvPrimitive::direct);
  EXPECT_TRUE(tiling::conv_node_uses_direct(n, chosen->graph.values.at(n.inputs[0]).shape,
                                            chosen->graph.values.at(n.inputs[1]).shape));
  EXPECT_FALSE(tiling::conv_node_uses_direct(node_named(*make_plan(g, PlanOptions{}), "stride2"),
                                             g.values.at("c").shape, g.values.at("wc").shape));
  PlannedRun run(chosen, m.inputs, PlannedRunOptions{true});
  run_serial(run, 2);
  EXPECT_LT(max_difference(run_reference(g, m.inputs).at("y"), run.outputs().at("y")), 1e-3);
}

TEST(NodeChoice, ChosenExtentIsTheGrid) {
  const TestModel m = three_convs();
  const Graph g = unfused_graph(m);
  PlanOptions options;
  options.threads = 2;
  options.choices = {{"big_plane", "gemm", {1, 0, 8, 0}}, {"small_plane", "", {1, 0, 4, 0}}};
  auto plan = make_plan(g, options);
  const int32_t big = index_of(*plan, "big_plane"), small = index_of(*plan, "small_plane");
  EXPECT_EQ(plan->tile_extent[size_t(big)], (Shape{1, 16, 8, 32}));
  EXPECT_EQ(plan->tiles.tile_count[size_t(big)], 4);
  EXPECT_EQ(plan->tile_extent[size_t(small)], (Shape{1, 16, 4, 14}));
  EXPECT_EQ(plan->tiles.tile_count[size_t(small)], 4);
  PlannedRun run(plan, m.inputs, PlannedRunOptions{true});
  run_serial(run, 3);
  EXPECT_LT(max_difference(run_reference(g, m.inputs).at("y"), run.outputs().at("y")), 1e-3);
}

void expect_refused(const std::vector<NodeChoice>& choices, const std::string& says) {
  PlanOptions options;
  options.choices = choices;
  try {
    make_plan(unfused_graph(three_convs()), options);
    ADD_FAILURE() << "planned with a choice that should be refused: " << says;
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(says), std::string::npos) << e.what();
  }
}

TEST(NodeChoice, ChoicesThatDoNotFitAreRefusedNamingTheNode) {
  expect_refused({{"missing", "gemm", {}}}, "'missing', which the model does not have");
  expect_refused({{"big_plane", "gemm", {}}, {"big_plane", "", {}}}, "'big_plane' has two choices");
  expect_refused({{"stride2", "winograd", {}}}, "stride2");
  expect_refused({{"big_plane", "fft", {}}}, "unknown conv primitive 'fft'");
  expect_refused({{"pool", "gemm", {}}}, "for Conv nodes only");
  expect_refused({{"big_plane", "", {1, 0, 8}}}, "wrong rank");
  expect_refused({{"small_plane", "", {1, 0, 0, 5}}}, "may not cut");  // conv columns are never cut
  // Winograd on a 32x32 plane keeps whole planes per tile; im2col channels come in panel widths.
  expect_refused({{"big_plane", "", {1, 0, 8, 0}}}, "may not cut");
  expect_refused({{"small_plane", "", {1, 3, 0, 0}}}, "off its blocks");
  expect_refused({{"pool", "", {1, 0, 0}}}, "wrong rank");
}

}  // namespace
}  // namespace grove
