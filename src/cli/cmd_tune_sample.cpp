// grove tune --sample N --dataset FILE.csv: sampled conv layers (profile/sampled_layers.h),
// every eighth a network's stem (--sample-stems: stems only), each profiled inside its one-conv
// model, rows appended to the dataset as grove tune --dataset writes them.
#include <chrono>
#include <cstdio>
#include <random>

#include "cli/commands.h"
#include "cli/format.h"
#include "profile/sampled_layers.h"

namespace grove::cli {

using Clock = std::chrono::steady_clock;

int run_tune_sample(const TuneOptions& o) {
  if (!o.model.empty()) throw Error("tune: --sample profiles sampled conv layers; give no model with it");
  if (o.dataset.empty()) throw Error("tune: --sample needs --dataset FILE.csv to append the measurements to");
  const auto t0 = Clock::now();
  std::mt19937_64 rng(o.seed);
  Engine engine({.threads = o.threads});
  profile::ProfileSettings settings;
  settings.runs = o.runs;
  settings.passes = o.passes;
  settings.progress = false;
  size_t rows = 0;
  for (int i = 0; i < o.sample; ++i) {
    const tune::ConvConfig c = profile::sample_layer(i, o.sample_stems, rng);
    const auto ts = Clock::now();
    const std::vector<profile::TunedNode> nodes = profile::profile_layer(engine, c, rng, settings, o.limits);
    size_t measured = 0;
    for (const profile::TunedNode& t : nodes)
      for (const profile::TuneCandidate& k : t.candidates) measured += t.conv && k.us > 0;
    rows += measured;
    profile::write_dataset(o.dataset, nodes, engine.threads());
    if (!o.quiet)
      std::fprintf(stderr, "tune: sample %d/%d: %lld->%lld %lldx%lld/%lld on %lldx%lld, %zu candidates, %s\n", i + 1,
                   o.sample, (long long)c.cin, (long long)c.cout, (long long)c.kernel_h, (long long)c.kernel_w,
                   (long long)c.stride_h, (long long)c.in_h, (long long)c.in_w, measured,
                   milliseconds(std::chrono::duration<double>(Clock::now() - ts).count()).c_str());
  }
  std::printf("sampled %d conv layers on %d threads: %zu measured candidates appended to %s in %s\n", o.sample,
              engine.threads(), rows, o.dataset.c_str(),
              milliseconds(std::chrono::duration<double>(Clock::now() - t0).count()).c_str());
  return 0;
}

}  // namespace grove::cli
