// A job whose tiles combine their parents' values gives the same result on every schedule.
#include <gtest/gtest.h>

#include <cstdint>
#include <vector>

#include "test_dags.h"

namespace grove::test {
namespace {

// value[t] = mix(t, values of t's parents in a fixed order): any tile that ran before a
// parent, or twice, or not at all, changes the sink values.
class ValueJob : public Job {
 public:
  explicit ValueJob(const TestDag& dag) : dag_(dag), values_(static_cast<size_t>(dag.size()), 0) {}
  DagView dag() const override { return dag_.view(); }
  void run_tile(int32_t tile, int) override {
    uint64_t v = 0x9E3779B97F4A7C15ull * static_cast<uint64_t>(tile + 1);
    for (int32_t p : dag_.parents[static_cast<size_t>(tile)]) v = (v ^ values_[static_cast<size_t>(p)]) * 0x100000001B3ull + 7;
    values_[static_cast<size_t>(tile)] += v;  // += so a second run would show
  }
  const std::vector<uint64_t>& values() const { return values_; }

 private:
  const TestDag& dag_;
  std::vector<uint64_t> values_;  // plain memory: the engine's ordering must make it safe
};

std::vector<uint64_t> sequential(const TestDag& dag) {
  ValueJob job(dag);
  for (int32_t t = 0; t < dag.size(); ++t) job.run_tile(t, 0);  // tiles are topologically numbered
  return job.values();
}

TEST(Determinism, ThousandRunsGiveIdenticalValues) {
  TestDag dag = random_layered(42, 8, 6, 3);
  const std::vector<uint64_t> expected = sequential(dag);
  for (int threads : {2, 3}) {
    Engine engine(EngineOptions{.threads = threads});
    for (int run = 0; run < 1000; ++run) {
      auto job = std::make_shared<ValueJob>(dag);
      if (run % 2)
        run_job(engine, job);
      else
        submit_job(engine, job).get();
      ASSERT_EQ(job->values(), expected) << "run " << run << " at " << threads << " threads";
    }
  }
}

}  // namespace
}  // namespace grove::test
