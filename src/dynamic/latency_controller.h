#pragma once
// Predicts each sub-net's latency under the engine's current load and picks the widest one
// expected to meet a target (paper 002's run-time switch). docs/dynamic.md.
//
// The load is the number of other jobs in flight on the engine when a run starts (0, 1, 2,
// 3+): co-running models take cores and fill the ready pool. Each prediction is a P99:
//  - from the sub-net's own recent runs at this load, when there are enough of them;
//  - else its base (fastest run so far, i.e. alone on the cores) plus the P99 of recent
//    (latency - base) of any sub-net at this load. Additive, because under a co-running
//    model the tail is mostly waiting for the other model's tiles;
//  - a sub-net never run is scaled by FLOPs from the nearest one that was.
// Samples expire after a few seconds, so a sub-net ruled out by a burst of load is tried
// again (from the shared estimate) once the burst is over.
#include <cstdint>
#include <deque>
#include <mutex>
#include <vector>

namespace grove {

class LatencyController {
 public:
  // `flops` per sub-net, cheapest first; a zero entry counts as 1.
  explicit LatencyController(std::vector<int64_t> flops);

  // The costliest sub-net predicted to meet target_ms (10% under it per other job in flight),
  // taken as the most accurate (sub-net
  // 0, the cheapest, when none is), and its prediction (0 when nothing has been observed
  // yet: the cheapest then runs first to learn its cost). `now_s`: seconds on any steady
  // clock, the same one observe() gets.
  int choose(double target_ms, int64_t others_in_flight, double now_s, double* predicted_ms = nullptr);
  double predict(int subnet, int64_t others_in_flight, double now_s);
  // The load to predict and observe with: the jobs in flight now, or more if more were seen
  // in the last moment. A co-running model resubmitting back to back leaves gaps with
  // nothing in flight; a run started in one is still run under that load.
  int64_t load(int64_t jobs_in_flight, double now_s);
  void observe(int subnet, int64_t others_in_flight, double ms, double now_s);

 private:
  static constexpr int kLoadBuckets = 4;
  struct Sample {
    double t;
    double ms;
  };
  double base_locked(int subnet) const;
  double predict_locked(int subnet, int bucket, double now_s);
  void expire_locked(std::deque<Sample>& samples, double now_s) const;

  std::mutex mutex_;
  std::vector<int64_t> flops_;
  std::vector<double> best_ms_;                          // per sub-net; 0 until it has run
  std::vector<std::deque<Sample>> own_[kLoadBuckets];    // latency, per load and sub-net
  std::deque<Sample> excess_[kLoadBuckets];              // latency - base, per load
  int64_t recent_load_ = 0;                              // the last nonzero load seen, and when
  double recent_load_s_ = -1e9;
};

}  // namespace grove
