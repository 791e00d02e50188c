#pragma once
// The server-wide memory budget (grove serve --max-serve-memory): every admitted inference
// reserves the bytes its run may need before it runs, and gives them back once its run has
// really stopped, so runs in flight together never reserve more than the budget. A request
// that finds too little left waits, bounded, for runs to finish; past the wait it is refused
// (503) instead of being run into an out-of-memory kill.
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <mutex>

namespace grove::serve {

class MemoryBudget {
 public:
  using Clock = std::chrono::steady_clock;

  explicit MemoryBudget(int64_t capacity) : capacity_(capacity) {}
  MemoryBudget(const MemoryBudget&) = delete;
  MemoryBudget& operator=(const MemoryBudget&) = delete;

  // Bytes held for one run; given back when destroyed. Empty (bytes() 0) when the reservation
  // was refused.
  class Reservation {
   public:
    Reservation() = default;
    Reservation(Reservation&& other) noexcept : budget_(other.budget_), bytes_(other.bytes_) { other.budget_ = nullptr; }
    Reservation& operator=(Reservation&&) = delete;
    ~Reservation() {
      if (budget_) budget_->release(bytes_);
    }
    explicit operator bool() const { return budget_ != nullptr; }

   private:
    friend class MemoryBudget;
    Reservation(MemoryBudget* budget, int64_t bytes) : budget_(budget), bytes_(bytes) {}
    MemoryBudget* budget_ = nullptr;
    int64_t bytes_ = 0;
  };

  // Reserves `bytes`, waiting until `until` for other runs to give back enough; waiting
  // requests are served in the order they came. Refused (an empty Reservation) at once when
  // `bytes` is over the whole budget, since no wait can help.
  Reservation reserve(int64_t bytes, Clock::time_point until);

  int64_t capacity() const { return capacity_; }
  int64_t reserved() const;        // bytes reserved now
  int64_t peak_reserved() const;   // the most ever reserved at once
  int64_t refusals() const;        // reservations refused
  int64_t waits() const;           // reservations that had to wait for room (granted or not)

 private:
  void release(int64_t bytes);

  const int64_t capacity_;
  mutable std::mutex mutex_;
  std::condition_variable freed_;
  int64_t reserved_ = 0, peak_ = 0, refusals_ = 0, waits_ = 0;
  std::deque<uint64_t> waiting_;  // tickets of the waiting requests, oldest first
  uint64_t next_ticket_ = 0;
};

}  // namespace grove::serve
