#pragma once
// One inference of a Plan as an Engine Job: per-run buffers and counters over the shared,
// immutable TileGraph. A value's buffer is allocated when the first tile touching it starts
// and released when its last consumer tile and every producer tile have finished (graph
// outputs are kept). A view (PlannedValue::view_of) shares its base's buffer and holds one
// use of the base until the view is released. Current and peak activation bytes are tracked.
#include <atomic>
#include <cstdint>
#include <future>
#include <memory>
#include <mutex>
#include <vector>

#include "plan/plan.h"
#include "runtime/buffer_pool.h"
#include "runtime/engine.h"
#include "ops/tile_scratch.h"
#include "runtime/reference_executor.h"

namespace grove {

struct PlannedRunOptions {
  // Fill the outputs of tiled ops with NaN (float) or junk (integers) instead of zeros, so a
  // tile that reads data no parent wrote shows up in tests as a wrong result.
  bool poison_buffers = false;
  // Where activation buffers come from: a pool kept across runs (Session keeps one per plan),
  // or, when null, the heap for this run only.
  std::shared_ptr<BufferPool> buffers;
  // The tile rules' working memory, one TileScratch per worker slot: kept across runs (Session
  // keeps one, sized to its engine's worker_slots()), or, when null, made for this run only
  // with kOwnScratchSlots slots.
  std::shared_ptr<WorkerScratch> scratch;
  bool urgent = false;  // Job::urgent(): SessionOptions::urgent
  bool alone = false;   // Job::alone(): the session's measure of the plan (SessionOptions::run_alone)
  CancelToken cancel;   // Job::cancel_token(): the run's, from Session::run or submit
};

class PlannedRun : public Job {
 public:
  static constexpr size_t kOwnScratchSlots = 64;

  // Checks `inputs` against the plan's bound inputs (name, dtype, shape); throws Error otherwise.
  PlannedRun(std::shared_ptr<const Plan> plan, TensorMap inputs, PlannedRunOptions options = {});
  ~PlannedRun() override;

  DagView dag() const override;
  void run_tile(int32_t tile, int worker) override;
  int pieces(int32_t tile) const override;
  void begin_pieces(int32_t tile, int worker) override;
  void run_pieces(int32_t tile, int first, int end, int pieces, int worker) override;
  void end_pieces(int32_t tile, int worker) override;
  std::shared_ptr<const TileNames> tile_names() const override;

  // The graph outputs by name; throws if some tile has not run.
  TensorMap outputs() const;

  // The outputs (or the first tile's error) once the job finishes: Session::submit's future,
  // fulfilled by the worker that runs the last tile. Call before submitting, at most once.
  std::future<TensorMap> result();
  void finished(std::exception_ptr error) noexcept override;
  bool urgent() const override { return options_.urgent; }
  bool alone() const override { return options_.alone; }
  CancelToken cancel_token() const override { return options_.cancel; }

  int64_t activation_bytes() const { return current_bytes_.load(std::memory_order_relaxed); }
  int64_t peak_activation_bytes() const { return peak_bytes_.load(std::memory_order_relaxed); }
  const Plan& plan() const { return *plan_; }

 private:
  // A slot's buffer: kEmpty, then kAllocating by the one tile that won it, then kAllocated.
  // Not std::call_once: glibc's makes a futex syscall for every slot of every run.
  enum : int8_t { kEmpty, kAllocating, kAllocated };
  struct Slot {
    std::atomic<int8_t> state{kEmpty};
    Tensor tensor;
    std::atomic<int32_t> users{0};  // tiles still to read or write it
  };

  void allocate(int32_t value);
  void fill(int32_t value);
  void release_use(int32_t value);
  void run_node_tile(int32_t node, int32_t tile, TileScratch& scratch);
  // run_node_tile in three steps: the node's values allocated (false: a view or gathered node,
  // already done), its rule (or reference) run over `region`, its uses released.
  bool take_operands(int32_t node);
  void compute(int32_t node, const Region& region, TileScratch& scratch);
  void release_operands(int32_t node);

  std::shared_ptr<const Plan> plan_;
  PlannedRunOptions options_;
  std::unique_ptr<Slot[]> slots_;
  std::atomic<int64_t> current_bytes_{0};
  std::atomic<int64_t> peak_bytes_{0};
  std::atomic<int32_t> tiles_done_{0};
  std::promise<TensorMap> result_;
  bool result_wanted_ = false;
};

}  // namespace grove
