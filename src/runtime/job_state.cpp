#include "runtime/job_state.h"

#include <algorithm>
#include <climits>
#include <string>
#include <vector>

#include "graph/error.h"
#include "runtime/parker.h"

namespace grove {

namespace {

[[noreturn]] void bad_dag(const std::string& what) { throw Error("engine: malformed tile DAG: " + what); }

}  // namespace

int32_t validate_dag(const DagView& dag) {
  const size_t tiles = dag.n_parents.size();
  if (tiles > static_cast<size_t>(INT32_MAX)) bad_dag("too many tiles");
  if (dag.child_begin.size() != tiles + 1)
    bad_dag("child_begin has " + std::to_string(dag.child_begin.size()) + " entries, expected tiles + 1 = " +
            std::to_string(tiles + 1));
  if (dag.depth.size() != tiles)
    bad_dag("depth has " + std::to_string(dag.depth.size()) + " entries for " + std::to_string(tiles) + " tiles");
  if (!dag.place.empty() && dag.place.size() != tiles)
    bad_dag("place has " + std::to_string(dag.place.size()) + " entries for " + std::to_string(tiles) + " tiles");
  if (dag.child_begin[0] != 0 || dag.child_begin[tiles] != static_cast<int64_t>(dag.children.size()))
    bad_dag("child_begin must start at 0 and end at the number of children");

  std::vector<int32_t> in_degree(tiles, 0);
  int32_t max_depth = -1;
  for (size_t t = 0; t < tiles; ++t) {
    if (dag.child_begin[t] > dag.child_begin[t + 1]) bad_dag("child_begin decreases at tile " + std::to_string(t));
    if (dag.depth[t] < 0) bad_dag("negative depth at tile " + std::to_string(t));
    max_depth = std::max(max_depth, dag.depth[t]);
    for (int64_t e = dag.child_begin[t]; e < dag.child_begin[t + 1]; ++e) {
      int32_t c = dag.children[static_cast<size_t>(e)];
      if (c < 0 || static_cast<size_t>(c) >= tiles)
        bad_dag("tile " + std::to_string(t) + " has child " + std::to_string(c) + " out of range");
      if (dag.depth[static_cast<size_t>(c)] <= dag.depth[t])
        bad_dag("depth does not grow from tile " + std::to_string(t) + " to its child " + std::to_string(c) +
                " (a cycle or wrong depths)");
      ++in_degree[static_cast<size_t>(c)];
    }
  }
  size_t roots = 0;
  for (size_t t = 0; t < tiles; ++t) {
    if (dag.n_parents[t] != in_degree[t])
      bad_dag("tile " + std::to_string(t) + " says " + std::to_string(dag.n_parents[t]) + " parents but has " +
              std::to_string(in_degree[t]));
    if (in_degree[t] == 0) ++roots;
  }
  if (dag.sources.size() != roots)
    bad_dag(std::to_string(dag.sources.size()) + " sources listed, but " + std::to_string(roots) +
            " tiles have no parents");
  for (int32_t s : dag.sources) {
    if (s < 0 || static_cast<size_t>(s) >= tiles) bad_dag("source " + std::to_string(s) + " out of range");
    // Marks each source as seen by making its in-degree -1: a repeat or a non-root fails.
    if (in_degree[static_cast<size_t>(s)] != 0)
      bad_dag("source " + std::to_string(s) + " has parents or is listed twice");
    in_degree[static_cast<size_t>(s)] = -1;
  }
  return max_depth;
}

void JobTracker::add() {
  unfinished_.fetch_add(1, std::memory_order_acq_rel);
  std::lock_guard lock(mutex_);
  ++in_flight_;
  busy_.fetch_add(1, std::memory_order_relaxed);
}

void JobTracker::remove() {
  std::lock_guard lock(mutex_);
  busy_.fetch_sub(1, std::memory_order_relaxed);
  // Notified under the lock: the waiter may destroy the tracker as soon as it sees zero.
  if (--in_flight_ == 0) idle_.notify_all();
}

void JobTracker::wait_until_idle() {
  std::unique_lock lock(mutex_);
  idle_.wait(lock, [this] { return in_flight_ == 0; });
}

JobState::JobState(std::shared_ptr<Job> job_, DagView dag_, int32_t max_depth_, uint64_t id_)
    : job(std::move(job_)),
      dag(dag_),
      max_depth(max_depth_),
      id(id_),
      urgent(job->urgent()),
      cancel_(job->cancel_token()),
      done_parents_(std::make_unique<std::atomic<int32_t>[]>(dag_.n_parents.size())),
      remaining_(static_cast<int64_t>(dag_.n_parents.size())) {}

void JobState::fail(std::exception_ptr error) {
  if (!failed_.exchange(true, std::memory_order_acq_rel)) error_ = std::move(error);
}

void JobState::cancel_now() {
  // Cold: once per worker that sees the token stopped, until failed_ is set.
  fail(std::make_exception_ptr(Error(cancel_.reason(), Error::Kind::cancelled)));
}

void JobState::complete(JobState* state) {
  std::promise<void> promise = std::move(state->promise);
  std::exception_ptr error = state->error_;
  state->tracker->finishing();  // before anyone can see the job's result
  state->job->finished(error);
  std::atomic<bool>* done_flag = state->done_flag;
  Parker* parker = state->parker;
  JobTracker* tracker = state->tracker;
  // The engine drops its reference to the Job before the future becomes ready.
  delete state;
  if (error)
    promise.set_exception(std::move(error));
  else
    promise.set_value();
  // This thread lets go of the promise (and with it the error) before telling a run()
  // caller, so the caller, which takes the error from the future after that, holds its last
  // reference and frees it on its own thread: the exception's reference count lives in
  // libstdc++, where ThreadSanitizer cannot see it order a free here after the caller's reads.
  { const std::promise<void> released = std::move(promise); }
  if (done_flag) {
    done_flag->store(true, std::memory_order_release);
    parker->notify_all();
  }
  tracker->remove();
}

}  // namespace grove
