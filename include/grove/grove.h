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
};

class Session {
 public:
  Session(Engine& engine, Model model, SessionOptions options = {});

  // Runs one inference on the engine and waits for it. Throws Error for wrong inputs or a
  // failing tile (naming the node and op).
  TensorMap run(const TensorMap& inputs, RunStats* stats = nullptr);

  // Starts one inference; get() on the future waits and returns the outputs (or throws).
  std::future<TensorMap> submit(TensorMap inputs);

  // The plan for the inputs last run or `shapes` (planning when the shapes are new).
  std::shared_ptr<const Plan> plan_for(const ShapeMap& shapes);

  Model& model() { return model_; }

 private:
  Engine& engine_;
  Model model_;
  SessionOptions options_;
  std::mutex mutex_;  // guards model binding and the cached plan
  std::shared_ptr<const Plan> plan_;
};

}  // namespace grove
