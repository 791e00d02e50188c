// grove tune --sample-layouts N --dataset FILE.csv and --fit-layouts FILE.csv: the layout
// model of paper 003 (tune/layout_model.h). Sampling times every layout change of N sampled
// values inside one-Transpose models, at one thread and at --threads; fitting trains NN2's
// network on them and reports its MdRAE on a held-out tenth against linear regression and
// against one price per moved element, the planner's measure without it.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <random>

#include "cli/commands.h"
#include "cli/format.h"
#include "kernels/conv_nchwc.h"
#include "kernels/isa.h"
#include "profile/sampled_layouts.h"
#include "tune/perf_select.h"
#include "tune/perf_transfer.h"
#include "tune/record.h"

namespace grove::cli {
namespace {

using Clock = std::chrono::steady_clock;

// MdRAE of a per-change price per element, fitted as the median us per element of `train`.
std::vector<double> per_element_prices(std::span<const tune::PerfSample> train, size_t outputs) {
  std::vector<double> prices;
  for (size_t k = 0; k < outputs; ++k) {
    std::vector<double> r;
    for (const tune::PerfSample& s : train)
      if (!std::isnan(s.times[k])) r.push_back(s.times[k] / std::exp2(s.features[0]));
    std::sort(r.begin(), r.end());
    prices.push_back(r.empty() ? 0 : r[r.size() / 2]);
  }
  return prices;
}

void print_row(const char* label, std::span<const tune::PerfSample> test, size_t outputs,
               const std::function<std::vector<double>(std::span<const double>)>& predict) {
  std::printf("  %-30s", label);
  for (size_t k = 0; k < outputs; ++k) std::printf(" %15.3f", tune::mdrae(test, predict, static_cast<int>(k)));
  std::printf(" %15.3f\n", tune::mdrae(test, predict));
}

}  // namespace

int run_tune_sample_layouts(const TuneOptions& o) {
  if (!o.model.empty()) throw Error("tune: --sample-layouts profiles sampled values; give no model with it");
  if (o.dataset.empty()) throw Error("tune: --sample-layouts needs --dataset FILE.csv to append the measurements to");
  const auto t0 = Clock::now();
  const int64_t block = static_cast<int64_t>(kernels::conv_nchwc_block(kernels::active_isa()));
  profile::ProfileSettings settings;
  settings.runs = o.runs;
  settings.passes = o.passes;
  settings.progress = false;
  const int all = o.threads > 0 ? o.threads : available_cores();
  std::vector<int> thread_counts = {1};
  if (all > 1) thread_counts.push_back(all);
  size_t rows = 0;
  for (int threads : thread_counts) {
    Engine engine({.threads = threads});
    std::mt19937_64 rng(o.seed + static_cast<uint64_t>(threads));
    for (int i = 0; i < o.sample_layouts; ++i) {
      const Shape value = profile::sample_value(rng);
      const std::vector<tune::LayoutRow> measured = profile::profile_layout_changes(engine, value, block, settings);
      tune::append_layout_rows(o.dataset, measured);
      rows += measured.size();
      if (!o.quiet)
        std::fprintf(stderr, "tune: value %d/%d at %d thread%s: %lldx%lldx%lld, %zu changes\n", i + 1, o.sample_layouts,
                     threads, threads > 1 ? "s" : "", (long long)value[1], (long long)value[2], (long long)value[3],
                     measured.size());
    }
  }
  std::printf("sampled %d values at %zu thread counts: %zu layout changes appended to %s in %s\n", o.sample_layouts,
              thread_counts.size(), rows, o.dataset.c_str(),
              milliseconds(std::chrono::duration<double>(Clock::now() - t0).count()).c_str());
  return 0;
}

int run_tune_fit_layouts(const TuneOptions& o) {
  if (!o.model.empty()) throw Error("tune: --fit-layouts trains on a dataset; give no model with it");
  const std::string machine = o.fit_machine.empty() ? kernels::machine_key() : o.fit_machine;
  if (machine != kernels::machine_key() && o.model_out.empty())
    throw Error("tune --fit-machine: a model of another machine is not installed here; give --model-out FILE");
  std::vector<tune::LayoutRow> rows = tune::read_layout_csv(o.fit_layouts);
  std::erase_if(rows, [&](const tune::LayoutRow& r) { return r.machine != machine; });
  const std::vector<tune::PerfSample> samples = tune::layout_samples(rows);
  if (samples.size() < 10)
    throw Error(o.fit_layouts + ": " + std::to_string(samples.size()) + " values measured on " + machine +
                " are too few to fit a layout model (grove tune --sample-layouts 100 --dataset FILE.csv)");
  const std::vector<std::string>& changes = tune::layout_changes();
  const tune::SampleSplit split = tune::split_samples(samples, 0.1, o.seed);
  std::printf("dataset: %s   machine: %s\n%zu rows, %zu values x thread counts (train %zu, test %zu)\n",
              o.fit_layouts.c_str(), machine.c_str(), rows.size(), samples.size(), split.train.size(), split.test.size());
  std::printf("MdRAE on the test split (median |predicted - measured| / measured):\n  %-30s", "");
  for (const std::string& c : changes) std::printf(" %15s", c.c_str());
  std::printf(" %15s\n", "all");
  const tune::PerfModel nn2 = tune::PerfModel::train(split.train, tune::nn2_options(o.seed));
  const tune::LinearModel linear = tune::LinearModel::train(split.train);
  const std::vector<double> prices = per_element_prices(split.train, changes.size());
  print_row("NN2 (MLP 64x64)", split.test, changes.size(), [&](auto f) { return nn2.predict(f); });
  print_row("linear regression", split.test, changes.size(), [&](auto f) { return linear.predict(f); });
  print_row("one price per element", split.test, changes.size(), [&](auto f) {
    std::vector<double> t;
    for (double p : prices) t.push_back(p * std::exp2(f[0]));
    return t;
  });
  std::vector<double> errors;
  for (size_t k = 0; k < changes.size(); ++k) {
    const double e = tune::mdrae(split.test, [&](auto f) { return nn2.predict(f); }, static_cast<int>(k));
    errors.push_back(std::isnan(e) ? 0.0 : e);
  }
  tune::PerfModel saved = tune::PerfModel::train(samples, tune::nn2_options(o.seed));  // every sample, for use
  saved.set_output_names(changes);
  saved.set_output_errors(errors);
  const std::string path = o.model_out.empty() ? tune::layout_model_path() : o.model_out;
  if (path.empty()) throw Error("tune --fit-layouts: no cache folder (set GROVE_TUNE_DIR or HOME), or give --model-out FILE");
  tune::install_perf_model(saved, path);
  std::printf("model: %s (trained on every value)\n", path.c_str());
  return 0;
}

}  // namespace grove::cli
