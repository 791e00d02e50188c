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
      auto job = std::make_shared<CheckingJob>(dag, engine.worker_slots());
      if (repeat % 2 == 0)
        engine.submit(job).get();
      else
        engine.run(job);  // the calling thread works too
      ASSERT_EQ(job->tiles_not_run_once(), 0) << dag.name << " repeat " << repeat;
      ASSERT_EQ(job->early(), 0) << dag.name << " repeat " << repeat;
      ASSERT_EQ(job->bad_arguments(), 0) << dag.name;
    }
  }
}

TEST_P(SchedulingTest, PriorityPoliciesAllComplete) {
  for (PriorityPolicy policy : {PriorityPolicy{1, column_by_relative_depth}, PriorityPolicy{64, column_by_depth},
                                PriorityPolicy{3, [](int32_t, int32_t, int) { return 1000; }}}) {
    Engine engine(EngineOptions{.threads = GetParam(), .priority = policy});
    TestDag dag = random_layered(7, 10, 12, 3);
    auto job = std::make_shared<CheckingJob>(dag, engine.worker_slots());
    engine.submit(job).get();
    EXPECT_EQ(job->tiles_not_run_once(), 0);
    EXPECT_EQ(job->early(), 0);
  }
}

INSTANTIATE_TEST_SUITE_P(Workers, SchedulingTest, ::testing::Values(1, 2, 3, 8));

TEST(EngineOptions, DefaultThreadsAreTheAvailableCores) {
  Engine engine;
  EXPECT_EQ(engine.threads(), available_cores());
  EXPECT_EQ(engine.worker_slots(), engine.threads() + 1);
}

TEST(EngineOptions, WithoutPinningOrCallerWorkStillCorrect) {
  Engine engine(EngineOptions{.threads = 2, .pin = false, .caller_works = false});
  TestDag dag = random_layered(9, 8, 8, 2);
  auto job = std::make_shared<CheckingJob>(dag, engine.worker_slots());
  engine.run(job);
  EXPECT_EQ(job->tiles_not_run_once(), 0);
  EXPECT_EQ(job->early(), 0);
}

}  // namespace
}  // namespace grove::test
