#pragma once
// The threads of a Session's submitted runs that cannot be one job on the engine: a chain of
// segments (If, Loop, Scan, sequence ops: each segment's job waits for the one before) and
// the reference executor. Each runs on a thread the session owns: finished threads are
// joined at the next start, and join_all (the session's destructor, move assignment) waits
// for every one, so no such thread outlives the state it reads. How long that wait is, is up
// to the runs' CancelTokens: a run with a deadline stops at it.
#include <exception>
#include <future>
#include <iterator>
#include <list>
#include <mutex>
#include <thread>
#include <utility>

namespace grove {

class RunThreads {
 public:
  RunThreads() = default;
  RunThreads(const RunThreads&) = delete;
  RunThreads& operator=(const RunThreads&) = delete;
  ~RunThreads() { join_all(); }

  // Runs `body` on a new thread; the future gets what it returns or throws. Throws
  // std::system_error when no thread can be started (nothing then runs).
  template <class F>
  auto start(F body) -> std::future<decltype(body())> {
    using R = decltype(body());
    std::promise<R> promise;
    std::future<R> future = promise.get_future();
    std::lock_guard<std::mutex> lock(mutex_);
    join_finished_locked();
    runs_.emplace_back();
    const auto run = std::prev(runs_.end());
    try {
      // The new thread touches its entry only under the lock, so not before it is filled in.
      run->thread = std::thread([this, run, body = std::move(body), promise = std::move(promise)]() mutable {
        try {
          promise.set_value(body());
        } catch (...) {
          promise.set_exception(std::current_exception());
        }
        std::lock_guard<std::mutex> done(mutex_);
        run->finished = true;
      });
    } catch (...) {
      runs_.erase(run);
      throw;
    }
    return future;
  }

  // Waits for every thread started so far.
  void join_all() {
    std::list<Run> all;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      all.splice(all.end(), runs_);  // entries keep their addresses: a thread may still mark its own
    }
    for (Run& r : all) r.thread.join();
  }

 private:
  struct Run {
    std::thread thread;
    bool finished = false;  // guarded by mutex_: the body is done, the thread about to end
  };
  void join_finished_locked() {
    for (auto it = runs_.begin(); it != runs_.end();) {
      if (!it->finished) {
        ++it;
        continue;
      }
      it->thread.join();  // it set `finished` under the lock we hold, then let go: it is ending
      it = runs_.erase(it);
    }
  }

  std::mutex mutex_;
  std::list<Run> runs_;
};

}  // namespace grove
