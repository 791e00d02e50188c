// An idle engine sleeps: its workers park instead of spinning.
#include <gtest/gtest.h>
#include <time.h>

#include <chrono>
#include <thread>

#include "runtime/cores.h"
#include "test_dags.h"

namespace grove::test {
namespace {

double process_cpu_seconds() {
  timespec ts{};
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) * 1e-9;
}

TEST(Idle, IdleEngineUsesAlmostNoCpu) {
  Engine engine(EngineOptions{.threads = 8});  // more workers than cores: spinning would show
  TestDag dag = random_layered(8, 10, 16, 3);
  for (int i = 0; i < 20; ++i) submit_job(engine, std::make_shared<CheckingJob>(dag, worker_slots(engine))).get();
  std::this_thread::sleep_for(std::chrono::milliseconds(100));  // let the spinning phase end
  double before = process_cpu_seconds();
  std::this_thread::sleep_for(std::chrono::seconds(1));
  double used = process_cpu_seconds() - before;
  std::printf("[ idle ] CPU time over one idle second with 8 workers: %.2f ms\n", used * 1e3);
  EXPECT_LT(used, 0.050);
  // And it still wakes up for new work.
  auto job = std::make_shared<CheckingJob>(dag, worker_slots(engine));
  submit_job(engine, job).get();
  EXPECT_EQ(job->tiles_not_run_once(), 0);
}

TEST(Idle, BusySpinEndsWithTheLastJobInFlight) {
  // Workers that fit the cores spin between a job's tiles (EngineOptions::busy_spin_ms), here
  // for up to a second: once no job is in flight they must park after the short spin.
  Engine engine(EngineOptions{.threads = available_cores(), .busy_spin_ms = 1000});
  TestDag dag = random_layered(8, 10, 16, 3);
  for (int i = 0; i < 20; ++i) submit_job(engine, std::make_shared<CheckingJob>(dag, worker_slots(engine))).get();
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  double before = process_cpu_seconds();
  std::this_thread::sleep_for(std::chrono::milliseconds(500));
  double used = process_cpu_seconds() - before;
  std::printf("[ idle ] CPU time over half an idle second after busy-spinning jobs: %.2f ms\n", used * 1e3);
  EXPECT_LT(used, 0.050);
  auto job = std::make_shared<CheckingJob>(dag, worker_slots(engine));
  submit_job(engine, job).get();
  EXPECT_EQ(job->tiles_not_run_once(), 0);
}

}  // namespace
}  // namespace grove::test
