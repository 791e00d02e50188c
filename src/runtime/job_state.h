#pragma once
// Per-job bookkeeping, separate from the (shared, immutable) DAG: the done-parents counter of
// every tile, the number of tiles still to finish, the first exception, and the promise.
// A JobState lives from submit until its last tile finishes; the worker that finishes that
// tile completes the promise and deletes the state.
#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <exception>
#include <future>
#include <memory>
#include <mutex>

#include "runtime/engine.h"

namespace grove {

class Parker;

// Checks that `dag` is well formed, so a bad DAG is an error at submit rather than a hang or
// an out-of-bounds read later: sizes agree, child indices are in range, every tile's
// n_parents equals its in-degree, `sources` are exactly the tiles without parents (each once),
// and depth grows along every edge (which also rules out cycles). O(tiles + edges).
// Returns the largest depth (-1 for an empty DAG). Throws Error.
int32_t validate_dag(const DagView& dag);

// Counts the jobs in flight so the engine can wait for them before stopping its workers.
class JobTracker {
 public:
  void add();
  // The job is done and about to hand out its result (Job::finished, the future): it leaves
  // in_flight() here, so whoever sees its result sees the count without it (a server that
  // answers a cancelled run's 504 finds the engine's jobs in flight back where they were).
  void finishing() { unfinished_.fetch_sub(1, std::memory_order_acq_rel); }
  void remove();  // last: the job's thread touches nothing of the engine after this
  void wait_until_idle();
  int64_t in_flight() const { return unfinished_.load(std::memory_order_acquire); }
  // Lock-free, for idle workers deciding whether to keep spinning: may be stale.
  bool busy() const { return busy_.load(std::memory_order_relaxed) > 0; }

 private:
  std::atomic<int64_t> busy_{0};  // in_flight_, readable without the lock
  std::atomic<int64_t> unfinished_{0};  // added and not yet finishing()
  mutable std::mutex mutex_;
  std::condition_variable idle_;
  int64_t in_flight_ = 0;
};

struct JobState {
  JobState(std::shared_ptr<Job> job, DagView dag, int32_t max_depth, uint64_t id);

  // A tile that throws, or the job's CancelToken once stopped, cancels the tiles not yet
  // started: they are skipped but still counted as done, so the children bookkeeping (and
  // completion) goes on as usual. Called once per tile a worker takes: a relaxed load, and
  // for a job with a token one more (with a deadline, a clock read) until it stops.
  bool cancelled() {
    if (failed_.load(std::memory_order_relaxed)) return true;
    if (!cancel_.stopped()) return false;  // an empty token: one null test
    cancel_now();
    return true;
  }
  void fail(std::exception_ptr error);

  // One more parent of `child` finished; true for the call that makes it ready. acq_rel: the
  // caller that readies the child has seen everything every parent wrote.
  bool parent_finished(int32_t child) {
    return done_parents_[child].fetch_add(1, std::memory_order_acq_rel) + 1 == dag.n_parents[child];
  }
  // True for the call that finishes the job's last tile: the caller must then call complete().
  bool tile_finished() { return remaining_.fetch_sub(1, std::memory_order_acq_rel) == 1; }

  // Deletes `state`, then fulfils its promise, sets its done flag, and tells the tracker.
  static void complete(JobState* state);

  std::shared_ptr<Job> job;
  DagView dag;
  int32_t max_depth;
  uint64_t id;
  bool urgent;  // job->urgent(), read once
  std::promise<void> promise;
  // Set by run_job (runtime/engine.h): raised (then `parker` notified) when the job is complete, for the
  // calling thread that works while it waits.
  std::atomic<bool>* done_flag = nullptr;
  Parker* parker = nullptr;
  JobTracker* tracker = nullptr;

 private:
  void cancel_now();  // fails the job with its token's reason

  CancelToken cancel_;  // job->cancel_token(), read once
  std::unique_ptr<std::atomic<int32_t>[]> done_parents_;
  std::atomic<int64_t> remaining_;
  std::atomic<bool> failed_{false};
  std::exception_ptr error_;  // written once by the first failing tile, read by complete()
};

}  // namespace grove
