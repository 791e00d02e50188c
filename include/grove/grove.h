#pragma once
// grove's public C++ API.
//
//   grove::Engine engine({.threads = 2});                 // one worker per core, shared by all runs
//   grove::Session s(engine, grove::Model::load("resnet.onnx"));
//   grove::TensorMap out = s.run({{"input", image}});     // blocking
//   auto pending = s.submit({{"input", image}});          // concurrent with other submits
//   grove::TensorMap later = pending.get();
//
// A Session plans its model once per set of input shapes (the TileGraph is immutable and
// shared by every run) and runs each inference as a Job on the Engine, so runs of one model
// or of several models co-execute in the one ready pool.
#include <future>
#include <memory>
#include <mutex>

#include "graph/bind.h"
#include "plan/plan.h"
#include "runtime/buffer_pool.h"
#include "runtime/engine.h"
#include "runtime/model.h"
#include "runtime/reference_executor.h"

namespace grove {

struct RunStats {
  int64_t peak_activation_bytes = 0;
  bool used_reference = false;  // the model's shapes depend on input values: reference executor
};

struct SessionOptions {
  Schedule schedule = Schedule::aspen;
  int tiles_per_op = 0;  // 0: by rule
  // For tests: fill every tiled op's output buffer with NaN/junk before its tiles run, so a
  // tile that leaves elements unwritten (and would pass on a pooled buffer holding the last
  // run's correct bytes) gives wrong results. Also on when GROVE_POISON_BUFFERS is set.
  bool poison_buffers = false;
};

class Session {
 public:
  Session(Engine& engine, Model model, SessionOptions options = {});

  // Runs one inference on the engine and waits for it. Throws Error for wrong inputs, a
  // failing tile (naming the node and op) or running out of memory; other runs on the
  // engine are not affected.
  TensorMap run(const TensorMap& inputs, RunStats* stats = nullptr);

  // Starts one inference; get() on the future waits and returns the outputs (or throws).
  std::future<TensorMap> submit(TensorMap inputs);

  // The plan for the inputs last run or `shapes` (planning when the shapes are new).
  std::shared_ptr<const Plan> plan_for(const ShapeMap& shapes);

  Model& model() { return model_; }

  // The activation buffers kept for the current plan's runs (runtime/buffer_pool.h), and
  // a way to give the free ones back to the OS while the model is idle.
  BufferPool::Stats buffer_stats();
  void release_free_buffers();

 private:
  Engine& engine_;
  Model model_;
  SessionOptions options_;
  std::mutex mutex_;  // guards model binding and the cached plan
  std::shared_ptr<const Plan> plan_;
  std::shared_ptr<BufferPool> buffers_;  // for plan_'s runs; replaced with the plan

  std::shared_ptr<const Plan> plan_locked(const ShapeMap& shapes);  // plan_for, mutex_ held
  TensorMap run_unchecked(const TensorMap& inputs, RunStats* stats);  // run, without the bad_alloc net
  // The job for one inference, or null when the shapes cannot be planned ahead.
  std::shared_ptr<class PlannedRun> make_job(TensorMap inputs);
};

}  // namespace grove
