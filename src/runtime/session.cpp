#include "runtime/session.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <future>
#include <map>
#include <memory>
#include <cstdlib>
#include <filesystem>
#include <mutex>
#include <new>
#include <optional>
#include <utility>

#include "plan/shared_weights.h"
#include "ops/op_names.h"
#include "runtime/machine_probes.h"
#include "ops/control_flow/control_flow.h"
#include "runtime/alone_trial.h"
#include "runtime/plan_trial.h"
#include "runtime/planned_run.h"
#include "runtime/run_threads.h"
#include "runtime/segmented_graph.h"
#include "tune/record.h"
#include "tune/tuned_plan.h"

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

struct Session::Impl {
  Impl(Engine& e, Model m, SessionOptions o, SessionDebugOptions d)
      : engine(e), model(std::move(m)), options(std::move(o)), debug(d),
        scratch(std::make_shared<WorkerScratch>(static_cast<size_t>(worker_slots(e)))) {}
  Engine& engine;
  Model model;
  SessionOptions options;
  SessionDebugOptions debug;
  std::vector<FeatureMapPruning> pruning;  // options.feature_pruning or the model's metadata, parsed
  std::mutex mutex;  // guards model binding and the cached plans
  // Plans of the shapes seen last, most recent first, each with the buffer pool of its runs:
  // inputs that alternate between a few shapes (a server's batches, a tokenizer's lengths)
  // neither re-bind nor re-plan. Runs of an evicted plan keep it and its pool alive.
  struct Cached {
    std::shared_ptr<const Plan> plan;
    std::shared_ptr<BufferPool> buffers;
    std::string trial_verdict;  // how a performance model's plan fared on trial (plan_trial.h), if it was
    std::shared_ptr<AloneTrial> alone;  // whether its runs run alone on their caller (alone_trial.h)
  };
  // A plan with the pool its trial runs warmed (or none), and the trial's verdict.
  struct Planned {
    std::shared_ptr<const Plan> plan;
    std::shared_ptr<BufferPool> buffers;
    std::string trial_verdict;
  };
  // A performance model's plan and the rules' plan of the same graph run in turns on inputs of
  // the bound shapes until the trial keeps one (runtime/plan_trial.h). No lock held.
  // `graph` planned with `po` is the model whose record keeps the verdict.
  Planned settle(const Graph& graph, const PlanOptions& po, std::shared_ptr<const Plan> model_plan,
                 std::shared_ptr<const Plan> rules_plan);
  // `winograd` keeps pruned convs on Winograd whose cores share an image's weights: tried against
  // the same plan with every pruned conv on the pruned GEMM, or planned by an earlier trial's
  // record (runtime/plan_trial.h). No lock held.
  Planned settle_pruning(const Graph& graph, const PlanOptions& po, Planned winograd);
  // The two plans run in turns on inputs of their bound shapes, each on its own buffers (or
  // those given), about 0.2 s of runs in all and at most `most_runs` timed runs each; nothing
  // when they cannot be tried (a sequence input, a run that fails). No lock held.
  struct Tried {
    PlanTrialVerdict verdict;
    Planned kept;  // with the buffers its trial runs warmed
  };
  std::optional<Tried> try_plans(Planned first, Planned second, const TrialTerms& terms, int most_runs);
  std::vector<Cached> plans;
  std::shared_ptr<WorkerScratch> scratch;  // the tile rules' working memory, per worker slot, for every run
  // Packed weights the plans of every input shape share (plan/shared_weights.h).
  std::shared_ptr<SharedPrepared> shared_prepared = std::make_shared<SharedPrepared>();
  // A graph with If, Loop, Scan or sequence ops runs in segments, each planned on its own (segmented_graph.h).
  std::unique_ptr<SegmentedGraph> segmented;
  // Input shapes that binding could not plan (they depend on input values): not re-tried on
  // every run. The most recent few.
  std::vector<ShapeMap> unplannable;
  // The most a run of this session without a plan (in segments, or on the reference executor)
  // has held at once (RunStats::peak_activation_bytes), for callers that budget memory before
  // a run that has no plan to read it from.
  std::atomic<int64_t> largest_unplanned_peak{0};
  void note_unplanned_peak(int64_t bytes) {
    int64_t seen = largest_unplanned_peak.load(std::memory_order_relaxed);
    while (bytes > seen && !largest_unplanned_peak.compare_exchange_weak(seen, bytes, std::memory_order_relaxed)) {
    }
  }

  // Input shapes being planned now, each with the plan to come. Planning runs without the
  // mutex, so runs of shapes already planned (and of the reference path) never wait for it.
  struct Planning {
    ShapeMap shapes;
    std::shared_future<Cached> done;
  };
  std::vector<Planning> planning;  // guarded by `mutex`
  int background_plans = 0;        // of `planning`, those on a thread of their own; guarded by `mutex`
  static constexpr int kMaxBackgroundPlans = 2;
  std::condition_variable plan_slot_free;  // a background planning ended

  // The plan for `shapes` with its buffer pool (planning them when new), or a null plan when
  // they depend on input values. A caller with a CancelToken waits for new shapes' planning
  // only until its token stops; the planning then goes on, on a thread of the session's, and
  // the next run of those shapes finds it done. Without a token it plans on its own thread.
  Cached plan_for(const ShapeMap& shapes, const CancelToken& cancel);
  // A cached plan of `shapes`, moved to the front (most recent); null when none. Mutex held.
  Cached cached_locked(const ShapeMap& shapes);
  // Plans the bound `graph`: no lock held, so every member it reads is fixed after construction.
  Planned make_plan(const Graph& graph);
  // Keeps a finished plan in the cache and takes its shapes off `planning`. Mutex held.
  Cached keep_locked(const ShapeMap& shapes, Planned planned);
  void drop_planning_locked(const ShapeMap& shapes);     // takes `shapes` off `planning`
  void note_unplannable_locked(const ShapeMap& shapes);  // shapes that depend on input values
  // run, without the bad_alloc net; `held_outside` as for run_values_within (runtime/session.h)
  TensorMap run_unchecked(const TensorMap& inputs, RunStats* stats, const CancelToken& cancel, int64_t held_outside);
  ValueMap run_values(const ValueMap& inputs, RunStats* stats, const CancelToken& cancel, int64_t held_outside);
  // A run on the reference executor (one at a time: it binds the model), noting its peak;
  // `run(model, &peak)` is ModelInternals::run_reference or run_reference_values.
  template <class Run>
  auto measured_reference(RunStats* stats, Run run) {
    int64_t peak = 0;
    decltype(run(model, &peak)) outputs;
    {
      std::lock_guard<std::mutex> lock(mutex);
      outputs = run(model, &peak);
    }
    note_unplanned_peak(peak);
    if (stats) *stats = RunStats{peak, true};
    return outputs;
  }
  TensorMap run_reference(const TensorMap& inputs, RunStats* stats, const CancelToken& cancel) {
    return measured_reference(stats, [&](Model& m, int64_t* peak) { return ModelInternals::run_reference(m, inputs, cancel, peak); });
  }
  // The job for one inference, or null when the shapes cannot be planned ahead.
  // A run of `inputs`' plan; null when the shapes cannot be planned. With `way`, a run that
  // run_job's caller works on: it runs alone or shared as the plan's AloneTrial says, and
  // `way` says how (to record the run's time); without, a submitted run, always shared.
  struct RunWay {
    std::shared_ptr<AloneTrial> trial;
    AloneTrial::Turn turn;
  };
  std::shared_ptr<PlannedRun> make_job(TensorMap inputs, const CancelToken& cancel, RunWay* way = nullptr);

  // Sessions made from this one (SessionInternals::derived), by purpose; guarded by derived_mutex.
  std::mutex derived_mutex;
  std::map<std::string, std::unique_ptr<Session>> derived;

  // Submitted runs that work on a thread of their own (a chain of segments, the reference
  // executor) read this Impl until they return: ~Session and move assignment join them first.
  // Declared last, so that it also goes first if the Impl is destroyed another way.
  RunThreads threads;
};

Session::Session(Engine& engine, Model model, SessionOptions options)
    : Session(std::make_unique<Impl>(engine, std::move(model), std::move(options), SessionDebugOptions{})) {}

Session SessionInternals::make(Engine& engine, Model model, const SessionOptions& options,
                               const SessionDebugOptions& debug) {
  return Session(std::make_unique<Session::Impl>(engine, std::move(model), options, debug));
}

Session::Session(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {
  if (std::getenv("GROVE_POISON_BUFFERS")) impl_->debug.poison_buffers = true;
  const Model& m = impl_->model;
  const std::string& alone = impl_->options.run_alone;
  if (alone != "auto" && alone != "on" && alone != "off")
    throw Error("run_alone must be auto, on or off, not '" + alone + "'");
  const Graph& imported = imported_graph(m);
  const std::string& asked = impl_->options.feature_pruning;
  auto meta = imported.metadata.find(kFeaturePruningKey);
  const std::string text = asked == "off"  ? ""
                           : !asked.empty() ? asked
                           : meta != imported.metadata.end() ? meta->second : "";
  try {
    impl_->pruning = parse_feature_pruning(text);
  } catch (const Error& e) {
    throw m.path().empty() ? e : e.prefixed(m.path() + ": ");
  }
  if (needs_segments(imported))
    impl_->segmented =
        std::make_unique<SegmentedGraph>(imported, impl_->engine, impl_->options, impl_->debug, m.limits());
}

Session::Session(Session&&) noexcept = default;

// The state being replaced may still be read by runs submitted to it.
Session& Session::operator=(Session&& other) noexcept {
  if (this != &other) {
    if (impl_) impl_->threads.join_all();
    impl_ = std::move(other.impl_);
  }
  return *this;
}

Session::~Session() {
  if (impl_) impl_->threads.join_all();
}

Model& Session::model() { return impl_->model; }
const Model& Session::model() const { return impl_->model; }
Engine& Session::engine() const { return impl_->engine; }
const SessionOptions& Session::options() const { return impl_->options; }

std::shared_ptr<const Plan> SessionInternals::plan_for(Session& session, const ShapeMap& shapes, const CancelToken& cancel) {
  Session::Impl& s = *session.impl_;
  return out_of_memory_is_an_error(s.model.path(), "planning", [&] { return s.plan_for(shapes, cancel).plan; });
}

std::string SessionInternals::run_alone_verdict(Session& session) {
  Session::Impl& s = *session.impl_;
  std::lock_guard<std::mutex> lock(s.mutex);
  return s.plans.empty() ? "" : s.plans.front().alone->verdict();
}

std::string SessionInternals::plan_trial_verdict(Session& session) {
  Session::Impl& s = *session.impl_;
  std::lock_guard<std::mutex> lock(s.mutex);
  return s.plans.empty() ? "" : s.plans.front().trial_verdict;
}

const SessionDebugOptions& SessionInternals::debug(const Session& session) { return session.impl_->debug; }

Session& SessionInternals::derived(Session& session, const std::string& key, const std::function<Model()>& make) {
  Session::Impl& s = *session.impl_;
  std::lock_guard<std::mutex> lock(s.derived_mutex);
  std::unique_ptr<Session>& made = s.derived[key];
  if (!made) made = std::make_unique<Session>(make_session(s.engine, make(), s.options, s.debug));
  return *made;
}

size_t SessionInternals::cached_plan_count(Session& session) {
  std::lock_guard<std::mutex> lock(session.impl_->mutex);
  return session.impl_->plans.size();
}

int64_t SessionInternals::largest_unplanned_peak(const Session& session) {
  return session.impl_->largest_unplanned_peak.load(std::memory_order_relaxed);
}

Session::Impl::Cached Session::Impl::cached_locked(const ShapeMap& shapes) {
  for (size_t i = 0; i < plans.size(); ++i)
    if (plans[i].plan->graph.bound_inputs == shapes) {
      std::rotate(plans.begin(), plans.begin() + static_cast<std::ptrdiff_t>(i), plans.begin() + static_cast<std::ptrdiff_t>(i) + 1);
      return plans.front();
    }
  return {};
}

Session::Impl::Cached Session::Impl::keep_locked(const ShapeMap& shapes, Planned planned) {
  // A larger plan has work enough for every core. One thread learns too: alone, its caller
  // skips the pool's pushes and pops.
  const std::string& mode = options.run_alone;
  const AloneTrial::Mode alone = mode == "on"    ? AloneTrial::Mode::alone
                                 : mode == "off" ? AloneTrial::Mode::shared
                                 : planned.plan->total_flops <= AloneTrial::kMaxFlops ? AloneTrial::Mode::learn
                                                                                        : AloneTrial::Mode::shared;
  plans.insert(plans.begin(), Cached{std::move(planned.plan),
                                     planned.buffers ? std::move(planned.buffers) : std::make_shared<BufferPool>(),
                                     std::move(planned.trial_verdict), std::make_shared<AloneTrial>(alone)});
  if (plans.size() > static_cast<size_t>(std::max(1, options.cached_plans))) plans.pop_back();
  drop_planning_locked(shapes);
  return plans.front();
}

void Session::Impl::drop_planning_locked(const ShapeMap& shapes) {
  planning.erase(std::find_if(planning.begin(), planning.end(), [&](const Planning& p) { return p.shapes == shapes; }));
}

void Session::Impl::note_unplannable_locked(const ShapeMap& shapes) {
  unplannable.insert(unplannable.begin(), shapes);
  if (unplannable.size() > static_cast<size_t>(std::max(1, options.cached_plans))) unplannable.pop_back();
}

Session::Impl::Cached Session::Impl::plan_for(const ShapeMap& shapes, const CancelToken& cancel) {
  std::unique_lock<std::mutex> lock(mutex);
  std::shared_future<Cached> done;
  // A caller with a deadline must be free to leave at it, so binding and planning get a thread
  // of their own. A few at a time: each holds a model's worth of packed weights while it
  // works, and a client sending ever new shapes must not start one for each; the others wait
  // for a free slot, until their token stops.
  for (;;) {
    if (Cached c = cached_locked(shapes); c.plan) return c;
    if (std::find(unplannable.begin(), unplannable.end(), shapes) != unplannable.end()) return {};
    auto under_way = std::find_if(planning.begin(), planning.end(), [&](const Planning& p) { return p.shapes == shapes; });
    if (under_way != planning.end()) {
      done = under_way->done;
      break;
    }
    if (cancel.empty() || background_plans < kMaxBackgroundPlans) break;
    plan_slot_free.wait_for(lock, std::chrono::milliseconds(10));
    if (cancel.stopped())
      throw Error(cancel.reason() + " while waiting to plan input shapes not seen before (" + model.path() + ": " +
                      std::to_string(background_plans) + " other input shapes are being planned)",
                  Error::Kind::cancelled);
  }
  if (!done.valid() && cancel.empty()) {
    // Bound here, as callers that read the bound graph after planning expect.
    if (!model.is_bound() || bound_graph(model).bound_inputs != shapes) {
      if (!model.try_bind(shapes)) {
        note_unplannable_locked(shapes);
        return {};
      }
    }
    // A copy (the weights are shared, not copied): the model may be bound to other shapes
    // while this one is planned.
    const Graph graph = bound_graph(model);
    std::promise<Cached> promise;
    planning.push_back({shapes, promise.get_future().share()});
    lock.unlock();
    Planned planned;
    try {
      planned = make_plan(graph);
    } catch (...) {
      lock.lock();
      drop_planning_locked(shapes);
      promise.set_exception(std::current_exception());
      throw;
    }
    lock.lock();
    Cached c = keep_locked(shapes, std::move(planned));
    promise.set_value(c);
    return c;
  }
  if (!done.valid()) {
    ++background_plans;
    try {
      done = threads
                 .start([this, shapes]() -> Cached {
                   Planned planned;
                   try {
                     planned = out_of_memory_is_an_error(model.path(), "planning", [&]() -> Planned {
                       // Bound on a copy: the model stays as it is for the runs and plans beside.
                       std::optional<Graph> graph = ModelInternals::bound_copy(model, shapes);
                       return graph ? make_plan(*graph) : Planned{};
                     });
                   } catch (...) {
                     std::lock_guard<std::mutex> relock(mutex);
                     --background_plans;
                     plan_slot_free.notify_all();
                     drop_planning_locked(shapes);
                     throw;
                   }
                   std::lock_guard<std::mutex> relock(mutex);
                   --background_plans;
                   plan_slot_free.notify_all();
                   if (planned.plan) return keep_locked(shapes, std::move(planned));
                   drop_planning_locked(shapes);
                   note_unplannable_locked(shapes);
                   return {};
                 })
                 .share();
    } catch (...) {  // no thread could be started: nothing is planning
      --background_plans;
      throw;
    }
    planning.push_back({shapes, done});
  }
  lock.unlock();
  // Planning does not look at tokens: a caller whose token stops leaves it running.
  while (done.wait_for(std::chrono::milliseconds(cancel.empty() ? 1000 : 10)) != std::future_status::ready)
    if (cancel.stopped())
      throw Error(cancel.reason() + " while input shapes not seen before were planned (" + model.path() +
                      "; the planning goes on, and the next run of these shapes uses it)",
                  Error::Kind::cancelled);
  return done.get();
}

Session::Impl::Planned Session::Impl::make_plan(const Graph& graph) {
  PlanOptions po;
  // An elastic engine's plans are cut for the most workers it can have.
  po.threads = options.plan_threads > 0 ? options.plan_threads : engine.max_threads();
  po.tiles_per_op = options.tiles_per_op;
  po.tile_counts = options.tile_counts;
  po.tile_pieces = options.tile_pieces;
  // The machine's measurements: taken at the first plan that asks, on this engine, and kept
  // for every session on it, so that they all price and choose alike (runtime/machine_probes.h).
  MachineProbes& probes = machine_probes(engine);
  std::unique_lock<std::mutex> measuring(probes.mutex);
  po.schedule = options.schedule;
  po.max_tiles = model.limits().max_tiles;
  po.precision = options.precision;
  po.conv_layout = options.conv_layout;
  const bool tail_aware = po.tile_counts == TileCounts::tail_aware && po.tiles_per_op == 0;
  const bool bf16 = po.precision == Precision::bf16, channels_last = po.conv_layout == ConvLayout::channels_last;
  // The Winograd probe takes a few milliseconds: only a model with convs asks.
  const auto& nodes = graph.nodes;
  const bool convs = std::any_of(nodes.begin(), nodes.end(), [](const Node& n) { return n.op_type == kConv; });
  take_machine_probes(probes,
                      {.move_flops = tail_aware, .amx_flop_cost = tail_aware && bf16, .bf16_dot_gain = bf16,
                       .channels_last = channels_last, .winograd_nhwc = channels_last && convs},
                      po);
  measuring.unlock();  // sessions plan side by side; only the measuring is one at a time
  po.feature_pruning = pruning;
  po.shared_prepared = shared_prepared;  // one packed copy of the weights for every shape
  // Choices a performance model predicted, with no one asking for them by name: tried
  // against the rules' plan before the first run (plan_trial.h), and the verdict kept as this
  // machine's record of the model. A record, measured by grove tune or by an earlier trial,
  // and --tuning model are taken as they are.
  auto choose = [&]() -> Planned {
    std::shared_ptr<const Plan> plan = tune::plan_with_tuning(graph, po, options.tuning, options.choices);
    if (options.tuning != "auto" || !options.choices.empty() || plan->options.choices_from != DecisionSource::model ||
        plan->options.choices.empty())
      return {plan, nullptr, ""};
    const std::string record = tune::record_path(graph, po);
    // One process at a time tries a model on this machine; one that waited here finds the
    // verdict the other wrote, and plans by it.
    tune::RecordLock trying(record);
    std::error_code ec;
    if (!record.empty() && std::filesystem::exists(record, ec)) {
      auto recorded = tune::plan_with_tuning(graph, po, options.tuning, options.choices);
      if (recorded->options.choices_from == DecisionSource::record) return {recorded, nullptr, ""};
    }
    return settle(graph, po, plan, tune::plan_with_tuning(graph, po, "off", {}));
  };
  try {
    Planned planned = choose();
    if (options.tuning == "auto" && planned.plan->pruning.winograd_sharing_images > 0)
      planned = settle_pruning(graph, po, std::move(planned));
    return planned;
  } catch (const Error& e) {
    const std::string& path = model.path();
    if (path.empty() || std::string(e.what()).rfind(path, 0) == 0) throw;
    throw e.prefixed(path + ": ");
  }
}

Session::Impl::Planned Session::Impl::settle(const Graph& graph, const PlanOptions& po,
                                             std::shared_ptr<const Plan> model_plan,
                                             std::shared_ptr<const Plan> rules_plan) {
  // At most 21 runs each: a wrong choice costs its layers tens of percent, which 21 runs show.
  std::optional<Tried> tried = try_plans({model_plan, nullptr, ""}, {std::move(rules_plan), nullptr, ""}, {}, 21);
  if (!tried) return {model_plan, nullptr, ""};  // a real run meets the same error, and says so
  const PlanTrialVerdict& trial = tried->verdict;
  tried->kept.trial_verdict = model_plan->options.choices_source + "; tried against the rules' plan: " + trial.line;
  const std::string unkept = tune::keep_trial_verdict(graph, po, model_plan->options.choices, trial.first_kept,
                                                      trial.first_ms, trial.second_ms);
  if (!unkept.empty()) tried->kept.trial_verdict += " (not kept for later processes: " + unkept + ")";
  return std::move(tried->kept);
}

Session::Impl::Planned Session::Impl::settle_pruning(const Graph& graph, const PlanOptions& po, Planned winograd) {
  // The one-thread probe that put these convs on Winograd (plan/feature_pruning.h) prices a
  // core with its own images. Where the cores share an image, each streams all of a conv's
  // transformed weights at once, and the pruned GEMM, reading only the kept channels' weights,
  // can win: c75 of the Fashion-MNIST kit at batch 1 on 2 threads ran 1.019x dense on the
  // GEMM and 0.975x on Winograd (Zen 5, docs/dynamic.md).
  PlanOptions gemm_options = winograd.plan->options;
  gemm_options.pruned_winograd = false;
  const std::string record = tune::pruning_record_path(graph, po);
  tune::RecordLock trying(record);  // one process at a time tries it; the others plan by its verdict
  if (const std::optional<bool> on_winograd = tune::recorded_pruned_winograd(graph, po))
    return *on_winograd ? std::move(winograd) : Planned{grove::make_plan(graph, gemm_options), nullptr, winograd.trial_verdict};
  Planned gemm{grove::make_plan(graph, gemm_options), nullptr, ""};
  // Either plan is as right as the other, so the faster is kept however little it wins by; up
  // to 201 runs each, as a pruned model's runs are short and the two differ by a few percent.
  std::optional<Tried> tried = try_plans(winograd, std::move(gemm), {"Winograd", "pruned GEMM", 1.0}, 201);
  if (!tried) return winograd;  // a real run meets the same error, and says so
  const PlanTrialVerdict& trial = tried->verdict;
  std::string verdict = (winograd.trial_verdict.empty() ? "" : winograd.trial_verdict + "; ") +
                        "pruned convs on Winograd tried against the pruned GEMM: " + trial.line;
  const std::string unkept = tune::keep_pruning_verdict(graph, po, trial.first_kept, trial.first_ms, trial.second_ms);
  if (!unkept.empty()) verdict += " (not kept for later processes: " + unkept + ")";
  tried->kept.trial_verdict = verdict;
  return std::move(tried->kept);
}

std::optional<Session::Impl::Tried> Session::Impl::try_plans(Planned first, Planned second, const TrialTerms& terms,
                                                             int most_runs) {
  // Inputs of the bound shapes: 0.5 in floats (no denormals on the way), zeros elsewhere (valid
  // indices). Only tensors: a model with sequence inputs cannot be tried.
  TensorMap inputs;
  for (const ValueDecl& in : first.plan->graph.inputs) {
    auto shape = first.plan->graph.bound_inputs.find(in.name);
    if (in.kind != ValueKind::tensor || shape == first.plan->graph.bound_inputs.end()) return std::nullopt;
    Tensor t(in.dtype, shape->second);
    if (in.dtype == DType::f32) std::fill_n(t.data<float>(), t.numel(), 0.5f);
    inputs[in.name] = std::move(t);
  }
  // Each plan runs on buffers of its own; the plan not kept goes, with the weights only it
  // packed, when this returns.
  Planned candidates[2] = {std::move(first), std::move(second)};
  for (Planned& c : candidates)
    if (!c.buffers) c.buffers = std::make_shared<BufferPool>();
  auto timed_run = [&](int index) {
    const Planned& candidate = candidates[index];
    const auto start = std::chrono::steady_clock::now();
    auto job = std::make_shared<PlannedRun>(
        candidate.plan, inputs,
        PlannedRunOptions{.poison_buffers = false, .buffers = candidate.buffers, .scratch = scratch,
                          .urgent = options.urgent, .cancel = {}});
    run_job(engine, job);
    job->outputs();  // a run that failed throws here
    return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
  };
  try {
    // A run of the first plan after the one that fills its buffers sets how many runs each plan
    // gets: about 0.2 s of them, at least 5, so a quick model's medians are not a few runs'
    // noise (the filling run took 2.9 ms where the others took 0.15).
    timed_run(kTrialFirst);
    const double first_ms = timed_run(kTrialFirst);
    const int runs = std::clamp(static_cast<int>(200.0 / std::max(first_ms, 1e-3)), 5, std::max(5, most_runs));
    const PlanTrialVerdict verdict = run_plan_trial(timed_run, 1, runs, terms);
    return Tried{verdict, std::move(candidates[verdict.first_kept ? kTrialFirst : kTrialSecond])};
  } catch (const Error&) {
    return std::nullopt;
  }
}

BufferStats Session::buffer_stats() {
  std::lock_guard<std::mutex> lock(impl_->mutex);
  return impl_->plans.empty() ? BufferStats{} : impl_->plans.front().buffers->stats();
}

void Session::release_free_buffers() {
  std::lock_guard<std::mutex> lock(impl_->mutex);
  for (Impl::Cached& c : impl_->plans) c.buffers->trim();
}

std::shared_ptr<PlannedRun> Session::Impl::make_job(TensorMap inputs, const CancelToken& cancel, RunWay* way) {
  ShapeMap shapes;
  for (const auto& [name, t] : inputs) shapes[name] = t.shape();
  // Planned on this thread: a run's caller waits for its planning, as a control-flow segment's
  // run must (the server plans new shapes first, with plan_for's token, and leaves at its deadline).
  Cached c = plan_for(shapes, CancelToken{});
  if (!c.plan) return nullptr;
  if (way) way->trial = c.alone, way->turn = c.alone->next();
  PlannedRunOptions run_options{.poison_buffers = debug.poison_buffers, .buffers = std::move(c.buffers),
                                .scratch = scratch, .urgent = options.urgent,
                                .alone = way && way->turn.alone, .cancel = cancel};
  return std::make_shared<PlannedRun>(std::move(c.plan), std::move(inputs), run_options);
}

TensorMap Session::run(const TensorMap& inputs, RunStats* stats, const CancelToken& cancel) {
  return out_of_memory_is_an_error(impl_->model.path(), "running",
                                   [&] { return impl_->run_unchecked(inputs, stats, cancel, 0); });
}

TensorMap Session::Impl::run_unchecked(const TensorMap& inputs, RunStats* stats, const CancelToken& cancel,
                                       int64_t held_outside) {
  check_inputs(imported_graph(model), inputs);
  if (feeds_defaults(imported_graph(model), inputs)) {
    // Overriding an initializer re-binds a copy of the graph per run, on the reference executor.
    return run_reference(inputs, stats, cancel);
  }
  // First as one TileGraph: binding inlines each If whose condition folds to a constant.
  RunWay way;
  std::shared_ptr<PlannedRun> job = make_job(inputs, cancel, &way);
  if (!job && segmented) {
    RunStats counted;
    ValueMap outputs = segmented->run(to_values(inputs), &counted, cancel, held_outside);
    note_unplanned_peak(counted.peak_activation_bytes);
    if (stats) *stats = counted;
    return to_tensors(outputs, model.path() + ": output ");
  }
  if (!job) {
    // Shapes that depend on input values cannot be planned ahead; the reference executor
    // infers them node by node.
    return run_reference(inputs, stats, cancel);
  }
  if (way.turn.timed) {
    const auto start = std::chrono::steady_clock::now();
    run_job(engine, job);
    TensorMap outputs = job->outputs();  // a run that failed throws here, untimed
    way.trial->record(way.turn, std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count());
    if (stats) *stats = RunStats{job->peak_activation_bytes(), false};
    return outputs;
  }
  run_job(engine, job);
  if (stats) *stats = RunStats{job->peak_activation_bytes(), false};
  return job->outputs();
}

ValueMap Session::run_values(const ValueMap& inputs, RunStats* stats, const CancelToken& cancel) {
  return impl_->run_values(inputs, stats, cancel, 0);
}

ValueMap SessionInternals::run_values_within(Session& session, const ValueMap& inputs, RunStats* stats,
                                             const CancelToken& cancel, int64_t held_outside) {
  return session.impl_->run_values(inputs, stats, cancel, held_outside);
}

ValueMap Session::Impl::run_values(const ValueMap& inputs, RunStats* stats, const CancelToken& cancel, int64_t held_outside) {
  Impl& s = *this;
  const Graph& g = imported_graph(s.model);
  check_inputs(g, inputs);
  if (has_only_tensor_io(g))
    return to_values(out_of_memory_is_an_error(g.path, "running", [&] {
      return run_unchecked(to_tensors(inputs, g.path + ": input "), stats, cancel, held_outside);
    }));
  return out_of_memory_is_an_error(g.path, "running", [&] {
    bool fed_default = false;
    for (const auto& d : g.defaults) fed_default = fed_default || inputs.count(d.name) != 0;
    if (!s.segmented || fed_default)
      return s.measured_reference(
          stats, [&](Model& m, int64_t* peak) { return ModelInternals::run_reference_values(m, inputs, cancel, peak); });
    RunStats counted;
    ValueMap outputs = s.segmented->run(inputs, &counted, cancel, held_outside);
    s.note_unplanned_peak(counted.peak_activation_bytes);
    if (stats) *stats = counted;
    return outputs;
  });
}

std::future<TensorMap> Session::submit(TensorMap inputs, CancelToken cancel) {
  Impl& s = *impl_;
  check_inputs(imported_graph(s.model), inputs);
  std::shared_ptr<PlannedRun> job =
      feeds_defaults(imported_graph(s.model), inputs)
          ? nullptr
          : out_of_memory_is_an_error(s.model.path(), "planning", [&] { return s.make_job(inputs, cancel); });
  if (!job && s.segmented && !feeds_defaults(imported_graph(s.model), inputs)) {
    // Each segment's job waits for the one before: a thread of the session's runs the chain.
    return s.threads.start([&s, inputs = std::move(inputs), cancel = std::move(cancel)] {
      return out_of_memory_is_an_error(s.model.path(), "running", [&] {
        RunStats counted;
        ValueMap outputs = s.segmented->run(to_values(inputs), &counted, cancel);
        s.note_unplanned_peak(counted.peak_activation_bytes);
        return to_tensors(outputs, s.model.path() + ": output ");
      });
    });
  }
  if (!job) {
    return s.threads.start([&s, inputs = std::move(inputs), cancel = std::move(cancel)] {
      return out_of_memory_is_an_error(s.model.path(), "running", [&] { return s.run_reference(inputs, nullptr, cancel); });
    });
  }
  // The worker that finishes the last tile fulfils the future: no thread waits per request.
  std::future<TensorMap> result = job->result();
  submit_job(s.engine, job);
  return result;
}

}  // namespace grove
