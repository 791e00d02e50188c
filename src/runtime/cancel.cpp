#include "grove/cancel.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "grove/error.h"

namespace grove {

CancelToken CancelToken::manual() {
  CancelToken t;
  t.state_ = std::make_shared<State>();
  return t;
}

CancelToken CancelToken::after(double seconds) {
  // Not finite or not positive: already past. Clamped so the sum cannot overflow the clock.
  const double budget = std::isfinite(seconds) && seconds > 0 ? std::min(seconds, 1e9) : 0;
  return until(Clock::now() + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(budget)), budget);
}

CancelToken CancelToken::until(Clock::time_point deadline, double budget_s) {
  CancelToken t = manual();
  t.state_->has_deadline = true;
  t.state_->deadline = deadline;
  t.state_->budget_s = budget_s;
  return t;
}

CancelToken CancelToken::child() const {
  CancelToken t = manual();
  if (state_) {
    t.state_->has_deadline = state_->has_deadline;
    t.state_->deadline = state_->deadline;
    t.state_->budget_s = state_->budget_s;
    t.state_->parent = state_;
  }
  return t;
}

bool CancelToken::has_deadline() const { return state_ && state_->has_deadline; }

CancelToken::Clock::time_point CancelToken::deadline() const {
  return has_deadline() ? state_->deadline : Clock::time_point::max();
}

void CancelToken::cancel(const char* reason) const {
  if (!state_) return;
  const char* none = nullptr;
  // The reason goes first (release), so whoever sees kCancelled (acquire) can read it.
  state_->cancel_reason.compare_exchange_strong(none, reason, std::memory_order_release);
  int running = kRunning;
  state_->why.compare_exchange_strong(running, kCancelled, std::memory_order_release);
}

bool CancelToken::deadline_passed() const {
  if (Clock::now() < state_->deadline) return false;
  int running = kRunning;
  state_->why.compare_exchange_strong(running, kDeadline, std::memory_order_relaxed);
  return true;
}

std::string CancelToken::reason() const {
  if (!stopped()) return "";
  for (const State* s = state_.get(); s; s = s->parent.get()) {
    const int why = s->why.load(std::memory_order_acquire);
    if (why == kCancelled) {
      const char* r = s->cancel_reason.load(std::memory_order_acquire);
      return std::string("run cancelled: ") + (r ? r : "cancel() was called");
    }
    if (why == kDeadline) {
      char budget[32];
      std::snprintf(budget, sizeof budget, "%g", s->budget_s);
      return std::string("run cancelled: deadline of ") + budget + " s passed";
    }
  }
  return "run cancelled";  // not reached: stopped() saw one of the states stopped
}

void CancelToken::throw_if_stopped() const {
  if (stopped()) throw Error(reason(), Error::Kind::cancelled);
}

}  // namespace grove
