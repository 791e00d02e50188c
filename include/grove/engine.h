#pragma once
// The scheduling engine (the paper's DSE + ready pool): one worker thread per core, each
// running Algorithm 1 over the tile DAG of every Job in flight. Several jobs (runs of one
// model or of different models) share the pool at once.
#include <cstdint>
#include <exception>
#include <future>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "grove/cancel.h"
#include "grove/priority_policy.h"

namespace grove {

struct MachineProbes;  // src/runtime/machine_probes.h

// What the engine needs of a tile DAG. The spans must outlive the job.
struct DagView {
  std::span<const int32_t> n_parents;
  std::span<const int64_t> child_begin;  // CSR, size = tiles + 1
  std::span<const int32_t> children;
  std::span<const int32_t> depth;        // priority: shallower first
  std::span<const int32_t> sources;
  // Optional, per tile: where in its op's output it lies, as a fraction of 65536 (the middle
  // of its first cut dim). The places are cut into one share per active worker: a source or
  // a readied tile goes to the pool row of its share's worker, and of the children a tile
  // readies a worker follows one in its own share, so the rows a core wrote are the rows it
  // reads next. Stealing is unchanged. Empty: sources round-robin, the first child followed.
  std::span<const uint16_t> place;
};

// One unit of submitted work, e.g. one inference. The engine calls run_tile once per tile,
// never before all its parents finished (and it sees everything they wrote); a tile that
// throws cancels the tiles not yet started and the job's future carries the first exception;
// so does the job's CancelToken once it is stopped (cancel_token below).
// `worker` is in [0, Engine::worker_slots()): no two tiles run at once with the same value,
// so it can index per-worker scratch space. dag() is read once, at submit.
class Job {
 public:
  virtual ~Job() = default;
  virtual DagView dag() const = 0;
  virtual void run_tile(int32_t tile, int worker) = 0;
  // For traces: a short label of a tile ("conv1 #3").
  virtual std::string tile_label(int32_t tile) const { return std::to_string(tile); }
  // Called once, by the thread that finishes the job (or by submit() for an empty DAG),
  // after every tile and before the future from submit() becomes ready; `error` is the first
  // exception of a tile, or null. Lets a job hand out its own result without a thread
  // waiting on the future.
  virtual void finished(std::exception_ptr error) noexcept {}
  // An urgent job's ready tiles are taken before any other job's (the pool scans their own
  // column of every row first): a run under a latency target beside batch work. A worker
  // still finishes the tile in hand and follows its child first.
  virtual bool urgent() const { return false; }
  // Read once, at submit. Once the token is stopped, a worker taking one of the job's tiles
  // skips it (as after a failing tile) and the job ends with an Error of kind `cancelled`
  // naming why; tiles already running finish.
  virtual CancelToken cancel_token() const { return {}; }
};

// One traced tile, for tools that analyse a trace (grove simulate) rather than show it.
struct TileTiming {
  uint64_t job = 0;     // the engine's id of the job, in submission order
  int32_t tile = -1;    // index into the job's DAG
  int track = 0;        // the worker slot that ran it
  int64_t start_ns = 0, end_ns = 0;  // since start_trace()
};

struct EngineOptions {
  int threads = 0;        // 0: the cores this process may use (affinity mask and cgroup quota)
  // Elastic engines: worker threads started (the most set_workers() can activate); 0 or
  // less than `threads`: `threads`. Workers past `threads` wait, benched, until activated.
  int max_threads = 0;
  bool pin = true;        // pin worker i to the i-th allowed core (best effort)
  bool caller_works = true;  // run(): the calling thread runs tiles while it waits, in place of the last worker
  PriorityPolicy priority;   // the ready pool's columns: shallower depth first by default
  // Test mode for uneven cores (docs/scaling.md): worker thread 0 takes this many times as
  // long over each tile (it busy-waits after the tile), a stand-in for a slower or shared core.
  // 1: off; clamped to [1, 1000]. With one thread, run()'s caller does the work and nothing
  // is slowed.
  double slow_worker = 1.0;
  // While a job is in flight, an idle worker spins up to this long before it parks: a parked
  // core takes tens of microseconds to wake (more in a VM; docs/runtime.md), longer than the
  // gaps between a run's tiles. 0: park after a short spin. Off when `threads` is more than
  // the cores this process may use (a spinning worker would take a core from a working one).
  double busy_spin_ms = 2.0;
};

// Totals since the engine started, for monitoring (a server's /metrics).
struct EngineStats {
  int threads = 0;
  int64_t jobs_in_flight = 0;   // submitted and not finished
  int64_t jobs_submitted = 0;
  int64_t tiles_run = 0;
  double busy_seconds = 0;      // summed over workers (and run() callers): time spent running tiles
  double uptime_seconds = 0;    // busy_seconds / (uptime_seconds * threads) is the busy fraction
};

class Engine {
 public:
  explicit Engine(EngineOptions options = {});
  ~Engine();  // waits for jobs in flight, then stops the workers
  Engine(const Engine&) = delete;
  Engine& operator=(const Engine&) = delete;

  int threads() const;      // worker threads taking tiles now (set_workers changes it)
  int max_threads() const;  // worker threads started: the most set_workers() can activate
  // Distinct `worker` values run_tile may see: max_threads(), plus one for a run() caller.
  int worker_slots() const;
  // Elastic resize while runs are in flight: from now on, workers 0..n-1 take tiles (n is
  // clamped to [1, max_threads()] and returned). An added worker starts popping at once; a
  // removed one finishes the tile in hand, puts the child it would have followed back in
  // the pool, and waits until it is added again. No tile is lost or run twice.
  int set_workers(int n);
  // Starts the job; the future is ready when every tile has run (or one threw), after the
  // engine has dropped its reference to the job (unless a trace holds it). Throws Error at
  // once for a malformed DAG (see validate_dag in job_state.h).
  std::future<void> submit(std::shared_ptr<Job> job);
  // submit + wait, with the calling thread taking part as a worker while it waits (one such
  // caller at a time; others just wait). Rethrows the job's exception. Not from inside run_tile.
  void run(std::shared_ptr<Job> job);

  EngineStats stats() const;

  // The machine measurements this engine's sessions plan with, taken once and shared
  // (internal: src/runtime/machine_probes.h).
  MachineProbes& probes();

  // Chrome/Perfetto trace of the tiles run while tracing is on (one track per worker, then
  // one for run() callers). While tracing, the engine keeps the traced jobs alive.
  void start_trace();
  std::string stop_trace_json();
  // Stops the trace like stop_trace_json, returning the raw timings, sorted by start.
  std::vector<TileTiming> stop_trace_timings();

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// Cores this process may use: the affinity mask, capped by the cgroup CPU quota.
int available_cores();

}  // namespace grove
