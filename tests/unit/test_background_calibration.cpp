// The background calibration (grove/background_calibration.h): on an idle engine it measures
// its sampled layers and installs a model fine-tuned from the shipped one; while the watched
// engine keeps running jobs it keeps none of its measurements and gives each layer up, then
// finishes once the jobs stop; where a model is already installed it does nothing. One of
// grove_concurrent_unit_tests' files (ThreadSanitizer, scripts/test.sh).
#include <gtest/gtest.h>

#include <atomic>
#include <deque>
#include <filesystem>
#include <fstream>
#include <future>
#include <thread>

#include "grove/background_calibration.h"
#include "grove/grove.h"
#include "kernels/isa.h"
#include "onnx/import.h"
#include "runtime/session.h"
#include "slow_models.h"
#include "tune/shipped_models.h"

namespace grove {
namespace {

struct CalibrationDir {
  std::filesystem::path path;
  CalibrationDir() {
    path = std::filesystem::temp_directory_path() / ("grove_calibration_" + std::to_string(::getpid()) + "_" +
                                                     ::testing::UnitTest::GetInstance()->current_test_info()->name());
    std::filesystem::remove_all(path);
    std::filesystem::create_directories(path);
  }
  ~CalibrationDir() { std::filesystem::remove_all(path); }
};

// Few and short measurements: the test checks the path, not the model's accuracy.
BackgroundCalibrationOptions quick(const std::string& model_out, double idle_seconds) {
  return {.idle_seconds = idle_seconds, .samples = 2, .runs = 2, .passes = 1, .seed = 3, .model_out = model_out};
}

bool ships_a_model() { return !tune::shipped_perf_model(kernels::isa_name(kernels::active_isa())).empty(); }

std::string first_line(const std::filesystem::path& p) {
  std::ifstream f(p);
  std::string line;
  std::getline(f, line);
  return line;
}

TEST(BackgroundCalibration, OnAnIdleEngineInstallsAModelFineTunedFromTheShippedOne) {
  if (!ships_a_model()) GTEST_SKIP() << "no performance model ships for this ISA";
  CalibrationDir dir;
  const std::string out = (dir.path / "conv.perfmodel").string();
  Engine watched({.threads = 1});
  BackgroundCalibration calibration(watched, quick(out, 0.05));
  ASSERT_TRUE(calibration.wait(600 * test::kSanitizerSlack));
  const BackgroundCalibrationStatus s = calibration.status();
  ASSERT_EQ(s.state, "done") << s.detail;
  EXPECT_EQ(s.layers_measured, s.layers_total);
  EXPECT_EQ(s.layers_total, available_cores() > 1 ? 4 : 2);
  EXPECT_NE(s.detail.find(out), std::string::npos) << s.detail;
  EXPECT_EQ(s.model_path, out);
  EXPECT_EQ(first_line(out), "grove-perf-model 2");
  EXPECT_FALSE(std::filesystem::exists(out + ".partial"));
}

TEST(BackgroundCalibration, KeepsNoMeasurementWhileTheWatchedEngineRunsJobs) {
  if (!ships_a_model()) GTEST_SKIP() << "no performance model ships for this ISA";
  CalibrationDir dir;
  const std::string out = (dir.path / "conv.perfmodel").string();
  Engine watched({.threads = 1});
  Session session(watched, model_from_graph(load_onnx_bytes(test::matmul_chain_model(4, 16, 16), "chain.onnx")));
  const TensorMap inputs = {{"x", Tensor::from<float>({16, 16}, std::vector<float>(256, 1.0f))}};
  std::atomic<bool> load{true};
  // Four jobs in flight, the next submitted as the oldest is collected: the engine is never
  // idle, and stays busy for four jobs' time when this thread is descheduled (a loaded
  // machine: with runs back to back, a layer measured in one such gap failed the test).
  std::thread client([&] {
    std::deque<std::future<TensorMap>> in_flight;
    while (load.load()) {
      while (in_flight.size() < 4) in_flight.push_back(session.submit(inputs));
      in_flight.front().get();
      in_flight.pop_front();
    }
    for (auto& f : in_flight) f.get();
  });
  // Idle time 0: a layer starts at once and meets the jobs at its first run.
  BackgroundCalibration calibration(watched, quick(out, 0));
  // The calibration runs at the idle scheduling class: on a machine loaded by other work it
  // gets a sliver of a core, and its three tries took more than 5 s there (the loop ends as
  // soon as they are in).
  const auto until = std::chrono::steady_clock::now() + std::chrono::duration<double>(60 * test::kSanitizerSlack);
  while (calibration.status().interruptions < 3 && std::chrono::steady_clock::now() < until)
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  BackgroundCalibrationStatus busy = calibration.status();
  load.store(false);
  client.join();
  EXPECT_GE(busy.interruptions, 3);
  EXPECT_EQ(busy.layers_measured, 0) << "a layer measured beside the jobs";
  EXPECT_FALSE(std::filesystem::exists(out));
  // Without the jobs, the same layers are measured again, whole, and the model installed.
  ASSERT_TRUE(calibration.wait(600 * test::kSanitizerSlack));
  EXPECT_EQ(calibration.status().state, "done") << calibration.status().detail;
  EXPECT_EQ(first_line(out), "grove-perf-model 2");
}

TEST(BackgroundCalibration, DoesNothingWhereTheMachineHasAModel) {
  CalibrationDir dir;
  const std::string out = (dir.path / "conv.perfmodel").string();
  std::ofstream(out) << "the machine's own model\n";
  Engine watched({.threads = 1});
  BackgroundCalibration calibration(watched, quick(out, 0));
  ASSERT_TRUE(calibration.wait(60));
  EXPECT_EQ(calibration.status().state, "not needed");
  EXPECT_EQ(first_line(out), "the machine's own model");
}

TEST(BackgroundCalibration, StopsWhenDestroyedWithoutInstallingAnything) {
  if (!ships_a_model()) GTEST_SKIP() << "no performance model ships for this ISA";
  CalibrationDir dir;
  const std::string out = (dir.path / "conv.perfmodel").string();
  Engine watched({.threads = 1});
  {
    BackgroundCalibration calibration(watched, quick(out, 3600));  // waits for an hour of idle cores
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    EXPECT_EQ(calibration.status().state, "waiting");
  }  // the destructor returns at once
  EXPECT_FALSE(std::filesystem::exists(out));
}

}  // namespace
}  // namespace grove
