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
  if (!fits() || !waiting_.empty()) {
    // First come, first served: a request that finds others waiting queues behind them, so a
    // large one is not passed over again and again by smaller ones that keep fitting. The
    // head of the queue can hold back smaller ones behind it, at most for its own wait.
    ++waits_;
    const uint64_t ticket = next_ticket_++;
    waiting_.push_back(ticket);
    const bool granted = freed_.wait_until(lock, until, [&] { return waiting_.front() == ticket && fits(); });
    waiting_.erase(std::find(waiting_.begin(), waiting_.end(), ticket));
    // Either way the next in line may go now: it is at the head, and the room may fit it.
    freed_.notify_all();
    if (!granted) {
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
