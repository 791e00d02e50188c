// Elastic workers (Engine::set_workers): resizes while jobs run lose no tile and run none
// twice, and a resized engine runs at most as many tiles at once as it has workers.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <random>
#include <thread>

#include "test_dags.h"

namespace grove::test {
namespace {

TEST(Elastic, SetWorkersClampsToTheStartedThreads) {
  Engine engine(EngineOptions{.threads = 2, .max_threads = 4});
  EXPECT_EQ(engine.threads(), 2);
  EXPECT_EQ(engine.max_threads(), 4);
  EXPECT_EQ(worker_slots(engine), 5);
  EXPECT_EQ(engine.set_workers(0), 1);
  EXPECT_EQ(engine.threads(), 1);
  EXPECT_EQ(engine.set_workers(99), 4);
  EXPECT_EQ(engine.stats().threads, 4);
  Engine fixed(EngineOptions{.threads = 3});
  EXPECT_EQ(fixed.max_threads(), 3);
  EXPECT_EQ(fixed.set_workers(5), 3);
}

TEST(Elastic, AResizedEngineRunsAtMostItsWorkersAtOnce) {
  TestDag wide = fan_out_in(48);
  Engine engine(EngineOptions{.threads = 3, .max_threads = 3, .pin = false});
  for (int n : {1, 2, 3, 1}) {
    engine.set_workers(n);
    auto job = std::make_shared<ConcurrencyJob>(wide);
    submit_job(engine, job).get();
    EXPECT_LE(job->most(), n) << "submit with " << n << " workers";
    auto by_caller = std::make_shared<ConcurrencyJob>(wide);
    run_job(engine, by_caller);  // the caller takes the last active worker's place
    EXPECT_LE(by_caller->most(), n) << "run() with " << n << " workers";
  }
}

TEST(Elastic, ThousandJobsUnderRandomResizesRunEveryTileOnce) {
  std::vector<TestDag> dags;
  for (uint32_t seed = 1; seed <= 4; ++seed) dags.push_back(random_layered(seed, 8, 6, 3));
  dags.push_back(fan_out_in(32));
  Engine engine(EngineOptions{.threads = 2, .max_threads = 4, .pin = false});
  std::atomic<bool> stop{false};
  std::thread resizer([&] {
    std::mt19937 rng(11);
    while (!stop.load()) {
      engine.set_workers(1 + static_cast<int>(rng() % 4));
      std::this_thread::sleep_for(std::chrono::microseconds(rng() % 300));
    }
  });
  int wrong = 0;
  for (int round = 0; round < 250; ++round) {
    std::vector<std::shared_ptr<CheckingJob>> jobs;
    std::vector<std::future<void>> pending;
    for (int k = 0; k < 3; ++k) {
      jobs.push_back(std::make_shared<CheckingJob>(dags[static_cast<size_t>(round + k) % dags.size()], worker_slots(engine)));
      pending.push_back(submit_job(engine, jobs.back()));
    }
    auto mine = std::make_shared<CheckingJob>(dags[static_cast<size_t>(round) % dags.size()], worker_slots(engine));
    run_job(engine, mine);
    jobs.push_back(mine);
    for (auto& f : pending) f.get();
    for (auto& j : jobs) wrong += j->tiles_not_run_once() + j->early() + j->bad_arguments();
  }
  stop = true;
  resizer.join();
  EXPECT_EQ(wrong, 0);
}

}  // namespace
}  // namespace grove::test
