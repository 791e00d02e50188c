#include "serve/metrics.h"

namespace grove::serve {

void ModelMetrics::finished(double seconds, bool ok) {
  requests_.fetch_add(1, std::memory_order_relaxed);
  if (!ok) failures_.fetch_add(1, std::memory_order_relaxed);
  in_flight_.fetch_sub(1, std::memory_order_relaxed);
  sum_ns_.fetch_add(static_cast<int64_t>(seconds * 1e9), std::memory_order_relaxed);
  for (size_t b = 0; b < kBuckets.size(); ++b)
    if (seconds <= kBuckets[b]) {
      buckets_[b].fetch_add(1, std::memory_order_relaxed);
      break;
    }
}

ModelMetrics::Snapshot ModelMetrics::snapshot() const {
  Snapshot s;
  s.requests = requests();
  s.failures = failures();
  s.in_flight = in_flight();
  s.sum_seconds = static_cast<double>(sum_ns_.load(std::memory_order_relaxed)) * 1e-9;
  int64_t cumulative = 0;
  for (size_t b = 0; b < kBuckets.size(); ++b) {
    cumulative += buckets_[b].load(std::memory_order_relaxed);
    s.cumulative[b] = cumulative;
  }
  return s;
}

}  // namespace grove::serve
