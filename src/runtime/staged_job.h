#pragma once
// MT-Graph stages (thesis 004, chapter 4.1) over grove's tile DAGs: several runs (a compound
// task of N models) submitted as one Job whose DAG is theirs side by side plus one gate tile
// per stage boundary. A pointer matrix rho[N][P] cuts each model's op sequence (the plan's
// topological node order) into P + 1 stages: stage s of model i holds its nodes n with
// rho[i][s-1] <= n < rho[i][s]. Gate s waits for every tile of stage s of every model (and gate
// s-1) and releases every tile of stage s+1 (through direct edges from the stage's sinks and to
// the next stage's sources), so a stage must finish before the next starts;
// inside a stage the models' tiles share the ready pool as usual. Pointers at the end of every
// sequence give one stage: plain co-execution.
#include <memory>
#include <vector>

#include "runtime/planned_run.h"

namespace grove {

using PointerMatrix = std::vector<std::vector<int32_t>>;  // [model][pointer], each row nondecreasing

// How a stage waits for the one before it: `gates` (the thesis's synchronisation barriers) or
// `priority`, the softer variant: no gates, but a later stage's tiles rank behind every earlier
// stage's in the ready pool, so they run only when no earlier tile is ready.
enum class StageOrder { gates, priority };

// The combined tile DAG for `plans` (aspen schedule) under `rho`: built once per pointer
// matrix, shared by every run of it. Throws Error for a malformed rho.
struct StagedDag {
  std::vector<int32_t> offset;  // first combined tile of each model; gates follow the last model
  int32_t gates = 0;
  std::vector<int32_t> n_parents, depth, sources, children;
  std::vector<int64_t> child_begin;
};
std::shared_ptr<const StagedDag> make_staged_dag(const std::vector<std::shared_ptr<const Plan>>& plans, const PointerMatrix& rho,
                                                StageOrder order = StageOrder::gates);

class StagedJob : public Job {
 public:
  // One run per plan, in the same order as make_staged_dag's plans; `cancel` stops the whole
  // compound task (a server gives it the latest of its requests' deadlines).
  StagedJob(std::shared_ptr<const StagedDag> dag, std::vector<std::shared_ptr<PlannedRun>> runs, CancelToken cancel = {});

  DagView dag() const override;
  void run_tile(int32_t tile, int worker) override;
  int pieces(int32_t tile) const override;
  void begin_pieces(int32_t tile, int worker) override;
  void run_pieces(int32_t tile, int first, int end, int pieces, int worker) override;
  void end_pieces(int32_t tile, int worker) override;
  std::shared_ptr<const TileNames> tile_names() const override;
  void finished(std::exception_ptr error) noexcept override;
  CancelToken cancel_token() const override { return cancel_; }

 private:
  // The model owning combined tile `tile`, or -1 for a gate.
  int model_of(int32_t tile) const;

  std::shared_ptr<const StagedDag> dag_;
  std::vector<std::shared_ptr<PlannedRun>> runs_;
  CancelToken cancel_;
};

}  // namespace grove
