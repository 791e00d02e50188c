// Jobs in flight together, failing jobs, malformed DAGs, and engine shutdown with work queued.
#include <gtest/gtest.h>

#include <chrono>
#include <future>
#include <stdexcept>
#include <thread>

#include "graph/error.h"
#include "test_dags.h"

namespace grove::test {
namespace {

TEST(Jobs, ConcurrentJobsOfDifferentDagsAllComplete) {
  std::vector<TestDag> dags = all_shapes();
  for (int threads : {1, 2, 3, 8}) {
    Engine engine(EngineOptions{.threads = threads});
    std::vector<std::shared_ptr<CheckingJob>> jobs;
    std::vector<std::future<void>> futures;
    for (int round = 0; round < 4; ++round)
      for (const TestDag& dag : dags) {
        jobs.push_back(std::make_shared<CheckingJob>(dag, worker_slots(engine)));
        futures.push_back(submit_job(engine, jobs.back()));
      }
    // Submitters on other threads at the same time, one of them working through run().
    std::thread helper([&] {
      for (const TestDag& dag : dags) {
        auto job = std::make_shared<CheckingJob>(dag, worker_slots(engine));
        run_job(engine, job);
        EXPECT_EQ(job->tiles_not_run_once(), 0) << dag.name;
        EXPECT_EQ(job->early(), 0) << dag.name;
      }
    });
    for (const TestDag& dag : dags) {
      auto job = std::make_shared<CheckingJob>(dag, worker_slots(engine));
      run_job(engine, job);
      EXPECT_EQ(job->tiles_not_run_once(), 0) << dag.name;
    }
    helper.join();
    for (size_t i = 0; i < jobs.size(); ++i) {
      futures[i].get();
      EXPECT_EQ(jobs[i]->tiles_not_run_once(), 0) << i;
      EXPECT_EQ(jobs[i]->early(), 0) << i;
    }
  }
}

// Throws at one tile; counts the tiles that ran.
class ThrowingJob : public Job {
 public:
  ThrowingJob(const TestDag& dag, int32_t bad_tile) : dag_(dag), bad_tile_(bad_tile) {}
  DagView dag() const override { return dag_.view(); }
  void run_tile(int32_t tile, int) override {
    ran_.fetch_add(1);
    if (tile == bad_tile_) throw std::runtime_error("tile " + std::to_string(tile) + " failed");
  }
  int32_t ran() const { return ran_.load(); }

 private:
  const TestDag& dag_;
  int32_t bad_tile_;
  std::atomic<int32_t> ran_{0};
};

TEST(Jobs, ThrowingTileFailsTheFutureAndSkipsTheRest) {
  TestDag dag = chain(100);
  for (int threads : {1, 2, 3}) {
    Engine engine(EngineOptions{.threads = threads});
    auto job = std::make_shared<ThrowingJob>(dag, 10);
    std::future<void> f = submit_job(engine, job);
    try {
      f.get();
      FAIL() << "no exception";
    } catch (const std::runtime_error& e) {
      EXPECT_STREQ(e.what(), "tile 10 failed");
    }
    EXPECT_EQ(job->ran(), 11);  // a chain: nothing after the failing tile may start
    // Through run() the exception is rethrown to the caller.
    auto again = std::make_shared<ThrowingJob>(dag, 0);
    EXPECT_THROW(run_job(engine, again), std::runtime_error);
    EXPECT_EQ(again->ran(), 1);
    // The engine stays usable.
    TestDag wide = random_layered(5, 6, 10, 3);
    auto good = std::make_shared<CheckingJob>(wide, worker_slots(engine));
    submit_job(engine, good).get();
    EXPECT_EQ(good->tiles_not_run_once(), 0);
  }
}

// Job::finished runs once per job, after its last tile and before its future is ready, with
// the first tile's error: Session::submit fulfils its own future there instead of keeping a
// thread waiting on each request.
TEST(Jobs, FinishedRunsOnceAfterTheLastTileBeforeTheFuture) {
  struct Recording : Job {
    const TestDag& d;
    int32_t bad_tile;
    std::atomic<int32_t> tiles{0}, calls{0}, tiles_at_finish{-1};
    std::atomic<bool> had_error{false};
    Recording(const TestDag& dag, int32_t bad) : d(dag), bad_tile(bad) {}
    DagView dag() const override { return d.view(); }
    void run_tile(int32_t tile, int) override {
      tiles.fetch_add(1);
      if (tile == bad_tile) throw std::runtime_error("bad tile");
    }
    void finished(std::exception_ptr error) noexcept override {
      tiles_at_finish.store(tiles.load());
      had_error.store(error != nullptr);
      calls.fetch_add(1);
    }
  };
  TestDag wide = random_layered(7, 8, 12, 3), empty = make_dag("empty", 0, {});
  for (int threads : {1, 2, 3}) {
    Engine engine(EngineOptions{.threads = threads});
    std::vector<std::shared_ptr<Recording>> jobs;
    std::vector<std::future<void>> futures;
    for (int i = 0; i < 8; ++i) {
      jobs.push_back(std::make_shared<Recording>(wide, -1));
      futures.push_back(submit_job(engine, jobs.back()));
    }
    for (size_t i = 0; i < jobs.size(); ++i) {
      futures[i].get();
      EXPECT_EQ(jobs[i]->calls.load(), 1);
      EXPECT_EQ(jobs[i]->tiles_at_finish.load(), wide.size());
      EXPECT_FALSE(jobs[i]->had_error.load());
    }
    auto failing = std::make_shared<Recording>(wide, 5);
    EXPECT_THROW(submit_job(engine, failing).get(), std::runtime_error);
    EXPECT_EQ(failing->calls.load(), 1);
    EXPECT_TRUE(failing->had_error.load());
    auto nothing = std::make_shared<Recording>(empty, -1);
    submit_job(engine, nothing).get();
    EXPECT_EQ(nothing->calls.load(), 1);
  }
}

TEST(Jobs, SeveralThrowingTilesReportOneOfTheirExceptions) {
  TestDag dag = fan_out_in(50);
  Engine engine(EngineOptions{.threads = 3});
  struct AllThrow : Job {
    const TestDag& d;
    explicit AllThrow(const TestDag& dag) : d(dag) {}
    DagView dag() const override { return d.view(); }
    void run_tile(int32_t tile, int) override {
      if (tile != 0) throw std::out_of_range("middle tile");
    }
  };
  EXPECT_THROW(submit_job(engine, std::make_shared<AllThrow>(dag)).get(), std::out_of_range);
}

TEST(Jobs, MalformedDagsAreErrorsAtSubmit) {
  Engine engine(EngineOptions{.threads = 2});
  auto expect_error = [&](TestDag dag, const std::string& fragment) {
    auto job = std::make_shared<CheckingJob>(dag, worker_slots(engine));
    try {
      submit_job(engine, job);
      ADD_FAILURE() << "accepted: " << fragment;
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(fragment), std::string::npos) << e.what();
    }
  };
  TestDag d = diamond();
  d.n_parents[3] = 3;  // would never become ready: a hang, unless refused
  expect_error(d, "parents");
  d = diamond();
  d.children[0] = 17;
  expect_error(d, "out of range");
  d = diamond();
  d.sources.push_back(0);
  expect_error(d, "sources");
  d = diamond();
  d.sources = {1};
  d.n_parents = {0, 1, 1, 2};
  expect_error(d, "source 1");
  d = diamond();
  d.depth[3] = 1;
  expect_error(d, "depth");
  d = diamond();
  d.child_begin.pop_back();
  expect_error(d, "child_begin");
  d = diamond();
  d.depth.pop_back();
  expect_error(d, "depth");
  d = diamond();
  d.place = {0, 1, 2};  // one per tile, or none
  expect_error(d, "place");
  // A cycle (1 -> 2 -> 1) with consistent counts is caught by the depth rule.
  TestDag cyc;
  cyc.n_parents = {0, 2, 1};
  cyc.child_begin = {0, 1, 2, 3};
  cyc.children = {1, 2, 1};
  cyc.depth = {0, 1, 2};
  cyc.sources = {0};
  cyc.parents = {{}, {0, 2}, {1}};
  expect_error(cyc, "depth does not grow");
  EXPECT_THROW(submit_job(engine, nullptr), Error);
  // Still usable afterwards.
  TestDag ok = diamond();
  auto job = std::make_shared<CheckingJob>(ok, worker_slots(engine));
  submit_job(engine, job).get();
  EXPECT_EQ(job->tiles_not_run_once(), 0);
}

// Each tile sleeps, so jobs are certainly still in flight when the engine is destroyed.
class SlowJob : public Job {
 public:
  explicit SlowJob(const TestDag& dag, std::chrono::microseconds per_tile = std::chrono::microseconds(200))
      : dag_(dag), per_tile_(per_tile) {}
  DagView dag() const override { return dag_.view(); }
  void run_tile(int32_t, int) override {
    std::this_thread::sleep_for(per_tile_);
    ran_.fetch_add(1);
  }
  int32_t ran() const { return ran_.load(); }

 private:
  const TestDag& dag_;
  std::chrono::microseconds per_tile_;
  std::atomic<int32_t> ran_{0};
};

TEST(Jobs, DestroyingTheEngineWaitsForJobsInFlight) {
  TestDag dag = random_layered(11, 10, 8, 2);
  std::vector<std::shared_ptr<SlowJob>> jobs;
  std::vector<std::future<void>> futures;
  {
    Engine engine(EngineOptions{.threads = 2});
    for (int i = 0; i < 5; ++i) {
      jobs.push_back(std::make_shared<SlowJob>(dag));
      futures.push_back(submit_job(engine, jobs.back()));
    }
  }  // ~Engine with about 80 ms of work queued
  for (size_t i = 0; i < jobs.size(); ++i) {
    ASSERT_EQ(futures[i].wait_for(std::chrono::seconds(0)), std::future_status::ready);
    futures[i].get();
    EXPECT_EQ(jobs[i]->ran(), dag.size());
  }
}

TEST(Jobs, RunReturnsWhenItsJobIsDoneEvenWhileOthersRun) {
  TestDag wide = fan_out_in(200);  // about 200 ms of sleeping tiles
  TestDag small = diamond();
  // 2 threads: while run() works, the caller and worker 0 run tiles (worker 1 stands aside).
  Engine engine(EngineOptions{.threads = 2});
  auto slow = std::make_shared<SlowJob>(wide, std::chrono::milliseconds(1));
  std::future<void> slow_done = submit_job(engine, slow);
  auto quick = std::make_shared<CheckingJob>(small, worker_slots(engine));
  run_job(engine, quick);  // the caller helps with the slow job's tiles, but must stop after its own
  EXPECT_EQ(quick->tiles_not_run_once(), 0);
  EXPECT_EQ(slow_done.wait_for(std::chrono::seconds(0)), std::future_status::timeout);
  slow_done.get();
  EXPECT_EQ(slow->ran(), wide.size());
}

TEST(Jobs, CallerOfRunTakesAWorkersPlaceInsteadOfOversubscribing) {
  TestDag wide = fan_out_in(64);
  for (int threads : {1, 2, 3}) {
    Engine engine(EngineOptions{.threads = threads});
    auto job = std::make_shared<ConcurrencyJob>(wide);
    run_job(engine, job);
    EXPECT_LE(job->most(), threads) << "threads = " << threads;
    auto again = std::make_shared<ConcurrencyJob>(wide);  // and the worker comes back after run()
    submit_job(engine, again).get();
    EXPECT_LE(again->most(), threads);
  }
}

// The worker a run() caller stands in for is not woken when the caller leaves with nothing
// else in flight (Roster::caller_left). Jobs submitted during or after such a run must still
// reach it: at 1 thread there is no other worker to run them.
void expect_ready_or_nudge(Engine& engine, std::future<void>& f, int round) {
  if (f.wait_for(std::chrono::seconds(10)) == std::future_status::ready) return;
  ADD_FAILURE() << "round " << round << ": a job was left in the pool with its worker asleep";
  engine.set_workers(1);  // wakes the worker, so the engine can drain and be destroyed
  f.wait();
}

TEST(Jobs, AJobSubmittedDuringOrAfterARunStillRunsAtOneThread) {
  // One tile that holds the run until the test lets it go.
  struct Gate : Job {
    TestDag d = single_tile();
    std::atomic<bool> entered{false}, open{false};
    DagView dag() const override { return d.view(); }
    void run_tile(int32_t, int) override {
      entered.store(true);
      const auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(10);
      while (!open.load() && std::chrono::steady_clock::now() < give_up) std::this_thread::yield();
    }
  };
  TestDag dag = diamond();
  Engine engine(EngineOptions{.threads = 1});
  for (int round = 0; round < 5; ++round) {
    // During: the caller's job ends after the other job is queued, and the caller stops
    // without running it.
    auto gate = std::make_shared<Gate>();
    std::thread caller([&] { run_job(engine, gate); });
    while (!gate->entered.load()) std::this_thread::yield();
    auto during = std::make_shared<CheckingJob>(dag, worker_slots(engine));
    std::future<void> f = submit_job(engine, during);
    std::this_thread::sleep_for(std::chrono::milliseconds(10));  // the worker back asleep, benched
    gate->open.store(true);
    caller.join();
    expect_ready_or_nudge(engine, f, round);
    EXPECT_EQ(during->tiles_not_run_once(), 0);
    // After: a run long enough for the worker to fall asleep benched, which leaves with
    // nothing else in flight, then a submit.
    const TestDag one = single_tile();
    run_job(engine, std::make_shared<SlowJob>(one, std::chrono::milliseconds(10)));
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
    auto after = std::make_shared<CheckingJob>(dag, worker_slots(engine));
    f = submit_job(engine, after);
    expect_ready_or_nudge(engine, f, round);
    EXPECT_EQ(after->tiles_not_run_once(), 0);
  }
}

// A job that asks to run alone (Job::alone): every tile on run()'s calling thread, whose
// worker slot is the last, each once and after its parents; none through the pool.
class AloneJob : public CheckingJob {
 public:
  AloneJob(const TestDag& dag, int worker_slots) : CheckingJob(dag, worker_slots), slots_(worker_slots) {}
  bool alone() const override { return true; }
  void run_tile(int32_t tile, int worker) override {
    CheckingJob::run_tile(tile, worker);
    if (worker != slots_ - 1 || std::this_thread::get_id() != caller_) elsewhere_.fetch_add(1);
  }
  std::thread::id caller_ = std::this_thread::get_id();
  int32_t elsewhere() const { return elsewhere_.load(); }

 private:
  int slots_;
  std::atomic<int32_t> elsewhere_{0};
};

TEST(Jobs, AnAloneJobRunsEveryTileOnTheCallerOnce) {
  std::vector<TestDag> dags = all_shapes();
  dags.push_back(TestDag{.name = "empty", .child_begin = {0}});  // no tiles at all
  for (int threads : {1, 2, 3}) {
    Engine engine(EngineOptions{.threads = threads});
    const int64_t submitted = engine.stats().jobs_submitted;
    for (const TestDag& dag : dags) {
      auto job = std::make_shared<AloneJob>(dag, worker_slots(engine));
      run_job(engine, job);
      EXPECT_EQ(job->tiles_not_run_once(), 0) << dag.name << ", threads = " << threads;
      EXPECT_EQ(job->early(), 0) << dag.name;
      EXPECT_EQ(job->elsewhere(), 0) << dag.name << ": tiles ran off the caller";
    }
    EXPECT_EQ(engine.stats().jobs_submitted - submitted, static_cast<int64_t>(dags.size()));
    EXPECT_EQ(engine.stats().jobs_in_flight, 0);
    // submit() never runs a job alone: its caller waits, and the workers run every tile.
    auto shared = std::make_shared<AloneJob>(dags[0], worker_slots(engine));
    submit_job(engine, shared).get();
    EXPECT_EQ(shared->tiles_not_run_once(), 0);
    EXPECT_EQ(shared->elsewhere(), dags[0].size()) << "a submitted job's tiles ran on its caller";
  }
}

TEST(Jobs, AnAloneJobThatThrowsSkipsTheRestAndRethrows) {
  TestDag dag = chain(100);
  struct AloneThrowing : ThrowingJob {
    using ThrowingJob::ThrowingJob;
    bool alone() const override { return true; }
  };
  Engine engine(EngineOptions{.threads = 2});
  auto job = std::make_shared<AloneThrowing>(dag, 10);
  EXPECT_THROW(run_job(engine, job), std::runtime_error);
  EXPECT_EQ(job->ran(), 11);
  EXPECT_EQ(engine.stats().jobs_in_flight, 0);
}

// While one run() caller works, another's alone job falls back to the pool, shared, and still
// runs every tile once.
TEST(Jobs, AnAloneJobWhileAnotherCallerWorksRunsShared) {
  TestDag dag = fan_out_in(64);
  Engine engine(EngineOptions{.threads = 2});
  std::promise<void> entered, release;
  struct Gate : Job {
    std::promise<void>* entered;
    std::shared_future<void> release;
    TestDag one = chain(1);
    DagView dag() const override { return one.view(); }
    void run_tile(int32_t, int) override {
      entered->set_value();
      release.wait();
    }
  };
  auto gate = std::make_shared<Gate>();
  gate->entered = &entered;
  gate->release = release.get_future().share();
  std::thread holder([&] { run_job(engine, gate); });
  entered.get_future().wait();  // the holder is the engine's working caller now
  auto job = std::make_shared<AloneJob>(dag, worker_slots(engine));
  std::thread other([&] { run_job(engine, job); });
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  release.set_value();
  other.join();
  holder.join();
  EXPECT_EQ(job->tiles_not_run_once(), 0);
  EXPECT_EQ(job->early(), 0);
}

// An urgent job submitted while a caller runs alone is not held until the caller's job ends:
// at one thread no worker is free (the caller stands in for it), so the caller runs the urgent
// tiles between its own.
TEST(Jobs, AnUrgentJobSubmittedDuringAnAloneRunRunsBeforeItEnds) {
  const TestDag long_chain = chain(60), short_chain = chain(3);
  struct Slow : Job {
    const TestDag* d;
    std::promise<void> started;
    std::atomic<bool>* urgent_done;
    bool urgent_done_before_last = false;
    DagView dag() const override { return d->view(); }
    bool alone() const override { return true; }
    void run_tile(int32_t tile, int) override {
      if (tile == 0) started.set_value();
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
      if (tile == d->size() - 1) urgent_done_before_last = urgent_done->load();
    }
  };
  struct Urgent : Job {
    const TestDag* d;
    std::atomic<bool>* done;
    DagView dag() const override { return d->view(); }
    bool urgent() const override { return true; }
    void run_tile(int32_t, int) override {}
    void finished(std::exception_ptr) noexcept override { done->store(true); }
  };
  Engine engine(EngineOptions{.threads = 1});
  std::atomic<bool> urgent_done{false};
  auto slow = std::make_shared<Slow>();
  slow->d = &long_chain;
  slow->urgent_done = &urgent_done;
  std::future<void> started = slow->started.get_future();
  std::thread caller([&] { run_job(engine, slow); });
  started.wait();
  auto urgent = std::make_shared<Urgent>();
  urgent->d = &short_chain;
  urgent->done = &urgent_done;
  std::future<void> f = submit_job(engine, urgent);
  caller.join();
  f.get();
  EXPECT_TRUE(slow->urgent_done_before_last) << "the urgent job waited for the whole alone run";
}

TEST(Jobs, EngineDropsItsJobReferenceBeforeTheFutureIsReady) {
  TestDag dag = diamond();
  Engine engine(EngineOptions{.threads = 2});
  auto job = std::make_shared<CheckingJob>(dag, worker_slots(engine));
  std::weak_ptr<CheckingJob> weak = job;
  std::future<void> f = submit_job(engine, std::move(job));
  f.get();
  EXPECT_TRUE(weak.expired());
}

TEST(Jobs, CreateAndDestroyEnginesRepeatedly) {
  TestDag dag = fan_out_in(8);
  for (int i = 0; i < 50; ++i) {
    Engine engine(EngineOptions{.threads = 1 + i % 4});
    if (i % 3 == 0) continue;  // never used
    auto job = std::make_shared<CheckingJob>(dag, worker_slots(engine));
    submit_job(engine, job);  // future dropped: the destructor still waits
  }
}

}  // namespace
}  // namespace grove::test
