#include "grove/grove.h"

#include "runtime/planned_run.h"

namespace grove {

Session::Session(Engine& engine, Model model, SessionOptions options)
    : engine_(engine), model_(std::move(model)), options_(options) {}

std::shared_ptr<const Plan> Session::plan_for(const ShapeMap& shapes) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (plan_ && plan_->graph.bound_inputs == shapes) return plan_;
  if (!model_.is_bound() || model_.graph().bound_inputs != shapes) {
    if (!model_.try_bind(shapes)) return nullptr;
  }
  PlanOptions po;
  po.threads = engine_.threads();
  po.tiles_per_op = options_.tiles_per_op;
  po.schedule = options_.schedule;
  plan_ = make_plan(model_.graph(), po);
  return plan_;
}

namespace {
ShapeMap shapes_of(const TensorMap& inputs) {
  ShapeMap s;
  for (const auto& [name, t] : inputs) s[name] = t.shape();
  return s;
}
}  // namespace

TensorMap Session::run(const TensorMap& inputs, RunStats* stats) {
  check_inputs(model_.imported(), inputs);
  std::shared_ptr<const Plan> plan = plan_for(shapes_of(inputs));
  if (!plan) {
    // Shapes that depend on input values cannot be planned ahead; the reference executor
    // infers them node by node.
    if (stats) *stats = RunStats{0, true};
    std::lock_guard<std::mutex> lock(mutex_);
    return model_.run_reference(inputs);
  }
  auto job = std::make_shared<PlannedRun>(plan, inputs);
  engine_.run(job);
  if (stats) *stats = RunStats{job->peak_activation_bytes(), false};
  return job->outputs();
}

std::future<TensorMap> Session::submit(TensorMap inputs) {
  check_inputs(model_.imported(), inputs);
  std::shared_ptr<const Plan> plan = plan_for(shapes_of(inputs));
  if (!plan) {
    return std::async(std::launch::async, [this, inputs = std::move(inputs)] {
      std::lock_guard<std::mutex> lock(mutex_);
      return model_.run_reference(inputs);
    });
  }
  auto job = std::make_shared<PlannedRun>(plan, std::move(inputs));
  std::future<void> done = engine_.submit(job);
  // The work already runs on the engine; this thread only waits, so the returned future
  // becomes ready by itself (callers can poll it) and then holds the outputs.
  return std::async(std::launch::async, [job, done = std::move(done)]() mutable {
    done.get();
    return job->outputs();
  });
}

}  // namespace grove
