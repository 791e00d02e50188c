// grove tune --fit: train this machine's performance model (paper 003's NN2, tune/perf_model.h)
// on the candidates grove tune --dataset measured, report its accuracy against the linear
// baseline on a held-out tenth, and save it where plans without a tuning record find it. With
// --transfer-from, start from another machine's model and fine-tune it on a small share of
// this machine's samples (the paper's transfer learning), reported against training from
// scratch on the same share.
#include <chrono>
#include <filesystem>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <algorithm>
#include <iterator>
#include <limits>
#include <map>
#include <optional>

#include "cli/commands.h"
#include "kernels/cpu_info.h"
#include "tune/perf_select.h"
#include "tune/perf_transfer.h"
#include "tune/record.h"

namespace grove::cli {
namespace {

using Clock = std::chrono::steady_clock;

std::string cell(double v) {
  if (std::isnan(v)) return "-";
  char text[32];
  std::snprintf(text, sizeof text, "%.3f", v);
  return text;
}

void print_accuracy(const char* label, std::span<const tune::PerfSample> test, size_t outputs,
                    const std::function<std::vector<double>(std::span<const double>)>& predict) {
  std::printf("  %-34s", label);
  for (size_t k = 0; k < outputs; ++k)
    std::printf(" %14s", cell(tune::mdrae(test, predict, static_cast<int>(k))).c_str());
  std::printf(" %14s\n", cell(tune::mdrae(test, predict)).c_str());
}

// The model --transfer-from names, or the text given in its place (a shipped model).
tune::PerfModel load_model(const std::string& path, const std::string& given_text = "") {
  std::string text = given_text;
  if (text.empty()) {
    std::ifstream f(path, std::ios::binary);
    if (!f) throw Error(path + ": cannot open the performance model");
    text.assign((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  }
  try {
    return tune::PerfModel::load(text);
  } catch (const Error& e) {
    throw Error(path + ": " + e.what());
  }
}

}  // namespace

int run_tune_fit(const TuneOptions& o) {
  const std::string machine = o.fit_machine.empty() ? kernels::machine_key() : o.fit_machine;
  // A model of another CPU goes where it is asked to, never into this machine's cache.
  if (machine != kernels::machine_key() && o.model_out.empty())
    throw Error("tune --fit-machine: a model of another machine is not installed here; give --model-out FILE");
  std::vector<tune::ProfileRow> rows = tune::read_profile_csv(o.fit);
  std::map<std::string, size_t> machines;
  for (const auto& r : rows) ++machines[r.machine];
  std::erase_if(rows, [&](const tune::ProfileRow& r) { return r.machine != machine; });
  if (rows.empty()) {
    std::string seen;
    for (const auto& [m, n] : machines) seen += "\n  " + m + " (" + std::to_string(n) + " rows)";
    throw Error(o.fit + ": no row was measured on this machine (" + machine + "); the file has:" +
                (seen.empty() ? std::string(" nothing") : seen));
  }
  std::vector<std::string> primitives = tune::measured_primitives(rows);
  if (primitives.empty()) throw Error(o.fit + ": no row measures a primitive the performance model prices");
  if (!o.transfer_from.empty()) {
    // The other machine's model has its own outputs; this machine's samples are read for those.
    // One it prices and these rows do not measure (a calibration's few samples may draw no layer
    // for it) moves only with the layers it shares with the others.
    const std::vector<std::string> theirs = tune::priced_primitives(load_model(o.transfer_from, o.transfer_text));
    for (const std::string& p : theirs)
      if (!std::count(primitives.begin(), primitives.end(), p))
        std::fprintf(stderr, "tune: no row of %s measures '%s', which %s prices: it is fine-tuned without samples of its own\n",
                     o.fit.c_str(), p.c_str(), o.transfer_from.c_str());
    primitives = theirs;
  }
  const std::vector<tune::PerfSample> samples = tune::samples_from_rows(rows, primitives);
  if (samples.size() < 10) throw Error(o.fit + ": " + std::to_string(samples.size()) + " configurations are too few to fit a model (run grove tune --dataset on more models)");
  const tune::SampleSplit split = tune::split_samples(samples, 0.1, o.seed);
  std::printf("dataset: %s   machine: %s\n%zu rows, %zu configurations (train %zu, test %zu)\n", o.fit.c_str(),
              machine.c_str(), rows.size(), samples.size(), split.train.size(), split.test.size());
  std::printf("MdRAE on the test split (median |predicted - measured| / measured):\n  %-34s", "");
  for (const auto& p : primitives) std::printf(" %14s", p.c_str());
  std::printf(" %14s\n", "all");

  // The models trained from scratch need a time of every output. With --transfer-from the
  // outputs are the other machine's, and these rows may measure some of them nowhere: the
  // transferred model keeps those outputs from the other machine; no baseline is trained.
  const std::vector<std::string> measured = tune::measured_primitives(rows);
  auto is_measured = [&](const std::string& p) { return std::count(measured.begin(), measured.end(), p) > 0; };
  std::string unmeasured;
  for (const std::string& p : primitives)
    if (!is_measured(p)) unmeasured += (unmeasured.empty() ? "'" : ", '") + p + "'";
  std::optional<tune::PerfModel> nn2;
  std::optional<tune::LinearModel> linear;
  double train_s = 0;
  if (unmeasured.empty()) {
    auto t0 = Clock::now();
    nn2 = tune::PerfModel::train(split.train, tune::nn2_options(o.seed));
    nn2->set_output_names(primitives);
    train_s = std::chrono::duration<double>(Clock::now() - t0).count();
    linear = tune::LinearModel::train(split.train);
    print_accuracy("NN2 (MLP 64x64)", split.test, primitives.size(), [&](auto f) { return nn2->predict(f); });
    print_accuracy("linear regression", split.test, primitives.size(), [&](auto f) { return linear->predict(f); });
  } else {
    std::printf("  NN2 and linear regression from scratch: not trained (no row measures %s)\n", unmeasured.c_str());
  }

  if (!o.fit_report.empty()) {  // the test split's predictions, for a plot of predicted against measured
    std::ofstream f(o.fit_report);
    if (!f) throw Error(o.fit_report + ": cannot write the report");
    f << "primitive,measured_us,nn2_us,linear_us\n";
    for (const tune::PerfSample& s : split.test) {  // empty columns for baselines not trained
      const std::vector<double> a = nn2 ? nn2->predict(s.features) : std::vector<double>(s.times.size(), std::numeric_limits<double>::quiet_NaN());
      const std::vector<double> b = linear ? linear->predict(s.features) : std::vector<double>(s.times.size(), std::numeric_limits<double>::quiet_NaN());
      auto cell = [](double v) { return std::isnan(v) ? std::string() : std::to_string(v); };
      for (size_t k = 0; k < s.times.size(); ++k)
        if (!std::isnan(s.times[k])) f << primitives[k] << ',' << s.times[k] << ',' << cell(a[k]) << ',' << cell(b[k]) << "\n";
    }
  }
  // Each output's error on the held-out tenth goes with the model: the selection acts only on
  // differences larger than what the model can tell.
  auto errors_of = [&](const tune::PerfModel& m) {
    std::vector<double> e;
    for (size_t k = 0; k < primitives.size(); ++k) {
      const double v = tune::mdrae(split.test, [&](auto f) { return m.predict(f); }, static_cast<int>(k));
      e.push_back(std::isnan(v) ? 0.0 : v);
    }
    return e;
  };
  tune::PerfModel saved;
  if (!o.transfer_from.empty()) {
    const tune::PerfModel base = load_model(o.transfer_from, o.transfer_text);
    tune::SampleSplit few;
    if (o.sample_share >= 1.0) few.train = split.train;
    else few = tune::split_samples(split.train, 1.0 - o.sample_share, o.seed + 7);
    std::vector<bool> measured_outputs;
    for (const std::string& p : primitives) measured_outputs.push_back(is_measured(p));
    tune::Transferred transferred = tune::transfer_model(base, primitives, few.train, split.test, measured_outputs, o.seed);
    std::printf("transfer from %s with %zu samples (%.1f%% of the training set):\n", o.transfer_from.c_str(),
                few.train.size(), 100.0 * double(few.train.size()) / double(split.train.size()));
    print_accuracy("the other machine's model as is", split.test, primitives.size(), [&](auto f) { return base.predict(f); });
    print_accuracy("transferred (fine-tuned)", split.test, primitives.size(), [&](auto f) { return transferred.model.predict(f); });
    if (unmeasured.empty()) {
      tune::PerfModel scratch = tune::PerfModel::train(few.train, tune::nn2_options(o.seed));
      print_accuracy("from scratch on the same samples", split.test, primitives.size(), [&](auto f) { return scratch.predict(f); });
    }
    saved = std::move(transferred.model);
  } else {
    saved = tune::PerfModel::train(samples, tune::nn2_options(o.seed));  // every sample, for use
    saved.set_output_names(primitives);
    saved.set_output_errors(errors_of(*nn2));  // without --transfer-from every output is measured
  }
  std::string path = o.model_out.empty() ? tune::perf_model_path() : o.model_out;
  if (path.empty()) throw Error("tune --fit: no cache folder (set GROVE_TUNE_DIR or HOME), or give --model-out FILE");
  tune::install_perf_model(saved, path);
  if (nn2) std::printf("training: %.2f s   ", train_s);
  std::printf("model: %s%s\n", path.c_str(),
              o.transfer_from.empty() ? " (trained on every configuration)" : " (the transferred one)");
  return 0;
}

}  // namespace grove::cli
