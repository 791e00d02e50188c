#pragma once
// Stopping a run before it is done. A CancelToken goes with a run (Session::run, run_values,
// submit; Model::run_reference): once it is stopped, by cancel() or by its deadline passing,
// the run's tiles not yet started are skipped, segments and subgraph runs (If, Loop, Scan)
// not yet started are not started, and the run ends with an Error of kind `cancelled`
// ("run cancelled: deadline of 0.2 s passed"). Tiles already running finish first: a run
// stops within about one tile's time. Copies share their state, so the caller keeps one copy
// to cancel the run holding another. An empty (default) token never stops and costs one
// null test to check.
#include <atomic>
#include <chrono>
#include <memory>
#include <string>

namespace grove {

class CancelToken {
 public:
  using Clock = std::chrono::steady_clock;

  CancelToken() = default;  // never stops
  // Stops when cancel() is called.
  static CancelToken manual();
  // Stops when cancel() is called or `seconds` from now (a time budget; not finite or
  // <= 0: at once).
  static CancelToken after(double seconds);
  // Stops when cancel() is called or at `deadline`; `budget_s` only words the error.
  static CancelToken until(Clock::time_point deadline, double budget_s);
  // A token that stops when this one does (keeping its deadline) or when its own cancel()
  // is called, which leaves this one running. Of an empty token: a manual one.
  CancelToken child() const;

  bool empty() const { return state_ == nullptr; }
  bool has_deadline() const;
  Clock::time_point deadline() const;  // Clock::time_point::max() without one

  // Stops the runs holding this token or a child of it; thread-safe, and only the first
  // call's `reason` (a string literal: it is kept) is reported. No effect on an empty token.
  void cancel(const char* reason = "cancel() was called") const;
  // Whether the token is stopped. One relaxed load per level (a child reads its parent);
  // with a deadline, also one clock read until the deadline passes.
  bool stopped() const {
    if (!state_) return false;
    for (const State* s = state_.get(); s; s = s->parent.get())
      if (s->why.load(std::memory_order_relaxed) != kRunning) return true;
    return state_->has_deadline && deadline_passed();
  }
  // "run cancelled: ..." naming why, or "" while the token runs.
  std::string reason() const;
  // Throws Error (Kind::cancelled) with reason() when stopped().
  void throw_if_stopped() const;

 private:
  enum Why : int { kRunning, kCancelled, kDeadline };
  struct State {
    std::atomic<int> why{kRunning};
    std::atomic<const char*> cancel_reason{nullptr};  // written before `why` turns kCancelled
    bool has_deadline = false;
    Clock::time_point deadline = Clock::time_point::max();
    double budget_s = 0;
    std::shared_ptr<const State> parent;
  };
  bool deadline_passed() const;  // reads the clock; marks the token stopped when it passed

  std::shared_ptr<State> state_;
};

}  // namespace grove
