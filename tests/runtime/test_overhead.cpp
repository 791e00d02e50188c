// Scheduling overhead: empty tiles per second through the engine (printed for the notes, not
// asserted; timings on a shared machine vary).
#include <gtest/gtest.h>

#include <chrono>

#include "test_dags.h"

namespace grove::test {
namespace {

class EmptyJob : public Job {
 public:
  explicit EmptyJob(const TestDag& dag) : dag_(dag) {}
  DagView dag() const override { return dag_.view(); }
  void run_tile(int32_t, int) override {}

 private:
  const TestDag& dag_;
};

TEST(Overhead, PrintsEmptyTilesPerSecond) {
  // Layers of 32 tiles, each reading 3 tiles of the layer before: like a tiled model.
  TestDag dag = random_layered(13, 64, 32, 3);
  for (int threads : {1, 2}) {
    Engine engine(EngineOptions{.threads = threads, .caller_works = false});
    submit_job(engine, std::make_shared<EmptyJob>(dag)).get();  // warm-up
    constexpr int kRuns = 30;
    auto start = std::chrono::steady_clock::now();
    for (int i = 0; i < kRuns; ++i) submit_job(engine, std::make_shared<EmptyJob>(dag)).get();
    double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    double tiles = static_cast<double>(kRuns) * dag.size();
    std::printf("[ overhead ] %d worker(s): %.2f M empty tiles/s (%.0f ns/tile, %zu edges/job, %d tiles/job)\n",
                threads, tiles / seconds * 1e-6, seconds / tiles * 1e9, dag.children.size(), dag.size());
  }
}

}  // namespace
}  // namespace grove::test
