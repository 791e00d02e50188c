// The schedule simulator (src/sim): exact makespans on small graphs with known tile times,
// the bandwidth and pool-cost models, and the tile costs taken from a real plan.
#include <gtest/gtest.h>

#include <numeric>

#include "graph/error.h"
#include "onnx/import.h"
#include "runtime/session.h"
#include "sim/simulator.h"
#include "sim/tile_costs.h"
#include "tiny_models.h"

namespace grove {
namespace {

// A TileGraph of `n` tiles with the given parent -> child edges (no nodes or regions: the
// simulator reads only the DAG).
TileGraph dag(int32_t n, const std::vector<std::pair<int32_t, int32_t>>& edges) {
  TileGraph g;
  g.node.assign(static_cast<size_t>(n), -1);
  g.region.resize(static_cast<size_t>(n));
  g.n_parents.assign(static_cast<size_t>(n), 0);
  g.depth.assign(static_cast<size_t>(n), 0);
  std::vector<std::vector<int32_t>> kids(static_cast<size_t>(n));
  for (auto [p, c] : edges) {
    kids[static_cast<size_t>(p)].push_back(c);
    ++g.n_parents[static_cast<size_t>(c)];
  }
  g.child_begin.push_back(0);
  for (int32_t t = 0; t < n; ++t) {  // tiles are numbered in topological order here
    for (int32_t c : kids[static_cast<size_t>(t)]) {
      g.children.push_back(c);
      g.depth[static_cast<size_t>(c)] = std::max(g.depth[static_cast<size_t>(c)], g.depth[static_cast<size_t>(t)] + 1);
    }
    g.child_begin.push_back(static_cast<int64_t>(g.children.size()));
    if (g.n_parents[static_cast<size_t>(t)] == 0) g.sources.push_back(t);
  }
  return g;
}

SimMachine free_machine(int cores) {
  SimMachine m;
  m.cores = cores;
  return m;
}

TEST(Simulator, ReadingAnotherCoresOutputCostsItsShareOfTheInput) {
  // Sources a (100 ns) and b (300 ns) start on cores 0 and 1; their child c (100 ns, 1000
  // input bytes) follows b on core 1 and reads half its input from core 0: 0.5 x 1000 x
  // 0.01 ns. On one core, or with no price, nothing is added.
  TileGraph g = dag(3, {{0, 2}, {1, 2}});
  std::vector<double> ns = {100, 300, 100}, input = {0, 0, 1000};
  SimMachine m = free_machine(2);
  m.cross_ns_per_byte = 0.01;
  SimResult r = simulate(g, ns, {}, m, input);
  EXPECT_DOUBLE_EQ(r.makespan_ns, 405);
  EXPECT_DOUBLE_EQ(r.cross_ns, 5);
  EXPECT_DOUBLE_EQ(simulate(g, ns, {}, free_machine(2), input).makespan_ns, 400);
  m.cores = 1;
  EXPECT_DOUBLE_EQ(simulate(g, ns, {}, m, input).makespan_ns, 500);
  // Through a no-work tile (a barrier): d after the barrier reads what a and b wrote.
  TileGraph barrier = dag(4, {{0, 2}, {1, 2}, {2, 3}});
  std::vector<double> bns = {100, 300, 0, 100}, binput = {0, 0, 0, 1000};
  m.cores = 2;
  EXPECT_DOUBLE_EQ(simulate(barrier, bns, {}, m, binput).makespan_ns, 405);
  EXPECT_THROW(simulate(g, ns, {}, m, std::vector<double>{1.0}), Error);
}

TEST(Simulator, ForkJoinMakespanIsTheCriticalPathOnEnoughCores) {
  // a -> {b, c} -> d with times 1, 2, 3, 4.
  TileGraph g = dag(4, {{0, 1}, {0, 2}, {1, 3}, {2, 3}});
  std::vector<double> ns = {1, 2, 3, 4};
  EXPECT_DOUBLE_EQ(simulate(g, ns, {}, free_machine(1)).makespan_ns, 10);
  SimResult two = simulate(g, ns, {}, free_machine(2));
  EXPECT_DOUBLE_EQ(two.makespan_ns, 8);
  EXPECT_DOUBLE_EQ(two.tile_ns, 10);
  EXPECT_EQ(two.follows, 2);  // a follows b, c's core follows d (the last parent to finish)
  EXPECT_EQ(two.steals, 1);   // the other core takes c from a's row
  EXPECT_DOUBLE_EQ(simulate(g, ns, {}, free_machine(8)).makespan_ns, 8);
}

TEST(Simulator, IndependentTilesFillWholeWaves) {
  // TA-DNN's staircase: B equal tiles on S cores take ceil(B / S) waves.
  TileGraph g = dag(6, {});
  std::vector<double> ns(6, 5.0);
  EXPECT_DOUBLE_EQ(simulate(g, ns, {}, free_machine(2)).makespan_ns, 15);
  EXPECT_DOUBLE_EQ(simulate(g, ns, {}, free_machine(4)).makespan_ns, 10);
  EXPECT_DOUBLE_EQ(simulate(g, ns, {}, free_machine(5)).makespan_ns, 10);
  EXPECT_DOUBLE_EQ(simulate(g, ns, {}, free_machine(6)).makespan_ns, 5);
}

TEST(Simulator, SharedBandwidthStretchesTilesThatTogetherAskForMore) {
  TileGraph g = dag(2, {});
  std::vector<double> ns = {10, 10}, bytes = {100, 100};  // 10 bytes/ns each
  SimMachine m = free_machine(2);
  m.bandwidth_bytes_per_ns = 20;
  EXPECT_DOUBLE_EQ(simulate(g, ns, bytes, m).makespan_ns, 10);
  m.bandwidth_bytes_per_ns = 10;  // half of what both ask: both at half speed
  SimResult r = simulate(g, ns, bytes, m);
  EXPECT_DOUBLE_EQ(r.makespan_ns, 20);
  EXPECT_DOUBLE_EQ(r.stretch_ns, 20);
  m.cores = 1;  // alone, each tile gets what it asks
  EXPECT_DOUBLE_EQ(simulate(g, ns, bytes, m).makespan_ns, 20);
}

TEST(Simulator, PoolOperationsCostTheirMeasuredTime) {
  // a -> {b, c} on one core: pop a, run it, push c while following b, then pop c.
  TileGraph g = dag(3, {{0, 1}, {0, 2}});
  std::vector<double> ns = {1, 2, 3};
  SimMachine m = free_machine(1);
  m.pop_ns = 3;
  m.push_ns = 2;
  SimResult r = simulate(g, ns, {}, m);
  EXPECT_DOUBLE_EQ(r.makespan_ns, 3 + 1 + 2 + 2 + 3 + 3);
  EXPECT_DOUBLE_EQ(r.pool_ns, 8);
  // A parked second core pays the wake-up before its first tile.
  TileGraph pair = dag(2, {});
  m = free_machine(2);
  m.wake_ns = 7;
  EXPECT_DOUBLE_EQ(simulate(pair, {4, 4}, {}, m).makespan_ns, 11);
}

TEST(Simulator, FastCoresTakeMoreTilesFromASlowOne) {
  // 4 tiles on 2 cores, core 0 three times slower: it runs one tile while core 1 runs three.
  TileGraph g = dag(4, {});
  SimMachine m = free_machine(2);
  m.slow_cores = 1;
  m.slow_factor = 3;
  SimResult r = simulate(g, {5, 5, 5, 5}, {}, m);
  EXPECT_DOUBLE_EQ(r.makespan_ns, 15);
  EXPECT_EQ(r.steals, 1);
}

TEST(Simulator, BadInputIsAnError) {
  TileGraph g = dag(2, {{0, 1}});
  EXPECT_THROW(simulate(g, {1}, {}, free_machine(1)), Error);
  g.n_parents[1] = 2;  // a parent that never comes
  EXPECT_THROW(simulate(g, {1, 1}, {}, free_machine(1)), Error);
  EXPECT_THROW(simulate(g, {1, 1}, {}, free_machine(0)), Error);
}

TEST(Simulator, RealPlanOnOneCoreTakesTheSumOfItsTiles) {
  Engine engine({.threads = 1});
  Session session(engine, model_from_graph(load_onnx_bytes(test::residual_cnn_bytes(), "cnn.onnx")),
                  SessionOptions{.tiles_per_op = 4, .plan_threads = 4});
  TensorMap inputs{{"x", Tensor::from<float>({1, 8, 16, 16}, std::vector<float>(8 * 16 * 16, 0.5f))}};
  session.run(inputs);
  std::vector<double> ns = time_tiles_alone(engine, session, inputs, 3);
  auto plan = plan_for(session, {{"x", {1, 8, 16, 16}}});
  ASSERT_TRUE(plan);
  ASSERT_EQ(ns.size(), static_cast<size_t>(plan->tiles.size()));
  for (double t : ns) EXPECT_GE(t, 0);
  double sum = std::accumulate(ns.begin(), ns.end(), 0.0);
  EXPECT_NEAR(simulate(plan->tiles, ns, {}, free_machine(1)).makespan_ns, sum, sum * 1e-12);
  EXPECT_LT(simulate(plan->tiles, ns, {}, free_machine(4)).makespan_ns, sum);

  // Each node's tiles share its bytes by output elements; barrier tiles move none.
  std::vector<double> bytes = tile_traffic_bytes(*plan);
  ASSERT_EQ(bytes.size(), ns.size());
  for (size_t n = 0; n < plan->graph.nodes.size(); ++n) {
    double sum_node = 0;
    for (int32_t k = 0; k < plan->tiles.tile_count[n]; ++k) sum_node += bytes[static_cast<size_t>(plan->tiles.first_tile[n] + k)];
    EXPECT_GT(sum_node, 0) << plan->graph.nodes[n].describe();
  }

  Engine two({.threads = 2});
  Session elsewhere(two, model_from_graph(load_onnx_bytes(test::residual_cnn_bytes(), "cnn.onnx")));
  EXPECT_THROW(time_tiles_alone(two, elsewhere, inputs, 1), Error);
}

}  // namespace
}  // namespace grove
