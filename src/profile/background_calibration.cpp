// grove/background_calibration.h. Why a layer at a time: a request may arrive at any moment,
// and a layer's profile is the unit that can be given up and measured again whole. Why its own
// engines at the idle scheduling class: the watched engine's workers (and a server's request
// threads) then take the cores back the moment they want them, while the layer in hand is
// given up at its next run and its times, taken beside that work, never reach the model.
#include "grove/background_calibration.h"

#include <chrono>
#include <condition_variable>
#include <filesystem>
#include <mutex>
#include <thread>

#include "kernels/isa.h"
#include "profile/sampled_layers.h"
#include "runtime/cores.h"
#include "tune/perf_select.h"
#include "tune/perf_transfer.h"
#include "tune/record.h"
#include "tune/shipped_models.h"

namespace grove {
namespace {

using Clock = std::chrono::steady_clock;

// Thrown out of a layer's profile when it must stop: a job arrived (interrupted) or the
// object is going away.
struct GiveUp {
  bool stopping = false;
};

// The same layer, drawn again after an interruption: each layer's generator depends only on
// the seed, its thread count and its index.
std::mt19937_64 layer_rng(uint64_t seed, int threads, int index) {
  return std::mt19937_64(seed * 1000003u + static_cast<uint64_t>(threads) * 10007u + static_cast<uint64_t>(index));
}

}  // namespace

struct BackgroundCalibration::Impl {
  Impl(const Engine& watched, BackgroundCalibrationOptions options) : watched(watched), options(std::move(options)) {}

  const Engine& watched;
  const BackgroundCalibrationOptions options;
  mutable std::mutex mutex;
  mutable std::condition_variable changed;  // status changes, and stop
  bool stop = false;
  BackgroundCalibrationStatus status;
  // The watched engine's job count when it was last seen idle long enough; -1 after a job
  // arrived, until it is idle again. Layers follow each other without a new wait while it holds.
  int64_t idle_jobs = -1;
  std::thread thread;

  void set(const std::string& state, const std::string& detail = "") {
    std::lock_guard lock(mutex);
    status.state = state;
    status.detail = detail;
    changed.notify_all();
  }
  bool stopping() const {
    std::lock_guard lock(mutex);
    return stop;
  }
  bool ended() const {
    return status.state == "done" || status.state == "not needed" || status.state == "failed" || status.state == "stopped";
  }

  // Returns the watched engine's job count once it has been idle (no job in flight, none
  // submitted) for options.idle_seconds; throws GiveUp when stopping.
  int64_t wait_for_idle() {
    const auto step = std::chrono::milliseconds(20);
    EngineStats s = watched.stats();
    auto quiet_since = Clock::now();
    for (;;) {
      {
        std::unique_lock lock(mutex);
        if (changed.wait_for(lock, step, [&] { return stop; })) throw GiveUp{true};
      }
      const EngineStats now = watched.stats();
      if (now.jobs_in_flight > 0 || now.jobs_submitted != s.jobs_submitted) quiet_since = Clock::now();
      s = now;
      if (std::chrono::duration<double>(Clock::now() - quiet_since).count() >= options.idle_seconds) return s.jobs_submitted;
    }
  }

  void run() {
    lower_current_thread_to_idle();  // this thread runs tiles of its sessions too
    try {
      calibrate();
    } catch (const GiveUp&) {
      set("stopped", "stopped before the calibration ended; nothing was installed");
    } catch (const std::exception& e) {
      set("failed", e.what());
    }
  }

  void calibrate() {
    const std::string path = options.model_out.empty() ? tune::perf_model_path() : options.model_out;
    {
      std::lock_guard lock(mutex);
      status.model_path = path;
    }
    std::error_code ec;
    if (path.empty()) return set("not needed", "no cache folder (set GROVE_TUNE_DIR or HOME)");
    if (std::filesystem::exists(path, ec)) return set("not needed", "this machine has a performance model: " + path);
    const std::string isa(kernels::isa_name(kernels::active_isa()));
    const std::string_view shipped = tune::shipped_perf_model(isa);
    if (shipped.empty()) return set("not needed", "grove ships no performance model for " + isa);
    const tune::PerfModel base = tune::PerfModel::load(std::string(shipped));

    std::vector<int> thread_counts = {1};
    if (available_cores() > 1) thread_counts.push_back(available_cores());
    {
      std::lock_guard lock(mutex);
      status.layers_total = options.samples * static_cast<int>(thread_counts.size());
    }
    const std::string dataset = path + ".calibration.csv";
    std::filesystem::remove(dataset, ec);  // a calibration of its own, not added to an old one
    for (int threads : thread_counts) {
      // Not pinned: the watched engine's workers hold the pins; these take what is left.
      Engine engine({.threads = threads, .pin = false, .busy_spin_ms = 0, .idle_priority = true});
      for (int i = 0; i < options.samples; ++i) measure_layer(engine, threads, i, dataset);
    }
    set("fitting");
    const std::vector<tune::ProfileRow> rows = tune::read_profile_csv(dataset);
    const std::vector<std::string> primitives = tune::priced_primitives(base);
    const std::vector<std::string> measured = tune::measured_primitives(rows);
    std::vector<bool> is_measured;
    for (const std::string& p : primitives) is_measured.push_back(std::count(measured.begin(), measured.end(), p) > 0);
    const std::vector<tune::PerfSample> samples = tune::samples_from_rows(rows, primitives);
    const tune::SampleSplit split = tune::split_samples(samples, 0.1, options.seed);
    tune::Transferred moved = tune::transfer_model(base, primitives, split.train, split.test, is_measured, options.seed);
    if (stopping()) throw GiveUp{true};
    tune::install_perf_model(moved.model, path);
    const double after = tune::mdrae(split.test, [&](auto f) { return moved.model.predict(f); });
    char line[160];
    std::snprintf(line, sizeof line, " (MdRAE on %zu held-out configurations: %.3f, the shipped model as is %.3f)",
                  split.test.size(), after, moved.as_is);
    set("done", path + line);
  }

  // Profiles layer `index` of `threads` into the dataset, again and again until no job of the
  // watched engine overlaps it.
  void measure_layer(Engine& engine, int threads, int index, const std::string& dataset) {
    for (;;) {
      if (idle_jobs < 0) {
        set("waiting");
        idle_jobs = wait_for_idle();
      }
      const int64_t jobs = idle_jobs;
      set("measuring");
      profile::ProfileSettings settings;
      settings.runs = options.runs;
      settings.passes = options.passes;
      settings.progress = false;
      settings.before_run = [&] {
        if (stopping()) throw GiveUp{true};
        const EngineStats s = watched.stats();
        if (s.jobs_submitted != jobs || s.jobs_in_flight > 0) throw GiveUp{false};
      };
      try {
        std::mt19937_64 rng = layer_rng(options.seed, threads, index);
        const tune::ConvConfig c = profile::sample_layer(index, false, rng);
        const std::vector<profile::TunedNode> nodes = profile::profile_layer(engine, c, rng, settings);
        settings.before_run();  // a job during the last run spoils it too
        profile::write_dataset(dataset, nodes, threads);
        std::lock_guard lock(mutex);
        ++status.layers_measured;
        return;
      } catch (const GiveUp& g) {
        if (g.stopping) throw;
        idle_jobs = -1;
        std::lock_guard lock(mutex);
        ++status.interruptions;
      }
    }
  }
};

BackgroundCalibration::BackgroundCalibration(const Engine& engine, BackgroundCalibrationOptions options)
    : impl_(std::make_unique<Impl>(engine, std::move(options))) {
  impl_->status.state = "waiting";
  impl_->thread = std::thread([this] { impl_->run(); });
}

BackgroundCalibration::~BackgroundCalibration() {
  {
    std::lock_guard lock(impl_->mutex);
    impl_->stop = true;
    impl_->changed.notify_all();
  }
  impl_->thread.join();
}

BackgroundCalibrationStatus BackgroundCalibration::status() const {
  std::lock_guard lock(impl_->mutex);
  return impl_->status;
}

bool BackgroundCalibration::wait(double seconds) const {
  std::unique_lock lock(impl_->mutex);
  return impl_->changed.wait_for(lock, std::chrono::duration<double>(seconds), [&] { return impl_->ended(); });
}

}  // namespace grove
