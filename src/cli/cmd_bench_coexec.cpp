// grove bench a.onnx b.onnx: co-execution. Each round runs every model once submitted
// together into one engine (their tiles share the ready pool) and once one after the other,
// alternating the two orders round by round; the ratio of the medians is the gain from
// filling one model's idle cores with the other's tiles.
#include <unistd.h>

#include <cstdio>

#include "cli/bench_stats.h"
#include "cli/coexec_models.h"
#include "cli/commands.h"
#include "runtime/session.h"

namespace grove::cli {

int run_bench_coexec(const BenchOptions& o) {
  if (o.schedule == "both") throw Error("--schedule both times one model; co-execution takes aspen or barrier");
  if (o.precision == "both" || o.precision.find(',') != std::string::npos)
    throw Error("--precision " + o.precision + " times one model; co-execution takes fp32 or bf16");
  if (o.check > 0) throw Error("--check compares the precisions of one model; give one model");
  auto t0 = Clock::now();
  ShapeMap shapes = parse_shape_options(o.shapes);
  Engine engine({.threads = o.threads});
  std::vector<Loaded> models;
  for (const auto& path : o.models) models.push_back(load_for_coexec(engine, o, path, shapes));
  double load_plan_ms = ms_since(t0);

  const auto warm_start = Clock::now();
  for (int i = 0; i < o.warmup || ms_since(warm_start) < o.warmup_seconds * 1e3; ++i) run_together(models), run_in_turn(models);
  std::vector<double> together, in_turn;
  bool tty = isatty(STDERR_FILENO) && !o.json;
  auto start = Clock::now();
  for (int i = 0; i < o.runs || ms_since(start) < o.seconds * 1e3; ++i) {
    if (i % 2 == 0) {  // alternate which goes first, so neither always follows the other
      together.push_back(run_together(models));
      in_turn.push_back(run_in_turn(models));
    } else {
      in_turn.push_back(run_in_turn(models));
      together.push_back(run_together(models));
    }
    if (tty) std::fprintf(stderr, "\r  round %d/%d", i + 1, o.runs);
  }
  if (tty) std::fprintf(stderr, "\r%40s\r", "");

  double n = static_cast<double>(models.size());
  double p50_together = percentile(together, 50), p50_in_turn = percentile(in_turn, 50);
  if (o.json) {
    std::printf("{\"models\": [");
    for (size_t i = 0; i < models.size(); ++i) std::printf("%s\"%s\"", i ? ", " : "", models[i].path.c_str());
    std::printf("], \"threads\": %d, \"schedule\": \"%s\", \"load_plan_ms\": %.3f, \"peak_rss_mb\": %.1f, "
                "\"rounds\": %zu, \"together_p50_ms\": %.4f, \"in_turn_p50_ms\": %.4f, "
                "\"together_per_s\": %.4f, \"in_turn_per_s\": %.4f, \"speedup\": %.4f}\n",
                engine.threads(), o.schedule.c_str(), load_plan_ms, peak_rss_mb(), together.size(), p50_together,
                p50_in_turn, n * 1e3 / p50_together, n * 1e3 / p50_in_turn, p50_in_turn / p50_together);
    return 0;
  }
  std::printf("co-execution of %zu models, %d threads, %s schedule (%zu rounds, medians)\n", models.size(),
              engine.threads(), o.schedule.c_str(), together.size());
  for (const auto& m : models) std::printf("  %s\n", m.path.c_str());
  std::printf("%-16s %10s %14s\n", "", "p50 ms", "inferences/s");
  std::printf("%-16s %10.3f %14.2f\n", "together", p50_together, n * 1e3 / p50_together);
  std::printf("%-16s %10.3f %14.2f\n", "one after other", p50_in_turn, n * 1e3 / p50_in_turn);
  std::printf("co-execution speedup: %.3fx\n", p50_in_turn / p50_together);
  return 0;
}

}  // namespace grove::cli
