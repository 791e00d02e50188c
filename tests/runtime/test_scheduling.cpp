// Every tile exactly once, never before its parents, on many DAG shapes and worker counts.
#include <gtest/gtest.h>

#include "test_dags.h"

namespace grove::test {
namespace {

class SchedulingTest : public ::testing::TestWithParam<int> {};

TEST_P(SchedulingTest, EveryTileOnceAfterItsParents) {
  const int threads = GetParam();
  Engine engine(EngineOptions{.threads = threads});
  ASSERT_EQ(engine.threads(), threads);
  for (const TestDag& dag : all_shapes()) {
    for (int repeat = 0; repeat < 20; ++repeat) {
      auto job = std::make_shared<CheckingJob>(dag, worker_slots(engine));
      if (repeat % 2 == 0)
        submit_job(engine, job).get();
      else
        run_job(engine, job);  // the calling thread works too
      ASSERT_EQ(job->tiles_not_run_once(), 0) << dag.name << " repeat " << repeat;
      ASSERT_EQ(job->early(), 0) << dag.name << " repeat " << repeat;
      ASSERT_EQ(job->bad_arguments(), 0) << dag.name;
    }
  }
}

// With DagView::place, sources and readied tiles go to their share's row and a worker follows
// a child of its own share: still every tile once after its parents, through submit() and
// run() (whose caller takes a worker's share), with places spread over every share.
TEST_P(SchedulingTest, EveryTileOnceAfterItsParentsWithPlaces) {
  const int threads = GetParam();
  Engine engine(EngineOptions{.threads = threads});
  for (TestDag dag : all_shapes()) {
    for (int32_t t = 0; t < dag.size(); ++t) dag.place.push_back(static_cast<uint16_t>((uint32_t(t) * 40503u) & 0xffffu));
    for (int repeat = 0; repeat < 10; ++repeat) {
      auto job = std::make_shared<CheckingJob>(dag, worker_slots(engine));
      if (repeat % 2 == 0)
        submit_job(engine, job).get();
      else
        run_job(engine, job);
      ASSERT_EQ(job->tiles_not_run_once(), 0) << dag.name << " repeat " << repeat;
      ASSERT_EQ(job->early(), 0) << dag.name << " repeat " << repeat;
    }
  }
}

TEST_P(SchedulingTest, PriorityPoliciesAllComplete) {
  for (PriorityPolicy policy : {PriorityPolicy{1, column_by_relative_depth}, PriorityPolicy{63, column_by_depth},
                                PriorityPolicy{3, [](int32_t, int32_t, int) { return 1000; }}}) {
    Engine engine(EngineOptions{.threads = GetParam(), .priority = policy});
    TestDag dag = random_layered(7, 10, 12, 3);
    auto job = std::make_shared<CheckingJob>(dag, worker_slots(engine));
    submit_job(engine, job).get();
    EXPECT_EQ(job->tiles_not_run_once(), 0);
    EXPECT_EQ(job->early(), 0);
  }
}

// Urgent jobs (Job::urgent) beside ordinary ones: their tiles jump the queue, and every tile
// of both still runs once, after its parents.
TEST_P(SchedulingTest, UrgentAndOrdinaryJobsTogether) {
  Engine engine(EngineOptions{.threads = GetParam()});
  TestDag big = random_layered(11, 12, 16, 3), small = random_layered(5, 4, 6, 2);
  for (int repeat = 0; repeat < 10; ++repeat) {
    std::vector<std::shared_ptr<CheckingJob>> jobs;
    std::vector<std::future<void>> done;
    for (int k = 0; k < 4; ++k) {
      jobs.push_back(std::make_shared<CheckingJob>(k % 2 ? small : big, worker_slots(engine), k % 2 == 1));
      done.push_back(submit_job(engine, jobs.back()));
    }
    auto urgent_run = std::make_shared<CheckingJob>(small, worker_slots(engine), true);
    run_job(engine, urgent_run);
    for (auto& f : done) f.get();
    jobs.push_back(urgent_run);
    for (const auto& job : jobs) {
      ASSERT_EQ(job->tiles_not_run_once(), 0) << "repeat " << repeat;
      ASSERT_EQ(job->early(), 0) << "repeat " << repeat;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Workers, SchedulingTest, ::testing::Values(1, 2, 3, 8));

TEST(EngineOptions, DefaultThreadsAreTheAvailableCores) {
  Engine engine;
  EXPECT_EQ(engine.threads(), available_cores());
  EXPECT_EQ(worker_slots(engine), engine.threads() + 1);
}

TEST(EngineOptions, WithoutPinningOrCallerWorkStillCorrect) {
  Engine engine(EngineOptions{.threads = 2, .pin = false, .caller_works = false});
  TestDag dag = random_layered(9, 8, 8, 2);
  auto job = std::make_shared<CheckingJob>(dag, worker_slots(engine));
  run_job(engine, job);
  EXPECT_EQ(job->tiles_not_run_once(), 0);
  EXPECT_EQ(job->early(), 0);
}

}  // namespace
}  // namespace grove::test
