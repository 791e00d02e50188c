#pragma once
// A Session runs one model on an Engine. It plans the model once per set of input shapes (the
// plan's tile graph is immutable and shared by every run) and runs each inference as a job on
// the Engine, so runs of one model or of several co-execute in the one ready pool.
#include <future>
#include <memory>

#include "grove/buffer_stats.h"
#include "grove/cancel.h"
#include "grove/engine.h"
#include "grove/model.h"
#include "grove/layout.h"
#include "grove/precision.h"
#include "grove/schedule.h"
#include "grove/tensor.h"
#include "grove/tuning.h"

namespace grove {

struct RunStats {
  // The most activation memory the run held at once. A run in segments (control flow) counts
  // the values kept between its steps plus each step's own peak, step by step; one on the
  // reference executor its inputs and live values, node by node.
  int64_t peak_activation_bytes = 0;
  bool used_reference = false;  // the model's shapes depend on input values: reference executor
  // A model with If, Loop or Scan runs in segments, each its own planned job: how many ran
  // (a Loop's body counts once per iteration). 0 for a model without control flow.
  int64_t segment_runs = 0;
};

struct SessionOptions {
  Schedule schedule = Schedule::aspen;
  int tiles_per_op = 0;  // 0: by rule
  // The cores the tiles are cut for; 0: the engine's max_threads() (its threads, unless it is
  // elastic). grove simulate runs the plan for N cores on a one-thread engine to time each
  // of its tiles alone.
  int plan_threads = 0;
  TileCounts tile_counts = TileCounts::tail_aware;  // when tiles_per_op is 0 (grove/schedule.h)
  int cached_plans = 8;  // plans kept for the input shapes seen last (each with its buffer pool)
  // bf16: Conv/MatMul/Gemm products in bfloat16 where the CPU has AVX512-BF16 (fp32 otherwise;
  // the plan's precision report says which). See grove/precision.h.
  Precision precision = Precision::fp32;
  // channels_last: float convs on NHWC activations where the rule takes them; nchw: as written
  // (grove/layout.h).
  ConvLayout conv_layout = ConvLayout::channels_last;
  // The runs' tiles go ahead of other runs' in the engine's ready pool: for a model under a
  // latency target beside batch work (docs/dynamic.md).
  bool urgent = false;
  // Dynamic feature-map pruning (docs/dynamic.md, Antidote): "" follows the model's
  // `grove.antidote` metadata (none without it), "off" prunes nothing, anything else is
  // statements in that format ("prune VALUE channels=R positions=R", one per line).
  std::string feature_pruning;
  // Tuning records (docs/tuning.md): "auto" plans with the record `grove tune` wrote for this
  // model, machine, thread count and precision when there is one (a record that does not fit
  // is ignored, and the plan says why), else with a performance model's choices, which are
  // tried against the rules' plan before the first run of each input shape, the verdict kept
  // as this machine's record of the model (so every later process plans alike); "model"
  // takes a performance model's choices untried; "record" only a record; "off" plans by the
  // rules; anything else is the path of a record to use, and one that does not fit is an Error.
  std::string tuning = "auto";
  // A tile that streams weights (a decode step's products) runs in pieces that an idle core
  // can join, so a core slower than the others does not hold half of every op
  // (docs/runtime.md); false runs every tile whole, for comparisons.
  bool tile_pieces = true;
  // A plan so small that handing its tiles between cores costs more than they take runs on
  // run()'s calling thread alone, none of its tiles through the engine's pool (a tiny model,
  // a control-flow model's small segments; docs/runtime.md): "auto" learns which way is
  // faster from each small plan's first runs (alone and shared in turns, timed) and keeps
  // it; "on" always alone; "off" never. submit() always shares its tiles.
  std::string run_alone = "auto";
  // Explicit per-node choices (for tools, such as grove tune's profiler); no record is read.
  std::vector<NodeChoice> choices;
};

class Session {
 public:
  // The engine must outlive the session. Destroying (or assigning over) a session waits for
  // its submitted runs that still read it (control flow, the reference path: each runs on a
  // thread the session owns and joins); their futures stay valid. Such a run given a
  // CancelToken with a deadline stops at it, so the wait is bounded by the runs' deadlines.
  Session(Engine& engine, Model model, SessionOptions options = {});
  static Session load(Engine& engine, const std::string& path, SessionOptions options = {}) {
    return Session(engine, Model::load(path), options);
  }
  Session(Session&&) noexcept;
  Session& operator=(Session&&) noexcept;
  ~Session();

  // Runs one inference on the engine and waits for it; the calling thread works on the
  // tiles meanwhile. Thread-safe. Throws Error for wrong inputs, a failing tile (naming the
  // node and op) or running out of memory; other runs on the engine are not affected.
  // Once `cancel` stops (its deadline passes, or cancel() is called from another thread), the
  // run's tiles not yet started are skipped, its segments and Loop iterations not yet started
  // do not start, and it throws an Error of kind `cancelled` (grove/cancel.h).
  TensorMap run(const TensorMap& inputs, RunStats* stats = nullptr, const CancelToken& cancel = {});
  // The same for models whose inputs or outputs are sequences or optionals (grove/value.h).
  // Sequence ops run between planned segments, as If and Loop do (docs/control-flow.md).
  ValueMap run_values(const ValueMap& inputs, RunStats* stats = nullptr, const CancelToken& cancel = {});

  // Starts one inference; get() on the future waits and returns the outputs (or throws).
  // The worker that finishes the run fulfils the future: no thread per request (but for
  // control flow and the reference path). `cancel` as for run(): the future is ready once
  // the run has really stopped (no tile of it runs any more), holding the cancelled Error.
  std::future<TensorMap> submit(TensorMap inputs, CancelToken cancel = {});

  std::vector<ValueSpec> inputs() const { return model().inputs(); }
  std::vector<ValueSpec> outputs() const { return model().outputs(); }
  Model& model();
  const Model& model() const;
  Engine& engine() const;
  const SessionOptions& options() const;

  // The activation buffers kept for the runs of the plan used last, and a way to give the
  // free ones (of every cached plan) back to the OS while the model is idle.
  BufferStats buffer_stats();
  void release_free_buffers();

 private:
  // The library's own access (src/runtime/session.h): the plan for given shapes, and sessions
  // with test switches. Not part of the API.
  friend struct SessionInternals;
  struct Impl;
  explicit Session(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace grove
