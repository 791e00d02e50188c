#include "runtime/staged_job.h"

#include <algorithm>

namespace grove {

std::shared_ptr<const StagedDag> make_staged_dag(const std::vector<std::shared_ptr<const Plan>>& plans, const PointerMatrix& rho,
                                                StageOrder order) {
  if (plans.empty() || rho.size() != plans.size()) throw Error("MT-Graph: one pointer row per model is needed");
  const size_t pointers = rho[0].size();
  auto dag = std::make_shared<StagedDag>();
  int32_t total = 0;
  for (size_t i = 0; i < plans.size(); ++i) {
    const Plan& p = *plans[i];
    if (p.options.schedule != Schedule::aspen) throw Error("MT-Graph: stages are built on the barrier-free schedule");
    if (rho[i].size() != pointers) throw Error("MT-Graph: every model needs the same number of pointers");
    const int32_t nodes = static_cast<int32_t>(p.graph.nodes.size());
    for (size_t k = 0; k < pointers; ++k)
      if (rho[i][k] < 0 || rho[i][k] > nodes || (k && rho[i][k] < rho[i][k - 1]))
        throw Error("MT-Graph: pointers of model " + std::to_string(i) + " must be nondecreasing node positions in [0, " +
                    std::to_string(nodes) + "]");
    dag->offset.push_back(total);
    total += p.tiles.size();
  }
  const bool gated = order == StageOrder::gates;
  dag->gates = gated ? static_cast<int32_t>(pointers) : 0;
  const int32_t all = total + dag->gates;
  std::vector<std::vector<int32_t>> out(static_cast<size_t>(all));
  auto stage_of = [&](size_t i, int32_t node) {
    return static_cast<int32_t>(std::upper_bound(rho[i].begin(), rho[i].end(), node) - rho[i].begin());
  };
  // Gate edges only where needed: a tile with a child in its own stage reaches the stage's gate
  // through that child, and a tile with a parent in its own stage is released through that
  // parent. So only a stage's sinks feed its gate and only its sources wait on the previous
  // gate, which keeps the gates' counters from being a point every tile contends on.
  std::vector<int32_t> stage_of_tile(static_cast<size_t>(total), 0);
  for (size_t i = 0; i < plans.size(); ++i) {
    const TileGraph& tg = plans[i]->tiles;
    const int32_t base = dag->offset[i];
    std::vector<int32_t> stage(static_cast<size_t>(tg.size()));
    for (int32_t t = 0; t < tg.size(); ++t) {
      stage[static_cast<size_t>(t)] = stage_of(i, tg.node[static_cast<size_t>(t)]);
      stage_of_tile[static_cast<size_t>(base + t)] = stage[static_cast<size_t>(t)];
    }
    std::vector<char> parent_in_stage(static_cast<size_t>(tg.size()), 0);
    for (int32_t t = 0; t < tg.size(); ++t) {
      auto& children = out[static_cast<size_t>(base + t)];
      bool child_in_stage = false;
      for (int64_t e = tg.child_begin[static_cast<size_t>(t)]; e < tg.child_begin[static_cast<size_t>(t) + 1]; ++e) {
        const int32_t c = tg.children[static_cast<size_t>(e)];
        children.push_back(base + c);
        if (stage[static_cast<size_t>(c)] == stage[static_cast<size_t>(t)]) {
          child_in_stage = true;
          parent_in_stage[static_cast<size_t>(c)] = 1;
        }
      }
      if (!child_in_stage && stage[static_cast<size_t>(t)] < dag->gates) children.push_back(total + stage[static_cast<size_t>(t)]);
    }
    for (int32_t t = 0; t < tg.size() && gated; ++t)
      if (stage[static_cast<size_t>(t)] > 0 && !parent_in_stage[static_cast<size_t>(t)])
        out[static_cast<size_t>(total + stage[static_cast<size_t>(t)] - 1)].push_back(base + t);
  }
  for (int32_t g = 1; g < dag->gates; ++g) out[static_cast<size_t>(total + g - 1)].push_back(total + g);

  dag->n_parents.assign(static_cast<size_t>(all), 0);
  dag->child_begin.assign(static_cast<size_t>(all) + 1, 0);
  for (int32_t t = 0; t < all; ++t) {
    dag->child_begin[static_cast<size_t>(t) + 1] = dag->child_begin[static_cast<size_t>(t)] + static_cast<int64_t>(out[static_cast<size_t>(t)].size());
    for (int32_t c : out[static_cast<size_t>(t)]) {
      dag->children.push_back(c);
      ++dag->n_parents[static_cast<size_t>(c)];
    }
  }
  // Depth (the pool's priority): longest path from a source, by Kahn's order.
  dag->depth.assign(static_cast<size_t>(all), 0);
  std::vector<int32_t> waiting = dag->n_parents, ready;
  for (int32_t t = 0; t < all; ++t)
    if (waiting[static_cast<size_t>(t)] == 0) {
      dag->sources.push_back(t);
      ready.push_back(t);
    }
  for (size_t k = 0; k < ready.size(); ++k) {
    const int32_t t = ready[k];
    for (int32_t c : out[static_cast<size_t>(t)]) {
      dag->depth[static_cast<size_t>(c)] = std::max(dag->depth[static_cast<size_t>(c)], dag->depth[static_cast<size_t>(t)] + 1);
      if (--waiting[static_cast<size_t>(c)] == 0) ready.push_back(c);
    }
  }
  if (!gated) {
    // No gates: a later stage only ranks behind an earlier one in the pool (its depth is
    // pushed past every depth of the stages before it).
    int32_t span = 0;
    for (int32_t d : dag->depth) span = std::max(span, d + 1);
    for (int32_t t = 0; t < total; ++t) dag->depth[static_cast<size_t>(t)] += stage_of_tile[static_cast<size_t>(t)] * span;
  }
  return dag;
}

StagedJob::StagedJob(std::shared_ptr<const StagedDag> dag, std::vector<std::shared_ptr<PlannedRun>> runs, CancelToken cancel)
    : dag_(std::move(dag)), runs_(std::move(runs)), cancel_(std::move(cancel)) {
  if (runs_.size() != dag_->offset.size()) throw Error("MT-Graph: one run per model of the staged DAG is needed");
}

DagView StagedJob::dag() const {
  return {dag_->n_parents, dag_->child_begin, dag_->children, dag_->depth, dag_->sources, {}};  // no places
}

namespace {
// The model owning combined tile `tile` of `dag`, or -1 for a gate.
int model_of(const StagedDag& dag, int32_t tile) {
  const int32_t gates_start = static_cast<int32_t>(dag.n_parents.size()) - dag.gates;
  if (tile >= gates_start) return -1;
  return static_cast<int>(std::upper_bound(dag.offset.begin(), dag.offset.end(), tile) - dag.offset.begin()) - 1;
}

// A staged DAG's tiles: "m1 conv1 #3" by the model's own names, "stage gate" for the gates.
class StagedTileNames : public TileNames {
 public:
  StagedTileNames(std::shared_ptr<const StagedDag> dag, std::vector<std::shared_ptr<const TileNames>> models)
      : dag_(std::move(dag)), models_(std::move(models)) {}
  std::string label(int32_t tile) const override {
    const int m = model_of(*dag_, tile);
    if (m < 0) return "stage gate";
    return "m" + std::to_string(m) + " " + models_.at(static_cast<size_t>(m))->label(tile - dag_->offset[static_cast<size_t>(m)]);
  }
  int32_t depth(int32_t tile) const override { return dag_->depth.at(static_cast<size_t>(tile)); }

 private:
  std::shared_ptr<const StagedDag> dag_;
  std::vector<std::shared_ptr<const TileNames>> models_;
};
}  // namespace

int StagedJob::model_of(int32_t tile) const { return grove::model_of(*dag_, tile); }

void StagedJob::run_tile(int32_t tile, int worker) {
  int m = model_of(tile);
  if (m >= 0) runs_[static_cast<size_t>(m)]->run_tile(tile - dag_->offset[static_cast<size_t>(m)], worker);
}

// Pieces go to the model's run, as tiles do; a stage gate has none.
int StagedJob::pieces(int32_t tile) const {
  const int m = model_of(tile);
  return m < 0 ? 1 : runs_[static_cast<size_t>(m)]->pieces(tile - dag_->offset[static_cast<size_t>(m)]);
}

void StagedJob::begin_pieces(int32_t tile, int worker) {
  const int m = model_of(tile);
  runs_[static_cast<size_t>(m)]->begin_pieces(tile - dag_->offset[static_cast<size_t>(m)], worker);
}

void StagedJob::run_pieces(int32_t tile, int first, int end, int pieces, int worker) {
  const int m = model_of(tile);
  runs_[static_cast<size_t>(m)]->run_pieces(tile - dag_->offset[static_cast<size_t>(m)], first, end, pieces, worker);
}

void StagedJob::end_pieces(int32_t tile, int worker) {
  const int m = model_of(tile);
  runs_[static_cast<size_t>(m)]->end_pieces(tile - dag_->offset[static_cast<size_t>(m)], worker);
}

std::shared_ptr<const TileNames> StagedJob::tile_names() const {
  std::vector<std::shared_ptr<const TileNames>> models;
  for (const auto& run : runs_) models.push_back(run->tile_names());
  return std::make_shared<StagedTileNames>(dag_, std::move(models));
}

void StagedJob::finished(std::exception_ptr error) noexcept {
  for (auto& run : runs_) run->finished(error);
}

}  // namespace grove
