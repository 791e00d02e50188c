// Failure isolation: a tile that throws (an Error, or bad_alloc standing in for running out of
// memory) fails only its own run; the other runs in the engine's pool at the same time finish
// with the same outputs as a run alone, and the engine stays usable. Named PlannedRun* so the TSan +
// adversarial stage of scripts/test.sh runs it too.
#include <new>

#include "plan_test_util.h"
#include "runtime/engine.h"

using namespace grove;
using namespace grove::test;

namespace {

std::shared_ptr<const Plan> plan_with(const Graph& g, TileRuleLookup rules) {
  PlanOptions o;
  o.tiles_per_op = 3;
  o.debug.rule_lookup = std::move(rules);
  return make_plan(g, o);
}

void exploding(const Node&, std::span<const Tensor* const>, std::span<Tensor* const>, const Region&, const void*, TileScratch&) {
  throw Error("kernel exploded");
}
void out_of_memory(const Node&, std::span<const Tensor* const>, std::span<Tensor* const>, const Region&, const void*, TileScratch&) {
  throw std::bad_alloc();
}

}  // namespace

TEST(PlannedRun, FailingTileFailsOnlyItsRunUnderLoad) {
  static const TileRule explode{test_cut_all, test_elementwise_needs, exploding};
  static const TileRule oom{test_cut_all, test_elementwise_needs, out_of_memory};
  TestModel m = residual();
  Model model = load_test_model(m);
  const TensorMap want = model.run_reference(m.inputs);
  // The built-in rules (the test rules compute whole nodes, which races under real workers).
  auto good = plan_with(bound_graph(model), find_tile_rule);
  auto bad = plan_with(bound_graph(model), [](const Node& n) { return n.op_type == "Add" ? &explode : find_tile_rule(n); });
  auto no_memory = plan_with(bound_graph(model), [](const Node& n) { return n.op_type == "Add" ? &oom : find_tile_rule(n); });

  for (int threads : {1, 3}) {
    Engine engine({.threads = threads, .pin = false});
    // One good run alone first: every good run under load must match it bit for bit.
    auto alone = std::make_shared<PlannedRun>(good, m.inputs);
    run_job(engine, alone);
    const TensorMap first = alone->outputs();
    expect_close(first, want, 1e-5, "alone");
    // Every run is in flight at once: failing ones share the pool with good ones.
    constexpr int kRuns = 60;
    std::vector<std::shared_ptr<PlannedRun>> runs;
    std::vector<std::future<TensorMap>> results;
    for (int i = 0; i < kRuns; ++i) {
      auto plan = i % 6 == 1 ? bad : i % 6 == 4 ? no_memory : good;
      runs.push_back(std::make_shared<PlannedRun>(plan, m.inputs, PlannedRunOptions{.poison_buffers = true}));
      results.push_back(runs.back()->result());
      submit_job(engine, runs.back());
    }
    for (int i = 0; i < kRuns; ++i) {
      const std::string what = "run " + std::to_string(i) + " at " + std::to_string(threads) + " threads";
      if (i % 6 == 1 || i % 6 == 4) {
        try {
          results[i].get();
          ADD_FAILURE() << what << ": the failing run succeeded";
        } catch (const Error& e) {
          const std::string msg = e.what();
          EXPECT_NE(msg.find("(Add)"), std::string::npos) << what << ": " << msg;
          EXPECT_NE(msg.find(i % 6 == 1 ? "kernel exploded" : "out of memory"), std::string::npos) << what << ": " << msg;
        }
      } else {
        expect_close(results[i].get(), first, 0.0, what);
      }
    }
    // The engine carries on after the failures.
    auto after = std::make_shared<PlannedRun>(good, m.inputs);
    run_job(engine, after);
    expect_close(after->outputs(), first, 0.0, "after the failures");
  }
}
