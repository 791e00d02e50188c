// grove tune --calibrate: move a performance model to this machine (paper 003, section 4.4).
// It profiles a few sampled conv layers here, at one thread and at all of them, fine-tunes
// the model shipped for this ISA (or --transfer-from's) on them and installs the result where
// plans without a tuning record look: minutes instead of the hour a full profile takes.
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <vector>

#include "cli/commands.h"
#include "kernels/isa.h"
#include "runtime/engine.h"
#include "tune/record.h"
#include "tune/shipped_models.h"

namespace grove::cli {
namespace {

// About 5% of the configurations of a full profile (docs/tuning.md).
constexpr int kCalibrationSamples = 25;

}  // namespace

int run_tune_calibrate(const TuneOptions& o) {
  if (!o.model.empty() || !o.fit.empty())
    throw Error("tune: --calibrate profiles sampled layers itself; give no model or --fit with it");
  TuneOptions fit = o;
  if (o.transfer_from.empty()) {
    const std::string isa(kernels::isa_name(kernels::active_isa()));
    fit.transfer_text = std::string(tune::shipped_perf_model(isa));
    if (fit.transfer_text.empty())
      throw Error("tune --calibrate: no performance model ships for " + isa +
                  "; profile this machine with --sample and train one with --fit");
    fit.transfer_from = "the " + isa + " model shipped with grove";
  }
  TuneOptions sample = o;
  if (sample.sample <= 0) sample.sample = kCalibrationSamples;
  if (sample.dataset.empty()) {
    const std::string dir = tune::machine_tuning_dir();
    if (dir.empty()) throw Error("tune --calibrate: no cache folder (set GROVE_TUNE_DIR or HOME), or give --dataset FILE.csv");
    std::error_code ec;
    std::filesystem::create_directories(dir, ec);
    sample.dataset = dir + "/calibration.csv";
    std::filesystem::remove(sample.dataset, ec);  // a calibration of its own, not added to an old one
  }
  const int all = o.threads > 0 ? o.threads : available_cores();
  if (!o.quiet)
    std::fprintf(stderr, "tune: calibrating %s on %d sampled conv layers at 1%s thread%s\n", fit.transfer_from.c_str(),
                 sample.sample, all > 1 ? (" and " + std::to_string(all)).c_str() : "", all > 1 ? "s" : "");
  std::vector<int> thread_counts = {1};
  if (all > 1) thread_counts.push_back(all);
  for (int threads : thread_counts) {
    sample.threads = threads;
    sample.seed = o.seed + static_cast<uint64_t>(threads);
    run_tune_sample(sample);
  }
  fit.fit = sample.dataset;
  fit.sample_share = 1.0;  // every calibration sample trains the model; a tenth is held out to test it
  return run_tune_fit(fit);
}

}  // namespace grove::cli
