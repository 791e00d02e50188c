// MT-Graph stages: the staged DAG's gates sit where the pointer matrix says, and a staged
// compound run gives each model the outputs it gives alone.
#include <gtest/gtest.h>

#include "onnx/import.h"
#include "runtime/planned_run.h"
#include "runtime/session.h"
#include "runtime/staged_job.h"
#include "tiny_models.h"

namespace grove {
namespace {

struct Pair {
  Engine engine{{.threads = 2}};
  std::vector<Session> sessions;
  std::vector<TensorMap> inputs;
  std::vector<std::shared_ptr<const Plan>> plans;

  Pair() {
    sessions.emplace_back(engine, model_from_graph(load_onnx_bytes(test::residual_cnn_bytes(), "cnn.onnx")));
    sessions.emplace_back(engine, model_from_graph(load_onnx_bytes(test::transformer_bytes(), "bert.onnx")));
    for (Session& s : sessions) {
      TensorMap in;
      uint32_t seed = 1;
      ShapeMap shapes;
      for (const ValueSpec& v : s.inputs()) {
        Shape shape(v.dims.begin(), v.dims.end());
        std::vector<float> values = test::pseudo_random(static_cast<size_t>(numel(shape)), seed++, 1.0f);
        in[v.name] = Tensor::from<float>(shape, values);
        shapes[v.name] = shape;
      }
      inputs.push_back(in);
      plans.push_back(plan_for(s, shapes));
    }
  }
  int32_t ops(size_t i) const { return static_cast<int32_t>(plans[i]->graph.nodes.size()); }
};

TEST(StagedJob, GatesSitWhereThePointersSay) {
  Pair p;
  PointerMatrix rho = {{2, 5}, {0, p.ops(1)}};
  auto dag = make_staged_dag(p.plans, rho);
  ASSERT_EQ(dag->gates, 2);
  const int32_t total = dag->offset[1] + p.plans[1]->tiles.size();
  const int32_t all = static_cast<int32_t>(dag->n_parents.size());
  // reach[a][b]: b is a descendant of a (the DAG is small).
  std::vector<std::vector<char>> reach(static_cast<size_t>(all), std::vector<char>(static_cast<size_t>(all), 0));
  std::vector<int32_t> order = dag->sources;  // Kahn's order
  std::vector<int32_t> waiting = dag->n_parents;
  for (size_t k = 0; k < order.size(); ++k)
    for (int64_t e = dag->child_begin[order[k]]; e < dag->child_begin[order[k] + 1]; ++e)
      if (--waiting[dag->children[e]] == 0) order.push_back(dag->children[e]);
  ASSERT_EQ(static_cast<int32_t>(order.size()), all) << "not a DAG";
  for (auto it = order.rbegin(); it != order.rend(); ++it)
    for (int64_t e = dag->child_begin[*it]; e < dag->child_begin[*it + 1]; ++e) {
      int32_t c = dag->children[e];
      reach[*it][c] = 1;
      for (int32_t d = 0; d < all; ++d) reach[*it][d] |= reach[c][d];
    }
  int64_t gate_edges = 0;
  for (int32_t t = 0; t < all; ++t)
    for (int64_t e = dag->child_begin[t]; e < dag->child_begin[t + 1]; ++e) gate_edges += t >= total || dag->children[e] >= total;
  for (size_t m = 0; m < 2; ++m) {
    const TileGraph& tg = p.plans[m]->tiles;
    for (int32_t t = 0; t < tg.size(); ++t) {
      int32_t node = tg.node[t], c = dag->offset[m] + t;
      int stage = node < rho[m][0] ? 0 : node < rho[m][1] ? 1 : 2;
      for (int g = 0; g < 2; ++g) {
        // Every tile of stage <= g runs before gate g; every tile of a later stage after it.
        EXPECT_EQ(reach[c][total + g], stage <= g) << "model " << m << " tile " << t << " gate " << g;
        EXPECT_EQ(reach[total + g][c], stage > g) << "model " << m << " tile " << t << " gate " << g;
      }
    }
  }
  EXPECT_TRUE(reach[total][total + 1]);  // gates in a chain
  EXPECT_GT(dag->depth[total + 1], dag->depth[total]);
  // Only stage sinks and sources touch the gates: far fewer edges than tiles.
  EXPECT_LT(gate_edges, total / 2);
}

TEST(StagedJob, StagedRunsEqualRunsAlone) {
  Pair p;
  std::vector<TensorMap> alone = {p.sessions[0].run(p.inputs[0]), p.sessions[1].run(p.inputs[1])};
  for (const PointerMatrix& rho : std::vector<PointerMatrix>{{{p.ops(0)}, {p.ops(1)}},
                                                              {{0}, {0}},
                                                              {{1, p.ops(0) / 2, p.ops(0)}, {1, 2, p.ops(1) - 1}},
                                                              {{p.ops(0), p.ops(0)}, {4, 4}}}) {
    for (StageOrder order : {StageOrder::gates, StageOrder::priority})
    for (int repeat = 0; repeat < 5; ++repeat) {
      auto dag = make_staged_dag(p.plans, rho, order);
      std::vector<std::shared_ptr<PlannedRun>> runs;
      std::vector<std::future<TensorMap>> results;
      for (size_t i = 0; i < 2; ++i) {
        runs.push_back(std::make_shared<PlannedRun>(p.plans[i], p.inputs[i]));
        results.push_back(runs.back()->result());
      }
      run_job(p.engine, std::make_shared<StagedJob>(dag, runs));
      for (size_t i = 0; i < 2; ++i) {
        TensorMap got = results[i].get();
        for (const auto& [name, t] : alone[i])
          EXPECT_EQ(got.at(name).to_f64(), t.to_f64()) << "model " << i << " rho row " << rho[i].size();
      }
    }
  }
}

TEST(StagedJob, PriorityOrderRanksLaterStagesBehindWithoutGates) {
  Pair p;
  PointerMatrix rho = {{2}, {3}};
  auto dag = make_staged_dag(p.plans, rho, StageOrder::priority);
  EXPECT_EQ(dag->gates, 0);
  int32_t deepest_first = -1, shallowest_second = INT32_MAX;
  for (size_t m = 0; m < 2; ++m) {
    const TileGraph& tg = p.plans[m]->tiles;
    EXPECT_EQ(dag->child_begin[dag->offset[m] + tg.size()] - dag->child_begin[dag->offset[m]], tg.edge_count());  // no new edges
    for (int32_t t = 0; t < tg.size(); ++t) {
      int32_t d = dag->depth[dag->offset[m] + t];
      if (tg.node[t] < rho[m][0]) deepest_first = std::max(deepest_first, d);
      else shallowest_second = std::min(shallowest_second, d);
    }
  }
  EXPECT_LT(deepest_first, shallowest_second);
}

TEST(StagedJob, BadPointerMatricesAreErrors) {
  Pair p;
  EXPECT_THROW(make_staged_dag(p.plans, {{1}}), Error);
  EXPECT_THROW(make_staged_dag(p.plans, {{1}, {1, 2}}), Error);
  EXPECT_THROW(make_staged_dag(p.plans, {{3, 2}, {1, 2}}), Error);
  EXPECT_THROW(make_staged_dag(p.plans, {{-1}, {0}}), Error);
  EXPECT_THROW(make_staged_dag(p.plans, {{p.ops(0) + 1}, {0}}), Error);
}

}  // namespace
}  // namespace grove
