#pragma once
// One scheduler (the paper's DSE, Algorithm 1): run a ready tile, bump each child's
// done-parents count, follow the first child that became ready and push the others to the
// pool; with nothing to follow, pop from the pool, spinning briefly and then parking.
// Worker threads and the thread inside run_job (runtime/engine.h) both run this loop.
#include <atomic>
#include <vector>

#include "runtime/adversary.h"
#include "runtime/help_board.h"
#include "runtime/ready_pool.h"
#include "runtime/roster.h"
#include "runtime/trace.h"

namespace grove {

class JobTracker;

// What one worker slot has done, for Engine::stats(). Only the thread in the slot writes it;
// its own cache line so slots do not share one.
struct alignas(64) WorkerCounters {
  std::atomic<uint64_t> tiles{0};
  std::atomic<uint64_t> busy_ns{0};  // from taking a tile off the pool to running out of children to follow
};

struct WorkerContext {
  WorkerContext(int id_, int row_, ReadyPool& pool_, Tracer& tracer_)
      : id(id_), row(row_), pool(pool_), tracer(tracer_), adversary(static_cast<uint64_t>(id_) + 1) {}

  int id;   // passed to Job::run_tile; also this worker's trace track
  int row;  // this worker's row in the pool
  ReadyPool& pool;
  Tracer& tracer;
  // Worker threads: while the roster benches this worker (Engine::set_workers, or run()'s
  // caller working in its place so N threads run tiles, not N + 1) it takes no new tile.
  // Null for run()'s caller, which is never benched.
  Roster* roster = nullptr;
  // The engine's roster for DagView::place (worker threads and run()'s caller alike), and the
  // pool row run()'s caller takes.
  const Roster* shares = nullptr;
  int caller_row = 0;
  WorkerCounters* counters = nullptr;  // null: not counted
  // While `jobs` has a job in flight, an idle worker keeps spinning up to busy_spin_ns before
  // it parks (EngineOptions::busy_spin_ms). Null or 0: it parks after kSpinScans.
  const JobTracker* jobs = nullptr;
  int64_t busy_spin_ns = 0;
  double slowdown = 1.0;         // > 1: stretch each tile to this many times its time (EngineDebugOptions::slow_worker)
  // The engine's board of running tiles offered in pieces: this worker offers its own on slot
  // `id` and takes pieces of others' when the pool is empty. Null: tiles run whole.
  HelpBoard* help = nullptr;
  uint32_t help_generation = 0;  // of this worker's last offer
  Adversary adversary;           // used only in the adversarial build
  std::vector<ReadyTile> batch;  // children readied by one tile, pushed in one go
  std::vector<int32_t> alone_ready;  // run_alone's ready tiles
};

// An idle worker spins this many pool scans, with kPausesPerScan pauses after each, before it
// parks (or goes on spinning while a job is in flight, WorkerContext::busy_spin_ns): long
// enough to catch the next push of a busy job, short enough that an idle engine quickly stops
// burning CPU.
inline constexpr int kSpinScans = 64;
inline constexpr int kPausesPerScan = 32;

inline void cpu_relax() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#endif
}

// Runs tiles until `quit` is raised and the worker finds no tile to run.
void work_until(WorkerContext& worker, const std::atomic<bool>& quit);

class JobState;
// Runs every tile of `job` on this thread, none through the pool (Job::alone): a ready child
// is run next, depth first, as a worker follows one. Completes the job (JobState::complete)
// with its last tile; `job` is gone when this returns.
void run_alone(WorkerContext& worker, JobState& job);

}  // namespace grove
