#pragma once
// Where idle workers sleep: a futex on an epoch counter, so an idle engine uses no CPU and a
// push wakes only as many sleepers as it has tiles for.
//
// Protocol (no lost wake-ups): a waiter calls prepare(), checks once more for work or for
// its exit condition, then wait() (or cancel() when it found something). A producer makes
// its work visible first, then calls notify(). prepare() and notify() both put a seq_cst
// fence between their store and their load, so either the waiter's re-check sees the work or
// the producer sees the waiter and bumps the epoch, which makes the futex wait return.
#include <atomic>
#include <cstdint>

namespace grove {

class Parker {
 public:
  // Returns the epoch to pass to wait().
  uint32_t prepare();
  void cancel();
  // Sleeps until the epoch moves on from `epoch` (returns at once when it already has).
  void wait(uint32_t epoch);
  // Wakes up to `count` sleepers when there are any; cheap (no syscall) when there are none.
  void notify(int count);
  // Wakes every sleeper, e.g. to let them see a stop flag set just before.
  void notify_all();

 private:
  std::atomic<uint32_t> epoch_{0};
  std::atomic<int32_t> sleepers_{0};
};

}  // namespace grove
