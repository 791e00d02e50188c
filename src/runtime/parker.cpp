#include "runtime/parker.h"

#include <linux/futex.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <climits>

namespace grove {

namespace {

// std::atomic<uint32_t> has the size and alignment of uint32_t, which is what the futex needs.
static_assert(sizeof(std::atomic<uint32_t>) == sizeof(uint32_t));

void futex_wait(std::atomic<uint32_t>* word, uint32_t expected) {
  syscall(SYS_futex, reinterpret_cast<uint32_t*>(word), FUTEX_WAIT_PRIVATE, expected, nullptr, nullptr, 0);
}

void futex_wake(std::atomic<uint32_t>* word, int count) {
  syscall(SYS_futex, reinterpret_cast<uint32_t*>(word), FUTEX_WAKE_PRIVATE, count, nullptr, nullptr, 0);
}

}  // namespace

uint32_t Parker::prepare() {
  uint32_t epoch = epoch_.load(std::memory_order_acquire);
  sleepers_.fetch_add(1, std::memory_order_relaxed);
  std::atomic_thread_fence(std::memory_order_seq_cst);
  return epoch;
}

void Parker::cancel() { sleepers_.fetch_sub(1, std::memory_order_relaxed); }

void Parker::wait(uint32_t epoch) {
  // The kernel re-checks the word atomically; spurious returns are fine, callers loop.
  if (epoch_.load(std::memory_order_acquire) == epoch) futex_wait(&epoch_, epoch);
  sleepers_.fetch_sub(1, std::memory_order_relaxed);
}

void Parker::notify(int count) {
  std::atomic_thread_fence(std::memory_order_seq_cst);
  if (sleepers_.load(std::memory_order_relaxed) == 0) return;
  epoch_.fetch_add(1, std::memory_order_release);
  futex_wake(&epoch_, count);
}

void Parker::notify_all() {
  std::atomic_thread_fence(std::memory_order_seq_cst);
  epoch_.fetch_add(1, std::memory_order_release);
  futex_wake(&epoch_, INT_MAX);
}

}  // namespace grove
