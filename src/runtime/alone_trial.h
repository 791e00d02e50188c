#pragma once
// Whether a plan's runs run alone on their caller (Job::alone) or shared across the engine's
// workers, learnt from the plan's own first runs (SessionOptions::run_alone "auto").
//
// Why: on a tiny model, handing tiles between cores costs more than the tiles take (a push,
// a wake, a cache line that moves), so one core alone beats two; and alone, even at one
// thread, the caller skips the pool's pushes and pops. Which models are tiny depends
// on the machine, so it is measured, not set: the first runs of a plan take turns, shared and
// alone, timed, and once each way has kTimedRuns the faster runs every later run. The
// two ways run the same plan, so the outputs are the same bits either way; no extra run is
// made (a plan used once, as a decoder's that grows by one position each step, costs nothing).
// Only plans of at most kMaxFlops are tried: a larger one has work enough for every core, and
// one run of it alone would cost its first caller a full run at one core's speed.
#include <atomic>
#include <cstdint>
#include <mutex>
#include <string>
#include <vector>

namespace grove {

class AloneTrial {
 public:
  // The ways take turns in blocks of kBlockRuns runs, each block's first run untimed: it
  // fills the buffers, and it moves the data the other way left in another core's cache (run
  // by run, alternating, charged that to every run: on the Fashion-MNIST w25 sub-net at 2
  // threads, alone measured 0.041 ms against 0.043 shared, where run after run it takes 0.033
  // against 0.038-0.045). Alone is kept only where its median is at most kAloneAtMost of the
  // shared one's: a tie is left to the cores, where a run also has them when its work grows.
  static constexpr int kBlockRuns = 8;
  static constexpr int kTimedRuns = 16;
  static constexpr double kAloneAtMost = 0.95;
  static constexpr int64_t kMaxFlops = 50'000'000;

  enum class Mode { learn, alone, shared };
  explicit AloneTrial(Mode mode) : decided_(mode == Mode::learn ? kUndecided : mode == Mode::alone ? 1 : 0) {}

  // The next run's way, and whether its time is wanted (record() then takes it).
  struct Turn {
    bool alone = false;
    bool timed = false;
  };
  Turn next();
  void record(const Turn& turn, double ms);

  bool decided() const { return decided_.load(std::memory_order_acquire) != kUndecided; }
  // "runs alone: 0.064 ms alone on the caller against 0.101 ms shared (medians of 16 runs
  // each)" once learnt; "" before, or when the mode was given.
  std::string verdict() const;

 private:
  static constexpr int kUndecided = -1;
  std::atomic<int> decided_;  // kUndecided, 0 shared, 1 alone
  mutable std::mutex mutex_;
  int turns_ = 0;                 // runs handed out while learning
  std::vector<double> times_[2];  // [shared, alone]
  std::string verdict_;
};

// The verdict of two ways' timed runs, as AloneTrial keeps it (exposed for tests).
struct AloneVerdict {
  bool alone = false;
  double shared_ms = 0, alone_ms = 0;  // medians
  std::string line;
};
AloneVerdict decide_run_alone(const std::vector<double>& shared_ms, const std::vector<double>& alone_ms);

}  // namespace grove
