// PlannedRun: tiles run in random topological orders (a serial stand-in for the Engine) on
// poisoned buffers give the reference executor's outputs, in both schedules; buffers are
// released after their last reader; errors name the node.
#include "plan_test_util.h"

using namespace grove;
using namespace grove::test;

namespace {

TensorMap planned_outputs(std::shared_ptr<const Plan> plan, const TensorMap& inputs, uint32_t seed) {
  PlannedRun run(std::move(plan), inputs, PlannedRunOptions{true});
  run_serial(run, seed);
  return run.outputs();
}

PlanOptions options(int tiles_per_op, Schedule schedule, TileRuleLookup rules) {
  PlanOptions o;
  o.tiles_per_op = tiles_per_op;
  o.schedule = schedule;
  o.debug.rule_lookup = rules;
  return o;
}

}  // namespace

TEST(PlannedRun, TestRulesGiveReferenceOutputsExactlyInAnyOrder) {
  for (const TestModel& m : all_test_models()) {
    Model model = load_test_model(m);
    TensorMap want = model.run_reference(m.inputs);
    for (Schedule s : {Schedule::aspen, Schedule::barrier})
      for (int k : {1, 2, 3, 7, 16, 10000}) {
        auto plan = make_plan(bound_graph(model), options(k, s, test_rule));
        for (uint32_t seed : {1u, 2u, 3u})
          expect_close(planned_outputs(plan, m.inputs, seed), want, 0.0,
                       m.name + " k=" + std::to_string(k) + (s == Schedule::barrier ? " barrier" : " aspen") +
                           " seed=" + std::to_string(seed));
      }
  }
}

// The rules of src/ops (find_tile_rule), on the same models.
TEST(PlannedRun, BuiltinRulesGiveReferenceOutputs) {
  for (const TestModel& m : all_test_models()) {
    Model model = load_test_model(m);
    TensorMap want = model.run_reference(m.inputs);
    for (Schedule s : {Schedule::aspen, Schedule::barrier})
      for (int k : {0, 1, 3, 7, 10000}) {
        auto plan = make_plan(bound_graph(model), options(k, s, nullptr));
        expect_close(planned_outputs(plan, m.inputs, 5), want, 1e-5, m.name + " builtin k=" + std::to_string(k));
      }
  }
}

TEST(PlannedRun, MissingEdgeIsCaughtByPoisonedBuffers) {
  // A Relu rule that claims to need nothing: its tiles may run before their producer's.
  static const TileRule blind{test_cut_all,
                              [](const Node&, std::span<const ValueInfo>, std::span<const ValueInfo>, const Region&,
                                 std::span<Region> need) {
                                for (auto& r : need) r = {};
                              },
                              whole_then_copy};
  TileRuleLookup lookup = [](const Node& n) { return n.op_type == "Relu" ? &blind : test_rule(n); };
  TestModel m = conv_chain();
  Model model = load_test_model(m);
  TensorMap want = model.run_reference(m.inputs);
  auto plan = make_plan(unfused_graph(m), options(4, Schedule::aspen, lookup));  // keeps the Relu
  bool wrong = false;
  for (uint32_t seed = 0; seed < 20 && !wrong; ++seed) {
    TensorMap got = planned_outputs(plan, m.inputs, seed);
    std::vector<double> g = got["y"].to_f64(), w = want["y"].to_f64();
    for (size_t i = 0; i < w.size(); ++i) wrong = wrong || !(std::abs(g[i] - w[i]) <= 1e-6);
  }
  EXPECT_TRUE(wrong) << "running consumers before producers went unnoticed";
}

TEST(PlannedRun, ReleasesBuffersAfterLastReaderAndTracksPeak) {
  // A chain of 6 elementwise ops on 64 KB tensors, one tile each: at most two live at once.
  OnnxBuilder b;
  b.input("x", kF32, {1, 16, 32, 32}).output("y", kF32, {1, 16, 32, 32});
  std::string prev = "x";
  for (int i = 0; i < 6; ++i) {
    std::string out = i == 5 ? "y" : "v" + std::to_string(i);
    b.node(i % 2 ? "Sigmoid" : "Relu", {prev}, {out}, "op" + std::to_string(i));
    prev = out;
  }
  Model model = model_from_graph(load_onnx_bytes(b.bytes(), "chain.onnx"));
  TensorMap in{{"x", seeded_tensor({1, 16, 32, 32}, 3)}};
  const int64_t bytes = 16 * 32 * 32 * 4;
  for (int k : {1, 8}) {
    PlannedRun run(make_plan(bound_graph(model), options(k, Schedule::barrier, test_rule)), in);
    run_serial(run, 1);
    EXPECT_EQ(run.peak_activation_bytes(), 2 * bytes) << k;
    EXPECT_EQ(run.activation_bytes(), bytes) << "only the output stays";
    expect_close(run.outputs(), model.run_reference(in), 0.0, "chain");
  }
  // Without barriers, a one-row tile can run ahead: still never more than all six.
  PlannedRun run(make_plan(bound_graph(model), options(32, Schedule::aspen, test_rule)), in);
  run_serial(run, 9);
  EXPECT_LE(run.peak_activation_bytes(), 6 * bytes);
  EXPECT_EQ(run.activation_bytes(), bytes);
}

TEST(PlannedRun, RejectsBadInputsAndEarlyOutputs) {
  TestModel m = residual();
  Model model = load_test_model(m);
  auto plan = make_plan(bound_graph(model), options(2, Schedule::aspen, test_rule));
  EXPECT_THROW(PlannedRun(plan, {}), Error);
  EXPECT_THROW(PlannedRun(plan, {{"x", seeded_tensor({1, 4, 12, 11}, 1)}}), Error);
  EXPECT_THROW(PlannedRun(plan, {{"x", Tensor(DType::i64, {1, 4, 12, 12})}}), Error);
  EXPECT_THROW(PlannedRun(plan, {{"x", seeded_tensor({1, 4, 12, 12}, 1)}, {"nope", Tensor()}}), Error);
  PlannedRun run(plan, m.inputs);
  EXPECT_THROW(run.outputs(), Error);
  const std::string label = run.tile_names()->label(plan->tiles.first_tile[0] + 1);  // "conv1 (Conv+Relu) #1" when fused
  EXPECT_EQ(label.rfind("conv1", 0), 0u) << label;
  EXPECT_EQ(label.substr(label.size() - 3), " #1") << label;
}

TEST(PlannedRun, TileErrorsNameNodeAndOp) {
  static const TileRule failing{test_cut_all, test_elementwise_needs,
                                [](const Node&, std::span<const Tensor* const>, std::span<Tensor* const>,
                                   const Region&, const void*, TileScratch&) { throw Error("kernel exploded"); }};
  TileRuleLookup lookup = [](const Node& n) { return n.op_type == "Add" ? &failing : test_rule(n); };
  TestModel m = residual();
  Model model = load_test_model(m);
  PlannedRun run(make_plan(bound_graph(model), options(2, Schedule::aspen, lookup)), m.inputs);
  try {
    run_serial(run, 1);
    FAIL() << "no error";
  } catch (const Error& e) {
    std::string msg = e.what();
    EXPECT_NE(msg.find("node 'add' (Add)"), std::string::npos) << msg;
    EXPECT_NE(msg.find("kernel exploded"), std::string::npos) << msg;
  }
}
