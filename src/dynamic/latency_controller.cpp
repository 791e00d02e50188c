#include "dynamic/latency_controller.h"

#include <algorithm>
#include <cmath>

namespace grove {
namespace {

// Targets are about P99 latency, not the mean.
constexpr double kQuantile = 0.99;
// Own runs needed before they alone predict a sub-net; fewer make a noisy P99.
constexpr size_t kMinOwnSamples = 32;
constexpr size_t kMaxSamples = 512;
// How long a sample counts: long enough for a P99 of the runs of a busy second, short enough
// that a burst of load does not rule a sub-net out for long.
constexpr double kMemorySeconds = 3.0;

// Under load, runs aim this far under the target per other job in flight. A co-running job
// makes the tail heavy and bursty: the P99 of the last seconds then predicts the next
// second's only within a spread that grows with the jobs, so a sub-net predicted right at
// the target misses it in about half the windows. Alone on the cores the P99 is steady, and
// the aim is the target itself, so the full model runs whenever it fits.
constexpr double kHeadroomPerJob = 0.1;

// How long a load counts after it was last seen: longer than the gap between a co-runner's
// runs, shorter than a phase of load.
constexpr double kLoadHoldSeconds = 0.1;

int bucket_of(int64_t others) { return static_cast<int>(std::clamp<int64_t>(others, 0, 3)); }

template <class Samples>
double quantile_ms(const Samples& samples, double q) {
  std::vector<double> v;
  for (const auto& s : samples) v.push_back(s.ms);
  // Every run asks for several quantiles: a selection, not a sort.
  const size_t i = std::min(static_cast<size_t>(std::ceil(q * static_cast<double>(v.size()))) - 1, v.size() - 1);
  std::nth_element(v.begin(), v.begin() + static_cast<std::ptrdiff_t>(i), v.end());
  return v[i];
}

}  // namespace

LatencyController::LatencyController(std::vector<int64_t> flops) : flops_(std::move(flops)), best_ms_(flops_.size(), 0.0) {
  for (auto& f : flops_) f = std::max<int64_t>(f, 1);
  for (auto& own : own_) own.resize(flops_.size());
}

void LatencyController::expire_locked(std::deque<Sample>& samples, double now_s) const {
  while (!samples.empty() && (samples.front().t < now_s - kMemorySeconds || samples.size() > kMaxSamples))
    samples.pop_front();
}

double LatencyController::base_locked(int subnet) const {
  if (best_ms_[static_cast<size_t>(subnet)] > 0) return best_ms_[static_cast<size_t>(subnet)];
  for (size_t d = 1; d < flops_.size(); ++d)
    for (int j : {subnet - static_cast<int>(d), subnet + static_cast<int>(d)}) {
      if (j < 0 || j >= static_cast<int>(flops_.size()) || best_ms_[static_cast<size_t>(j)] == 0) continue;
      return best_ms_[static_cast<size_t>(j)] * static_cast<double>(flops_[static_cast<size_t>(subnet)]) /
             static_cast<double>(flops_[static_cast<size_t>(j)]);
    }
  return 0;
}

double LatencyController::predict_locked(int subnet, int bucket, double now_s) {
  auto& own = own_[bucket][static_cast<size_t>(subnet)];
  expire_locked(own, now_s);
  if (own.size() >= kMinOwnSamples) return quantile_ms(own, kQuantile);
  const double base = base_locked(subnet);
  if (base == 0) return 0;
  // An unseen load level: the nearest lighter one seen, plus one run of this sub-net per
  // extra job (as if each took its turn on the cores); with nothing seen, the same from zero.
  for (int b = bucket; b >= 0; --b) {
    expire_locked(excess_[b], now_s);
    if (!excess_[b].empty()) return base + quantile_ms(excess_[b], kQuantile) + (bucket - b) * base;
  }
  return base * (1.0 + bucket);
}

int64_t LatencyController::load(int64_t jobs_in_flight, double now_s) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (jobs_in_flight > 0 && (jobs_in_flight >= recent_load_ || now_s - recent_load_s_ > kLoadHoldSeconds)) {
    recent_load_ = jobs_in_flight;
    recent_load_s_ = now_s;
  }
  return now_s - recent_load_s_ <= kLoadHoldSeconds ? std::max(jobs_in_flight, recent_load_) : jobs_in_flight;
}

double LatencyController::predict(int subnet, int64_t others_in_flight, double now_s) {
  std::lock_guard<std::mutex> lock(mutex_);
  return predict_locked(subnet, bucket_of(others_in_flight), now_s);
}

int LatencyController::choose(double target_ms, int64_t others_in_flight, double now_s, double* predicted_ms) {
  std::lock_guard<std::mutex> lock(mutex_);
  const int bucket = bucket_of(others_in_flight);
  const double aim = target_ms * std::max(0.0, 1.0 - kHeadroomPerJob * bucket);
  int best = 0;
  double best_ms = predict_locked(0, bucket, now_s);
  for (int i = 1; i < static_cast<int>(flops_.size()); ++i) {
    const double ms = predict_locked(i, bucket, now_s);
    if (ms > 0 && ms <= aim) {
      best = i;
      best_ms = ms;
    }
  }
  if (predicted_ms) *predicted_ms = best_ms;
  return best;
}

void LatencyController::observe(int subnet, int64_t others_in_flight, double ms, double now_s) {
  if (subnet < 0 || subnet >= static_cast<int>(flops_.size()) || !(ms > 0)) return;
  std::lock_guard<std::mutex> lock(mutex_);
  double& best = best_ms_[static_cast<size_t>(subnet)];
  best = best == 0 ? ms : std::min(best, ms);
  const int bucket = bucket_of(others_in_flight);
  own_[bucket][static_cast<size_t>(subnet)].push_back({now_s, ms});
  excess_[bucket].push_back({now_s, ms - best});
  expire_locked(own_[bucket][static_cast<size_t>(subnet)], now_s);
  expire_locked(excess_[bucket], now_s);
}

}  // namespace grove
