// grove bench a.onnx b.onnx --mt-graph: MT-Graph (thesis 004, chapter 4.1) on grove's ready
// pool. Searches the stage pointer matrix by coordinate descent on measured latency of the
// compound task (every model run once), then times, interleaved round by round (medians):
//   mt-graph      the best pointer matrix: stage gates in one job
//   together      plain co-execution: every model submitted at once, no stages
//   in turn       one after the other (FIFO over the task's requests)
//   split cores   fixed partitioning: one engine per model with its share of the threads
#include <unistd.h>

#include <cstdio>

#include "cli/bench_stats.h"
#include "cli/coexec_models.h"
#include "runtime/planned_run.h"
#include "runtime/staged_job.h"
#include "serve/mt_graph_search.h"

namespace grove::cli {
namespace {

struct Compound {
  std::vector<Loaded> models;
  std::vector<std::shared_ptr<const Plan>> plans;
  std::vector<std::shared_ptr<BufferPool>> buffers;  // one pool per model, kept across runs, as a Session does
};

double run_staged(Engine& engine, Compound& c, const std::shared_ptr<const StagedDag>& dag) {
  auto t = Clock::now();
  std::vector<std::shared_ptr<PlannedRun>> runs;
  for (size_t i = 0; i < c.models.size(); ++i)
    runs.push_back(std::make_shared<PlannedRun>(c.plans[i], c.models[i].inputs, PlannedRunOptions{.buffers = c.buffers[i]}));
  engine.run(std::make_shared<StagedJob>(dag, std::move(runs)));
  return ms_since(t);
}

}  // namespace

int run_bench_mtgraph(const BenchOptions& o) {
  if (o.schedule != "aspen") throw Error("--mt-graph builds its stages on the barrier-free schedule (--schedule aspen)");
  ShapeMap shapes = parse_shape_options(o.shapes);
  Engine engine({.threads = o.threads});
  Compound c;
  std::vector<int32_t> ops;
  for (const auto& path : o.models) {
    c.models.push_back(load_for_coexec(engine, o, path, shapes));
    ShapeMap bound;
    for (const auto& [name, t] : c.models.back().inputs) bound[name] = t.shape();
    c.plans.push_back(c.models.back().session->plan_for(bound));
    c.buffers.push_back(std::make_shared<BufferPool>());
    ops.push_back(static_cast<int32_t>(c.plans.back()->graph.nodes.size()));
  }
  // Fixed partitioning: the threads shared out, at least one per model.
  std::vector<std::unique_ptr<Engine>> split_engines;
  std::vector<Loaded> split;
  const int n = static_cast<int>(o.models.size());
  for (int i = 0; i < n; ++i) {
    int threads = std::max(1, engine.threads() / n + (i < engine.threads() % n ? 1 : 0));
    split_engines.push_back(std::make_unique<Engine>(EngineOptions{.threads = threads, .pin = false}));
    split.push_back(load_for_coexec(*split_engines.back(), o, o.models[static_cast<size_t>(i)], shapes));
  }

  const bool tty = isatty(STDERR_FILENO) && !o.json;
  for (int i = 0; i < o.warmup; ++i) run_together(c.models), run_in_turn(c.models), run_together(split);
  int profiled = 0;
  auto search_start = Clock::now();
  auto cost = [&](const PointerMatrix& rho) {
    auto dag = make_staged_dag(c.plans, rho);
    std::vector<double> t;
    for (int r = 0; r < o.mt_profile_runs; ++r) t.push_back(run_staged(engine, c, dag));
    if (tty) std::fprintf(stderr, "\r  searching: %d schedules profiled", ++profiled);
    return percentile(t, 50);
  };
  serve::MtGraphResult found = serve::search_pointer_matrix(
      ops, {.pointers = o.mt_pointers, .rounds = o.mt_rounds, .candidates = o.mt_candidates, .seed = o.seed}, cost);
  const double search_s = ms_since(search_start) / 1e3;
  if (tty) std::fprintf(stderr, "\r%50s\r", "");

  auto best = make_staged_dag(c.plans, found.best.rho);
  std::vector<double> staged, together, in_turn, cores;
  for (int i = 0; i < o.runs; ++i) {
    // Rotate the order so that no layout always follows another.
    for (int k = 0; k < 4; ++k) {
      switch ((i + k) % 4) {
        case 0: staged.push_back(run_staged(engine, c, best)); break;
        case 1: together.push_back(run_together(c.models)); break;
        case 2: in_turn.push_back(run_in_turn(c.models)); break;
        default: cores.push_back(run_together(split)); break;
      }
    }
  }
  const double p_staged = percentile(staged, 50), p_together = percentile(together, 50), p_turn = percentile(in_turn, 50),
               p_cores = percentile(cores, 50);
  const std::string rho = serve::pointer_matrix_str(found.best.rho);
  if (o.json) {
    std::printf("{\"models\": [");
    for (int i = 0; i < n; ++i) std::printf("%s\"%s\"", i ? ", " : "", o.models[static_cast<size_t>(i)].c_str());
    std::printf("], \"threads\": %d, \"rho\": \"%s\", \"search_s\": %.2f, \"profiled\": %zu, \"rounds\": %d, "
                "\"mt_graph_p50_ms\": %.4f, \"together_p50_ms\": %.4f, \"in_turn_p50_ms\": %.4f, \"split_cores_p50_ms\": %.4f}\n",
                engine.threads(), rho.c_str(), search_s, found.records.size(), o.runs, p_staged, p_together, p_turn, p_cores);
    return 0;
  }
  std::printf("MT-Graph over %d models, %d threads: %zu schedules profiled in %.1f s (%d pointers, %d rounds, %d candidates, %d runs each)\n",
              n, engine.threads(), found.records.size(), search_s, o.mt_pointers, o.mt_rounds, o.mt_candidates, o.mt_profile_runs);
  for (int i = 0; i < n; ++i) std::printf("  %s (%d ops)\n", o.models[static_cast<size_t>(i)].c_str(), ops[static_cast<size_t>(i)]);
  std::printf("best pointer matrix %s (one stage, plain co-execution, is %s)%s\n", rho.c_str(),
              serve::pointer_matrix_str(found.start.rho).c_str(),
              found.best.rho == found.start.rho ? ": no staged schedule beat plain co-execution when profiled again" : "");
  std::printf("compound task latency, %d interleaved rounds, medians:\n", o.runs);
  std::printf("  %-24s %9.3f ms\n", "mt-graph (best stages)", p_staged);
  std::printf("  %-24s %9.3f ms  (%.2fx of mt-graph)\n", "together, no stages", p_together, p_together / p_staged);
  std::printf("  %-24s %9.3f ms  (%.2fx)\n", "one after the other", p_turn, p_turn / p_staged);
  std::printf("  %-24s %9.3f ms  (%.2fx)\n", "split cores", p_cores, p_cores / p_staged);
  return 0;
}

}  // namespace grove::cli
