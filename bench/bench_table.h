#pragma once
// Shared by the benchmarks that end with a markdown table: a reporter that keeps each
// benchmark's GFLOP/s (the median when repetitions are aggregated) and label, and the run.
#include <benchmark/benchmark.h>
#include <omp.h>

#include <map>
#include <string>
#include <vector>

namespace grove::bench {

class TableReporter : public benchmark::ConsoleReporter {
 public:
  void ReportRuns(const std::vector<Run>& runs) override {
    ConsoleReporter::ReportRuns(runs);
    for (const Run& run : runs) {
      if (run.run_type == Run::RT_Aggregate && run.aggregate_name != "median") continue;
      const std::string name = run.run_name.function_name, args = run.run_name.args;
      const auto it = run.counters.find("GFLOP/s");
      if (it != run.counters.end()) gflops[args][name] = it->second.value;
      if (!run.report_label.empty()) labels[args][name] = run.report_label;
    }
  }
  // [benchmark argument text][benchmark name]
  std::map<std::string, std::map<std::string, double>> gflops;
  std::map<std::string, std::map<std::string, std::string>> labels;
};

// Runs the registered benchmarks, oneDNN pinned to one thread (grove's kernels are
// single-threaded). False on unrecognised arguments.
inline bool run_benchmarks(int argc, char** argv, TableReporter& reporter) {
  omp_set_num_threads(1);
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return false;
  benchmark::RunSpecifiedBenchmarks(&reporter);
  benchmark::Shutdown();
  return true;
}

}  // namespace grove::bench
