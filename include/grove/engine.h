#pragma once
// The scheduling engine (the paper's DSE + ready pool): one worker thread per core, each
// running Algorithm 1 over the tile DAG of every job in flight (a job is one inference of a
// Session). Several jobs (runs of one model or of different models) share the pool at once.
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "grove/cancel.h"
#include "grove/priority_policy.h"

namespace grove {

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
  // Session::run: the calling thread runs tiles while it waits, in place of the last worker.
  bool caller_works = true;
  PriorityPolicy priority;   // the ready pool's columns: shallower depth first by default
  // While a job is in flight, an idle worker spins up to this long before it parks: a parked
  // core takes tens of microseconds to wake (more in a VM; docs/runtime.md), longer than the
  // gaps between a run's tiles. 0: park after a short spin. Off when `threads` is more than
  // the cores this process may use (a spinning worker would take a core from a working one).
  double busy_spin_ms = 2.0;
  // Workers at the idle scheduling class (Linux SCHED_IDLE): they run only on cores no other
  // thread wants, so an engine for background work (a calibration) never delays another's.
  bool idle_priority = false;
};

// Totals since the engine started, for monitoring (a server's /metrics).
struct EngineStats {
  int threads = 0;
  int64_t jobs_in_flight = 0;   // submitted and not finished
  int64_t jobs_submitted = 0;
  int64_t tiles_run = 0;
  double busy_seconds = 0;      // summed over workers (and Session::run callers): time spent running tiles
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
  // Elastic resize while runs are in flight: from now on, workers 0..n-1 take tiles (n is
  // clamped to [1, max_threads()] and returned). An added worker starts popping at once; a
  // removed one finishes the tile in hand, puts the child it would have followed back in
  // the pool, and waits until it is added again. No tile is lost or run twice.
  int set_workers(int n);

  EngineStats stats() const;

  // Chrome/Perfetto trace of the tiles run while tracing is on (one track per worker, then
  // one for the threads in Session::run). While tracing, the engine keeps the traced jobs alive.
  void start_trace();
  std::string stop_trace_json();
  // Stops the trace like stop_trace_json, returning the raw timings, sorted by start.
  std::vector<TileTiming> stop_trace_timings();

 private:
  // The library's own access (src/runtime/engine.h): submitting tile-DAG jobs, the machine
  // measurements its sessions share, and engines with test switches. Not part of the API.
  friend struct EngineInternals;
  struct Impl;
  explicit Engine(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

// Cores this process may use: the affinity mask, capped by the cgroup CPU quota.
int available_cores();

}  // namespace grove
