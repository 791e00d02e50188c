#pragma once
// Predicts each sub-net's latency under the engine's current load and picks the most
// accurate one expected to meet a target (paper 002's run-time switch).
//
// A sub-net's latency is modelled as base[i] x slowdown(load): base is its fastest run so
// far (alone on the cores: a recent-runs window would learn a loaded time as the base and
// never try the larger sub-nets again once the load stops), and the slowdown, shared by all sub-nets, is a high quantile of
// recent (latency / base) ratios observed at the same load, where load is the number of
// other jobs in flight on the engine when a run starts (co-running models take cores). A
// sub-net never run is predicted from the nearest one that was, scaled by FLOPs.
#include <cstdint>
#include <deque>
#include <mutex>
#include <vector>

namespace grove {

class LatencyController {
 public:
  // `flops` per sub-net, cheapest first; a zero entry counts as 1. `accuracy` per sub-net
  // ranks the ones that meet a target (empty, or any entry < 0: FLOPs rank them).
  explicit LatencyController(std::vector<int64_t> flops, std::vector<double> accuracy = {}, int window = 64);

  // The most accurate sub-net predicted to meet target_ms (sub-net 0, the cheapest, when none
  // is) and its prediction (0 when nothing has been observed yet: the cheapest then runs
  // first to learn its cost).
  int choose(double target_ms, int64_t others_in_flight, double* predicted_ms = nullptr) const;
  double predict(int subnet, int64_t others_in_flight) const;
  void observe(int subnet, int64_t others_in_flight, double ms);

 private:
  static constexpr int kLoadBuckets = 4;  // 0, 1, 2, 3+ other jobs
  double base_locked(int subnet) const;
  double slowdown_locked(int bucket) const;

  mutable std::mutex mutex_;
  std::vector<int64_t> flops_;
  std::vector<double> rank_;  // higher is better among sub-nets that meet the target
  int window_;
  std::vector<double> best_ms_;                // per sub-net; 0 until it has run
  std::deque<double> ratios_[kLoadBuckets];    // latency / base, per load bucket
};

}  // namespace grove
