#include "runtime/alone_trial.h"

#include <algorithm>
#include <cstdio>

namespace grove {

namespace alone_trial {  // named: the runtime layer compiles as a unity build
double median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}
}  // namespace alone_trial

AloneVerdict decide_run_alone(const std::vector<double>& shared_runs, const std::vector<double>& alone_runs) {
  AloneVerdict v;
  v.shared_ms = alone_trial::median(shared_runs);
  v.alone_ms = alone_trial::median(alone_runs);
  v.alone = !alone_runs.empty() && v.alone_ms <= AloneTrial::kAloneAtMost * v.shared_ms;
  char line[200];
  std::snprintf(line, sizeof line, "runs %s: %.3f ms alone on the caller against %.3f ms shared (medians of %zu runs each)",
                v.alone ? "alone" : "shared", v.alone_ms, v.shared_ms, std::min(shared_runs.size(), alone_runs.size()));
  v.line = line;
  return v;
}

AloneTrial::Turn AloneTrial::next() {
  const int decided = decided_.load(std::memory_order_acquire);
  if (decided != kUndecided) return {decided == 1, false};
  std::lock_guard<std::mutex> lock(mutex_);
  const int turn = turns_++;
  const int way = (turn / kBlockRuns) % 2;  // shared first
  return {way == 1, turn % kBlockRuns != 0};
}

void AloneTrial::record(const Turn& turn, double ms) {
  if (!turn.timed) return;
  std::lock_guard<std::mutex> lock(mutex_);
  if (decided_.load(std::memory_order_relaxed) != kUndecided) return;  // runs side by side: one decided it
  std::vector<double>& times = times_[turn.alone ? 1 : 0];
  times.push_back(ms);
  if (times_[0].size() < size_t(kTimedRuns) || times_[1].size() < size_t(kTimedRuns)) return;
  const AloneVerdict v = decide_run_alone(times_[0], times_[1]);
  verdict_ = v.line;
  decided_.store(v.alone ? 1 : 0, std::memory_order_release);
}

std::string AloneTrial::verdict() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return verdict_;
}

}  // namespace grove
