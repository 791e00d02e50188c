#pragma once
// Per-model request counters and a latency histogram for /metrics. Lock-free counters: every
// request updates them.
#include <array>
#include <atomic>
#include <cstdint>

namespace grove::serve {

class ModelMetrics {
 public:
  // Upper bounds of the latency histogram's buckets, seconds.
  static constexpr std::array<double, 14> kBuckets = {0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05,
                                                       0.1,    0.25,  0.5,    1,     2.5,   5,     10};

  void started() { in_flight_.fetch_add(1, std::memory_order_relaxed); }
  // One request over: its latency (from arrival to response), and whether it succeeded.
  void finished(double seconds, bool ok);

  struct Snapshot {
    int64_t requests = 0, failures = 0, in_flight = 0;
    double sum_seconds = 0;
    std::array<int64_t, kBuckets.size()> cumulative{};  // requests at or under each bound
  };
  Snapshot snapshot() const;

  int64_t requests() const { return requests_.load(std::memory_order_relaxed); }
  int64_t failures() const { return failures_.load(std::memory_order_relaxed); }
  int64_t in_flight() const { return in_flight_.load(std::memory_order_relaxed); }

 private:
  std::atomic<int64_t> requests_{0}, failures_{0}, in_flight_{0};
  std::atomic<int64_t> sum_ns_{0};
  std::array<std::atomic<int64_t>, kBuckets.size()> buckets_{};  // non-cumulative counts
};

}  // namespace grove::serve
