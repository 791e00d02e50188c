#include "dynamic/latency_controller.h"

#include <algorithm>
#include <cmath>

namespace grove {
namespace {

// The quantile the slowdown is read at: the target is about tail latency, not the mean.
constexpr double kSlowdownQuantile = 0.95;

int bucket_of(int64_t others) { return static_cast<int>(std::clamp<int64_t>(others, 0, 3)); }

double quantile(std::vector<double> v, double q) {
  std::sort(v.begin(), v.end());
  const size_t i = static_cast<size_t>(std::ceil(q * static_cast<double>(v.size()))) - 1;
  return v[std::min(i, v.size() - 1)];
}

}  // namespace

LatencyController::LatencyController(std::vector<int64_t> flops, std::vector<double> accuracy, int window)
    : flops_(std::move(flops)), window_(std::max(window, 1)), best_ms_(flops_.size(), 0.0) {
  for (auto& f : flops_) f = std::max<int64_t>(f, 1);
  const bool stated = accuracy.size() == flops_.size() &&
                      std::all_of(accuracy.begin(), accuracy.end(), [](double a) { return a >= 0; });
  for (size_t i = 0; i < flops_.size(); ++i)
    rank_.push_back(stated ? accuracy[i] : static_cast<double>(flops_[i]));
}

double LatencyController::base_locked(int subnet) const {
  if (best_ms_[static_cast<size_t>(subnet)] > 0) return best_ms_[static_cast<size_t>(subnet)];
  // Scale the nearest observed sub-net by FLOPs.
  for (size_t d = 1; d < flops_.size(); ++d)
    for (int j : {subnet - static_cast<int>(d), subnet + static_cast<int>(d)}) {
      if (j < 0 || j >= static_cast<int>(flops_.size()) || best_ms_[static_cast<size_t>(j)] == 0) continue;
      return best_ms_[static_cast<size_t>(j)] * static_cast<double>(flops_[static_cast<size_t>(subnet)]) /
             static_cast<double>(flops_[static_cast<size_t>(j)]);
    }
  return 0;
}

double LatencyController::slowdown_locked(int bucket) const {
  // An unseen load level: the nearest lighter one seen, stretched as if each other job took
  // an equal share of the cores; with nothing seen, no slowdown.
  for (int b = bucket; b >= 0; --b)
    if (!ratios_[b].empty())
      return quantile({ratios_[b].begin(), ratios_[b].end()}, kSlowdownQuantile) * (1.0 + bucket - b);
  return 1.0 + bucket;
}

double LatencyController::predict(int subnet, int64_t others_in_flight) const {
  std::lock_guard<std::mutex> lock(mutex_);
  return base_locked(subnet) * slowdown_locked(bucket_of(others_in_flight));
}

int LatencyController::choose(double target_ms, int64_t others_in_flight, double* predicted_ms) const {
  std::lock_guard<std::mutex> lock(mutex_);
  const double slow = slowdown_locked(bucket_of(others_in_flight));
  int best = 0;
  double best_ms = base_locked(0) * slow;
  for (int i = 1; i < static_cast<int>(flops_.size()); ++i) {
    const double ms = base_locked(i) * slow;
    if (ms > 0 && ms <= target_ms && rank_[static_cast<size_t>(i)] >= rank_[static_cast<size_t>(best)]) {
      best = i;
      best_ms = ms;
    }
  }
  if (predicted_ms) *predicted_ms = best_ms;
  return best;
}

void LatencyController::observe(int subnet, int64_t others_in_flight, double ms) {
  if (subnet < 0 || subnet >= static_cast<int>(flops_.size()) || !(ms > 0)) return;
  std::lock_guard<std::mutex> lock(mutex_);
  double& best = best_ms_[static_cast<size_t>(subnet)];
  best = best == 0 ? ms : std::min(best, ms);
  auto& ratios = ratios_[bucket_of(others_in_flight)];
  ratios.push_back(ms / base_locked(subnet));
  if (static_cast<int>(ratios.size()) > window_) ratios.pop_front();
}

}  // namespace grove
