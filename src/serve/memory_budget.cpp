#include "serve/memory_budget.h"

#include <algorithm>

namespace grove::serve {

MemoryBudget::Reservation MemoryBudget::reserve(int64_t bytes, Clock::time_point until) {
  bytes = std::max<int64_t>(bytes, 0);
  std::unique_lock<std::mutex> lock(mutex_);
  if (bytes > capacity_) {
    ++refusals_;
    return {};
  }
  // Compared as capacity - reserved: reserved_ never exceeds capacity_, so neither side wraps.
  auto fits = [&] { return bytes <= capacity_ - reserved_; };
  if (!fits()) {
    ++waits_;
    // Woken by every release: whichever waiter the new room fits goes first (no queue order,
    // so a large request can lose to smaller ones; its wait is bounded all the same).
    if (!freed_.wait_until(lock, until, fits)) {
      ++refusals_;
      return {};
    }
  }
  reserved_ += bytes;
  peak_ = std::max(peak_, reserved_);
  return Reservation(this, bytes);
}

void MemoryBudget::release(int64_t bytes) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    reserved_ -= bytes;
  }
  freed_.notify_all();
}

int64_t MemoryBudget::reserved() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return reserved_;
}

int64_t MemoryBudget::peak_reserved() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return peak_;
}

int64_t MemoryBudget::refusals() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return refusals_;
}

int64_t MemoryBudget::waits() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return waits_;
}

}  // namespace grove::serve
