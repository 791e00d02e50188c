// Cancelling a job through its CancelToken: once stopped, the tiles not yet started are
// skipped, the future carries an Error of kind `cancelled`, and the engine's jobs in flight
// drop back as soon as the tiles running then are done. Also built under ThreadSanitizer with
// adversarial schedules (scripts/test.sh).
#include <gtest/gtest.h>

#include <chrono>
#include <thread>

#include "grove/cancel.h"
#include "grove/error.h"
#include "test_dags.h"

namespace grove {
namespace {

using namespace std::chrono_literals;
using test::TestDag;
using CancelClock = std::chrono::steady_clock;

// Each tile busy-waits `tile_time` (by the clock, so a sanitizer's slowdown does not stretch
// it) and is counted; the job holds `token`.
class SlowTileJob : public Job {
 public:
  SlowTileJob(const TestDag& dag, std::chrono::microseconds tile_time, CancelToken token)
      : dag_(dag), tile_time_(tile_time), token_(std::move(token)) {}
  DagView dag() const override { return dag_.view(); }
  CancelToken cancel_token() const override { return token_; }
  void run_tile(int32_t, int) override {
    const auto until = CancelClock::now() + tile_time_;
    while (CancelClock::now() < until) std::this_thread::yield();
    ran_.fetch_add(1, std::memory_order_relaxed);
  }
  int32_t ran() const { return ran_.load(); }

 private:
  const TestDag& dag_;
  std::chrono::microseconds tile_time_;
  CancelToken token_;
  std::atomic<int32_t> ran_{0};
};

// `width` independent chains of `length` tiles: a job several seconds long at 1 ms a tile.
TestDag cancel_test_lanes(int32_t width, int32_t length) {
  std::vector<std::pair<int32_t, int32_t>> edges;
  for (int32_t lane = 0; lane < width; ++lane)
    for (int32_t i = 0; i + 1 < length; ++i) edges.emplace_back(lane * length + i, lane * length + i + 1);
  return test::make_dag("lanes", width * length, edges);
}

// Waits up to `limit` for the engine's jobs in flight to reach `want`; returns how long it took.
double seconds_until_in_flight(const Engine& engine, int64_t want, std::chrono::milliseconds limit) {
  const auto start = CancelClock::now();
  while (engine.stats().jobs_in_flight != want && CancelClock::now() - start < limit) std::this_thread::sleep_for(100us);
  return std::chrono::duration<double>(CancelClock::now() - start).count();
}

double seconds_since(CancelClock::time_point t) { return std::chrono::duration<double>(CancelClock::now() - t).count(); }

TEST(CancelToken, StopsOnCancelOrDeadlineAndSaysWhy) {
  CancelToken none;
  EXPECT_TRUE(none.empty());
  EXPECT_FALSE(none.stopped());
  none.cancel();  // no effect on an empty token
  EXPECT_FALSE(none.stopped());
  EXPECT_NO_THROW(none.throw_if_stopped());

  CancelToken manual = CancelToken::manual();
  const CancelToken copy = manual;
  EXPECT_FALSE(copy.stopped());
  EXPECT_FALSE(copy.has_deadline());
  manual.cancel("the client went away");
  manual.cancel("a second reason is ignored");
  EXPECT_TRUE(copy.stopped());
  EXPECT_EQ(copy.reason(), "run cancelled: the client went away");
  try {
    copy.throw_if_stopped();
    ADD_FAILURE() << "a stopped token did not throw";
  } catch (const Error& e) {
    EXPECT_TRUE(e.cancelled());
    EXPECT_STREQ(e.what(), "run cancelled: the client went away");
  }

  CancelToken soon = CancelToken::after(0.05);
  EXPECT_TRUE(soon.has_deadline());
  EXPECT_FALSE(soon.stopped());
  std::this_thread::sleep_for(80ms);
  EXPECT_TRUE(soon.stopped());
  EXPECT_EQ(soon.reason(), "run cancelled: deadline of 0.05 s passed");
  EXPECT_TRUE(CancelToken::after(0).stopped());
  EXPECT_TRUE(CancelToken::after(-1).stopped());
  EXPECT_FALSE(CancelToken::after(1e300).stopped());
}

TEST(CancelToken, AChildStopsWithItsParentButNotTheOtherWayRound) {
  CancelToken parent = CancelToken::after(3600);
  CancelToken child = parent.child();
  EXPECT_TRUE(child.has_deadline());
  EXPECT_EQ(child.deadline(), parent.deadline());
  child.cancel("the child alone");
  EXPECT_TRUE(child.stopped());
  EXPECT_FALSE(parent.stopped());
  CancelToken other = parent.child();
  parent.cancel("the parent");
  EXPECT_TRUE(other.stopped());
  EXPECT_EQ(other.reason(), "run cancelled: the parent");
  EXPECT_FALSE(CancelToken().child().empty());  // a manual token of its own
}

// A job of ~4 s (4000 tiles of 1 ms on 2 workers) cancelled after 50 ms: its future is ready
// within a few tiles' time, with the cancelled Error, most tiles never ran, and the engine's
// jobs in flight is back to 0.
TEST(Cancel, ACancelledJobStopsWithinATilesTimeAndLeavesNothingInFlight) {
  const TestDag dag = cancel_test_lanes(8, 500);
  Engine engine({.threads = 2, .pin = false});
  CancelToken token = CancelToken::manual();
  auto job = std::make_shared<SlowTileJob>(dag, 1ms, token);
  std::future<void> done = submit_job(engine, job);
  std::this_thread::sleep_for(50ms);
  EXPECT_EQ(engine.stats().jobs_in_flight, 1);
  const auto cancelled_at = CancelClock::now();
  token.cancel("the test stops it");
  ASSERT_EQ(done.wait_for(2s), std::future_status::ready) << "the job went on after cancel()";
  const double stop_s = seconds_since(cancelled_at);
  EXPECT_LT(stop_s, 0.5) << "stopping took " << stop_s << " s for 1 ms tiles";
  try {
    done.get();
    ADD_FAILURE() << "a cancelled job completed normally";
  } catch (const Error& e) {
    EXPECT_TRUE(e.cancelled());
    EXPECT_STREQ(e.what(), "run cancelled: the test stops it");
  }
  EXPECT_LT(job->ran(), dag.size() / 2) << "the tiles after cancel() were not skipped";
  // The job leaves the count before its future is ready: no wait needed.
  EXPECT_EQ(engine.stats().jobs_in_flight, 0);
}

// The same through a deadline nobody watches, and through run(), where the caller works.
TEST(Cancel, ADeadlineStopsAJobWithoutAnyoneCallingCancel) {
  const TestDag dag = cancel_test_lanes(8, 500);
  Engine engine({.threads = 2, .pin = false});
  for (bool through_run : {false, true}) {
    auto job = std::make_shared<SlowTileJob>(dag, 1ms, CancelToken::after(0.1));
    const auto start = CancelClock::now();
    try {
      if (through_run) run_job(engine, job);
      else submit_job(engine, job).get();
      ADD_FAILURE() << "a job past its deadline completed normally";
    } catch (const Error& e) {
      EXPECT_TRUE(e.cancelled());
      EXPECT_STREQ(e.what(), "run cancelled: deadline of 0.1 s passed");
    }
    EXPECT_LT(seconds_since(start), 1.0) << (through_run ? "run()" : "submit()");
    EXPECT_LT(job->ran(), dag.size() / 2);
    EXPECT_LT(seconds_until_in_flight(engine, 0, 2000ms), 0.5);
  }
}

// A token that never stops, or stops only after the job, changes nothing; a cancelled job
// leaves the other jobs on the engine whole.
TEST(Cancel, JobsWithLiveTokensAndOtherJobsRunEveryTile) {
  const TestDag dag = cancel_test_lanes(4, 50);
  Engine engine({.threads = 2, .pin = false});
  auto live = std::make_shared<SlowTileJob>(dag, 50us, CancelToken::after(3600));
  auto plain = std::make_shared<SlowTileJob>(dag, 50us, CancelToken());
  CancelToken stop = CancelToken::manual();
  const TestDag long_dag = cancel_test_lanes(8, 500);
  auto doomed = std::make_shared<SlowTileJob>(long_dag, 1ms, stop);
  std::future<void> d = submit_job(engine, doomed);
  std::future<void> a = submit_job(engine, live), b = submit_job(engine, plain);
  stop.cancel();
  EXPECT_NO_THROW(a.get());
  EXPECT_NO_THROW(b.get());
  EXPECT_THROW(d.get(), Error);
  EXPECT_EQ(live->ran(), dag.size());
  EXPECT_EQ(plain->ran(), dag.size());
  EXPECT_LT(seconds_until_in_flight(engine, 0, 2000ms), 0.5);
}

// A token stopped before submit: no tile runs at all.
TEST(Cancel, AJobSubmittedWithAStoppedTokenRunsNoTile) {
  const TestDag dag = cancel_test_lanes(2, 20);
  Engine engine({.threads = 2, .pin = false});
  auto job = std::make_shared<SlowTileJob>(dag, 1ms, CancelToken::after(0));
  EXPECT_THROW(submit_job(engine, job).get(), Error);
  EXPECT_EQ(job->ran(), 0);
}

}  // namespace
}  // namespace grove
