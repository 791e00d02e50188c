#include "grove/grove.h"

#include "runtime/planned_run.h"

#include <cstdlib>
#include <new>

namespace grove {
namespace {

// Out of memory while binding, planning or running becomes an Error naming the model, not a
// crash: the caller can drop the request and carry on.
template <class F>
auto out_of_memory_is_an_error(const std::string& model, const char* doing, F&& f) {
  try {
    return f();
  } catch (const std::bad_alloc&) {
    throw Error(model + ": out of memory while " + doing + " (see --max-memory in docs/security.md)");
  }
}

}  // namespace

Session::Session(Engine& engine, Model model, SessionOptions options)
    : engine_(engine), model_(std::move(model)), options_(options) {
  if (std::getenv("GROVE_POISON_BUFFERS")) options_.poison_buffers = true;
}

std::shared_ptr<const Plan> Session::plan_for(const ShapeMap& shapes) {
  std::lock_guard<std::mutex> lock(mutex_);
  return out_of_memory_is_an_error(model_.imported().path, "planning", [&] { return plan_locked(shapes); });
}

std::shared_ptr<const Plan> Session::plan_locked(const ShapeMap& shapes) {
  if (plan_ && plan_->graph.bound_inputs == shapes) return plan_;
  if (!model_.is_bound() || model_.graph().bound_inputs != shapes) {
    if (!model_.try_bind(shapes)) return nullptr;
  }
  PlanOptions po;
  po.threads = engine_.threads();
  po.tiles_per_op = options_.tiles_per_op;
  po.schedule = options_.schedule;
  po.max_tiles = model_.limits().max_tiles;
  try {
    plan_ = make_plan(model_.graph(), po);
  } catch (const Error& e) {
    const std::string& path = model_.imported().path;
    if (path.empty() || std::string(e.what()).rfind(path, 0) == 0) throw;
    throw e.prefixed(path + ": ");
  }
  // New shapes, new buffer sizes: a fresh pool. Runs of the old plan still in flight keep
  // the old pool alive through their buffers.
  buffers_ = std::make_shared<BufferPool>();
  return plan_;
}

BufferPool::Stats Session::buffer_stats() {
  std::lock_guard<std::mutex> lock(mutex_);
  return buffers_ ? buffers_->stats() : BufferPool::Stats{};
}

void Session::release_free_buffers() {
  std::lock_guard<std::mutex> lock(mutex_);
  if (buffers_) buffers_->trim();
}

std::shared_ptr<PlannedRun> Session::make_job(TensorMap inputs) {
  ShapeMap shapes;
  for (const auto& [name, t] : inputs) shapes[name] = t.shape();
  std::lock_guard<std::mutex> lock(mutex_);
  std::shared_ptr<const Plan> plan = plan_locked(shapes);
  if (!plan) return nullptr;
  PlannedRunOptions options{.poison_buffers = options_.poison_buffers, .buffers = buffers_};
  return std::make_shared<PlannedRun>(std::move(plan), std::move(inputs), options);
}

TensorMap Session::run(const TensorMap& inputs, RunStats* stats) {
  return out_of_memory_is_an_error(model_.imported().path, "running", [&] { return run_unchecked(inputs, stats); });
}

TensorMap Session::run_unchecked(const TensorMap& inputs, RunStats* stats) {
  check_inputs(model_.imported(), inputs);
  if (feeds_defaults(model_.imported(), inputs)) {
    // Overriding an initializer re-binds a copy of the graph per run, on the reference executor.
    if (stats) *stats = RunStats{0, true};
    std::lock_guard<std::mutex> lock(mutex_);
    return model_.run_reference(inputs);
  }
  std::shared_ptr<PlannedRun> job = make_job(inputs);
  if (!job) {
    // Shapes that depend on input values cannot be planned ahead; the reference executor
    // infers them node by node.
    if (stats) *stats = RunStats{0, true};
    std::lock_guard<std::mutex> lock(mutex_);
    return model_.run_reference(inputs);
  }
  engine_.run(job);
  if (stats) *stats = RunStats{job->peak_activation_bytes(), false};
  return job->outputs();
}

std::future<TensorMap> Session::submit(TensorMap inputs) {
  check_inputs(model_.imported(), inputs);
  std::shared_ptr<PlannedRun> job =
      feeds_defaults(model_.imported(), inputs)
          ? nullptr
          : out_of_memory_is_an_error(model_.imported().path, "planning", [&] { return make_job(inputs); });
  if (!job) {
    return std::async(std::launch::async, [this, inputs = std::move(inputs)] {
      std::lock_guard<std::mutex> lock(mutex_);
      return out_of_memory_is_an_error(model_.imported().path, "running", [&] { return model_.run_reference(inputs); });
    });
  }
  // The worker that finishes the last tile fulfils the future: no thread waits per request.
  std::future<TensorMap> result = job->result();
  engine_.submit(job);
  return result;
}

}  // namespace grove
