#include "runtime/engine.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <thread>
#include <vector>

#include "graph/error.h"
#include "runtime/cores.h"
#include "runtime/job_state.h"
#include "runtime/machine_probes.h"
#include "runtime/ready_pool.h"
#include "runtime/trace.h"
#include "runtime/worker.h"

namespace grove {

// Rows and trace tracks 0..threads-1 belong to the worker threads; the last one to the thread
// inside run_job (one at a time, guarded by caller_busy).
struct Engine::Impl {
  Impl(const EngineOptions& options, const EngineDebugOptions& debug)
      : options(options),
        debug(debug),
        n_threads(std::max(options.max_threads, options.threads > 0 ? options.threads : available_cores())),
        pool(n_threads + 1, options.priority),
        tracer(n_threads + 1),
        help(n_threads + 1) {
    roster.active.store(std::min(n_threads, options.threads > 0 ? options.threads : available_cores()));
    roster.caller_works = options.caller_works;
    // Spinning workers beyond the cores would take them from working ones.
    const bool fits = roster.active.load() <= available_cores() && std::isfinite(options.busy_spin_ms);
    busy_spin_ns = fits ? static_cast<int64_t>(std::clamp(options.busy_spin_ms, 0.0, 1000.0) * 1e6) : 0;
  }

  std::future<void> submit(std::shared_ptr<Job> job, std::atomic<bool>* done_flag);
  // run()'s job that runs alone (Job::alone), on `caller`: returns once every tile has run.
  std::future<void> start_alone(std::shared_ptr<Job> job, WorkerContext& caller);
  void start_workers();
  void stop_workers();

  EngineOptions options;
  EngineDebugOptions debug;
  int n_threads;
  ReadyPool pool;
  Tracer tracer;
  HelpBoard help;  // tiles running in pieces, one slot per worker slot (runtime/help_board.h)
  JobTracker tracker;
  int64_t busy_spin_ns = 0;  // WorkerContext::busy_spin_ns
  std::atomic<bool> stopping{false};
  Roster roster;  // active workers and the run_job caller's place
  std::atomic<uint64_t> next_job_id{1};
  std::atomic<uint32_t> next_source_row{0};
  std::vector<std::thread> threads;
  std::unique_ptr<WorkerCounters[]> counters{new WorkerCounters[static_cast<size_t>(n_threads) + 1]};
  std::chrono::steady_clock::time_point started = std::chrono::steady_clock::now();
  MachineProbes probes;
};

void Engine::Impl::start_workers() {
  std::vector<int> cpus = allowed_cpus();
  threads.reserve(static_cast<size_t>(n_threads));
  for (int i = 0; i < n_threads; ++i) {
    int cpu = cpus[static_cast<size_t>(i) % cpus.size()];
    threads.emplace_back([this, i, cpu] {
      if (options.pin) pin_current_thread(cpu);
      if (options.idle_priority) lower_current_thread_to_idle();
      WorkerContext worker(i, i, pool, tracer);
      worker.shares = &roster;
      worker.caller_row = n_threads;
      worker.counters = &counters[static_cast<size_t>(i)];
      worker.jobs = &tracker;
      worker.busy_spin_ns = busy_spin_ns;
      worker.help = &help;
      // Clamped: an infinite or absurd factor would spin a worker for good.
      if (i == 0 && std::isfinite(debug.slow_worker)) worker.slowdown = std::clamp(debug.slow_worker, 1.0, 1000.0);
      // The last worker makes room for run_job's caller (see EngineInternals::run).
      worker.roster = &roster;
      work_until(worker, stopping);
    });
  }
}

void Engine::Impl::stop_workers() {
  stopping.store(true, std::memory_order_release);
  pool.parker().notify_all();
  roster.changed();
  for (std::thread& t : threads) t.join();
  threads.clear();
}

std::future<void> Engine::Impl::submit(std::shared_ptr<Job> job, std::atomic<bool>* done_flag) {
  if (!job) throw Error("engine: submit() got a null job");
  DagView dag = job->dag();
  int32_t max_depth = validate_dag(dag);
  uint64_t id = next_job_id.fetch_add(1, std::memory_order_relaxed);
  auto state = std::make_unique<JobState>(std::move(job), dag, max_depth, id);
  state->done_flag = done_flag;
  state->parker = &pool.parker();
  state->tracker = &tracker;
  std::future<void> future = state->promise.get_future();
  tracker.add();
  if (dag.n_parents.empty()) {
    JobState::complete(state.release());
    return future;
  }
  // Sources go round-robin over the worker rows (paper: "uniformly distributed"), one batch
  // per row. Jobs start on different rows so that small jobs spread out too.
  JobState* s = state.release();
  const int rows = roster.active.load(std::memory_order_acquire);
  const uint32_t first_row = next_source_row.fetch_add(1, std::memory_order_relaxed);
  // With places (DagView::place), each source goes to its share's row instead.
  if (!dag.place.empty()) {
    std::vector<std::vector<ReadyTile>> by_row(static_cast<size_t>(pool.rows()));
    for (int32_t tile : dag.sources)
      by_row[static_cast<size_t>(roster.row_for_place(dag.place[static_cast<size_t>(tile)], n_threads))].push_back(
          {s, tile, pool.column_for(dag.depth[static_cast<size_t>(tile)], max_depth, s->urgent)});
    // Once the first batch is pushed the job may run, finish and be deleted: use only locals.
    for (size_t k = 0; k < by_row.size(); ++k) pool.push(static_cast<int>(k), by_row[k]);
    roster.work_arrived();  // after the pushes: a worker may sleep (Roster::caller_left)
    return future;
  }
  std::vector<std::vector<ReadyTile>> per_row(static_cast<size_t>(std::min<size_t>(rows, dag.sources.size())));
  for (size_t i = 0; i < dag.sources.size(); ++i) {
    int32_t tile = dag.sources[i];
    per_row[i % per_row.size()].push_back({s, tile, pool.column_for(dag.depth[static_cast<size_t>(tile)], max_depth, s->urgent)});
  }
  // Once the first batch is pushed the job may run, finish and be deleted: use only locals.
  for (size_t k = 0; k < per_row.size(); ++k)
    pool.push(static_cast<int>((first_row + k) % static_cast<uint32_t>(rows)), per_row[k]);
  roster.work_arrived();  // after the pushes: a worker may sleep (Roster::caller_left)
  return future;
}

std::future<void> Engine::Impl::start_alone(std::shared_ptr<Job> job, WorkerContext& caller) {
  if (!job) throw Error("engine: run() got a null job");
  DagView dag = job->dag();
  int32_t max_depth = validate_dag(dag);
  uint64_t id = next_job_id.fetch_add(1, std::memory_order_relaxed);
  auto state = std::make_unique<JobState>(std::move(job), dag, max_depth, id);
  state->parker = &pool.parker();
  state->tracker = &tracker;
  std::future<void> future = state->promise.get_future();
  tracker.add();
  if (dag.n_parents.empty()) JobState::complete(state.release());
  else run_alone(caller, *state.release());
  return future;
}

Engine::Engine(EngineOptions options) : Engine(std::make_unique<Impl>(options, EngineDebugOptions{})) {}

Engine::Engine(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) { impl_->start_workers(); }

Engine EngineInternals::make(const EngineOptions& options, const EngineDebugOptions& debug) {
  return Engine(std::make_unique<Engine::Impl>(options, debug));
}

Engine::~Engine() {
  impl_->tracker.wait_until_idle();
  impl_->stop_workers();
}

int Engine::threads() const { return impl_->roster.active.load(std::memory_order_acquire); }

int Engine::max_threads() const { return impl_->n_threads; }

int Engine::set_workers(int n) {
  Impl& impl = *impl_;
  n = std::clamp(n, 1, impl.n_threads);
  impl.roster.active.store(n, std::memory_order_release);
  impl.roster.changed();
  return n;
}

int EngineInternals::worker_slots(const Engine& engine) { return engine.impl_->n_threads + 1; }

std::future<void> EngineInternals::submit(Engine& engine, std::shared_ptr<Job> job) {
  return engine.impl_->submit(std::move(job), nullptr);
}

void EngineInternals::run(Engine& engine, std::shared_ptr<Job> job) {
  Engine::Impl& impl = *engine.impl_;
  if (!impl.options.caller_works || impl.roster.caller_busy.exchange(true, std::memory_order_acquire)) {
    impl.submit(std::move(job), nullptr).get();
    return;
  }
  // The caller takes the place of the last worker, which stands aside until it is done: with
  // threads = N, N threads run tiles (N + 1 oversubscribed the cores; 2 cores, --threads 2).
  // Benching needs no wake: a worker checks benched() before each tile it takes.
  struct Release {
    Roster& roster;
    const JobTracker& jobs;
    // The caller's own job has left in_flight() (JobTracker::finishing) by now.
    ~Release() {
      roster.caller_left([this] { return jobs.in_flight() > 0; });
    }
  } release{impl.roster, impl.tracker};
  WorkerContext caller(impl.n_threads, impl.n_threads, impl.pool, impl.tracer);
  caller.shares = &impl.roster;
  caller.caller_row = impl.n_threads;
  caller.counters = &impl.counters[static_cast<size_t>(impl.n_threads)];
  caller.jobs = &impl.tracker;
  caller.busy_spin_ns = impl.busy_spin_ns;
  if (job && job->alone()) {
    // Nothing goes to the pool, so no worker is woken or takes a tile; no tile is offered in
    // pieces either, with no one to take them.
    std::future<void> future = impl.start_alone(std::move(job), caller);
    future.get();
    return;
  }
  caller.help = &impl.help;
  std::atomic<bool> done{false};
  std::future<void> future = impl.submit(std::move(job), &done);
  work_until(caller, done);
  future.get();
}

EngineStats Engine::stats() const {
  const Impl& impl = *impl_;
  EngineStats s;
  s.threads = impl.roster.active.load(std::memory_order_relaxed);
  s.jobs_in_flight = impl.tracker.in_flight();
  s.jobs_submitted = static_cast<int64_t>(impl.next_job_id.load(std::memory_order_relaxed)) - 1;
  uint64_t busy_ns = 0;
  for (int i = 0; i <= impl.n_threads; ++i) {
    s.tiles_run += static_cast<int64_t>(impl.counters[static_cast<size_t>(i)].tiles.load(std::memory_order_relaxed));
    busy_ns += impl.counters[static_cast<size_t>(i)].busy_ns.load(std::memory_order_relaxed);
  }
  s.busy_seconds = static_cast<double>(busy_ns) * 1e-9;
  s.uptime_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - impl.started).count();
  return s;
}

namespace {
// Tiles named by their numbers, with the depths of the job's DAG.
class NumberedTiles : public TileNames {
 public:
  explicit NumberedTiles(std::span<const int32_t> depth) : depth_(depth.begin(), depth.end()) {}
  std::string label(int32_t tile) const override { return std::to_string(tile); }
  int32_t depth(int32_t tile) const override {
    return tile >= 0 && static_cast<size_t>(tile) < depth_.size() ? depth_[static_cast<size_t>(tile)] : -1;
  }

 private:
  std::vector<int32_t> depth_;
};
}  // namespace

std::shared_ptr<const TileNames> Job::tile_names() const { return std::make_shared<NumberedTiles>(dag().depth); }

void Engine::start_trace() { impl_->tracer.start(); }

std::vector<TileTiming> Engine::stop_trace_timings() { return impl_->tracer.stop_timings(); }

std::string Engine::stop_trace_json() {
  std::vector<std::string> names;
  for (int i = 0; i < impl_->n_threads; ++i) names.push_back("worker " + std::to_string(i));
  names.push_back("caller");
  return impl_->tracer.stop_json(names);
}

MachineProbes& EngineInternals::probes(Engine& engine) { return engine.impl_->probes; }

}  // namespace grove
