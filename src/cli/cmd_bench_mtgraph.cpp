// grove bench a.onnx b.onnx --mt-graph: MT-Graph (thesis 004, chapter 4.1) on grove's ready
// pool. Searches the stage pointer matrix by coordinate descent on measured latency of the
// compound task (every model run once), then times each layout alone, interleaved round by
// round (medians), and under an open-loop stream of tasks against an SLO:
//   mt-graph, stage gates      the best pointer matrix: stage gates in one job
//   mt-graph, stage priority   the same stages as pool priorities only, no gates
//   together                   plain co-execution: every model submitted at once, no stages
//   one after the other        FIFO: each task's models in turn, tasks in arrival order
//   split cores                fixed partitioning: one engine per model with its share of the threads
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <functional>
#include <future>
#include <mutex>
#include <thread>

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
  std::shared_ptr<WorkerScratch> scratch;             // the tile rules' working memory, per worker slot
};

double run_staged(Engine& engine, Compound& c, const std::shared_ptr<const StagedDag>& dag) {
  auto t = Clock::now();
  std::vector<std::shared_ptr<PlannedRun>> runs;
  for (size_t i = 0; i < c.models.size(); ++i)
    runs.push_back(std::make_shared<PlannedRun>(c.plans[i], c.models[i].inputs,
                                                PlannedRunOptions{.buffers = c.buffers[i], .scratch = c.scratch}));
  run_job(engine, std::make_shared<StagedJob>(dag, std::move(runs)));
  return ms_since(t);
}

struct StreamResult {
  double p50_ms = 0, p99_ms = 0, slo_met = 0, tasks_per_s = 0;
};

struct Layout {
  const char* name;
  std::function<void()> run;  // one compound task, blocking; safe to call from several threads
  std::vector<double> alone_ms;
  StreamResult stream;
};

// Open loop: task i arrives at i * interval whether or not earlier ones are done; its latency
// runs from its arrival to its end.
StreamResult stream(const std::function<void()>& run, int tasks, double interval_ms, double slo_ms) {
  const auto start = Clock::now();
  auto arrival = [&](int i) { return start + std::chrono::microseconds(static_cast<int64_t>(i * interval_ms * 1e3)); };
  std::vector<double> latency(static_cast<size_t>(tasks));
  std::vector<std::future<void>> inflight;
  for (int i = 0; i < tasks; ++i) {
    std::this_thread::sleep_until(arrival(i));
    inflight.push_back(std::async(std::launch::async, [&, i] {
      run();
      latency[static_cast<size_t>(i)] = std::chrono::duration<double, std::milli>(Clock::now() - arrival(i)).count();
    }));
  }
  for (auto& f : inflight) f.get();
  StreamResult r;
  r.p50_ms = percentile(latency, 50);
  r.p99_ms = percentile(latency, 99);
  r.slo_met = static_cast<double>(std::count_if(latency.begin(), latency.end(), [&](double l) { return l <= slo_ms; })) / tasks;
  r.tasks_per_s = tasks / std::chrono::duration<double>(Clock::now() - start).count();
  return r;
}

}  // namespace

int run_bench_mtgraph(const BenchOptions& o) {
  if (o.schedule != "aspen") throw Error("--mt-graph builds its stages on the barrier-free schedule (--schedule aspen)");
  ShapeMap shapes = parse_shape_options(o.shapes);
  Engine engine({.threads = o.threads});
  Compound c;
  c.scratch = std::make_shared<WorkerScratch>(static_cast<size_t>(worker_slots(engine)));
  std::vector<int32_t> ops;
  for (const auto& path : o.models) {
    c.models.push_back(load_for_coexec(engine, o, path, shapes));
    ShapeMap bound;
    for (const auto& [name, t] : c.models.back().inputs) bound[name] = t.shape();
    c.plans.push_back(plan_for(*c.models.back().session, bound));
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

  // The layouts compared, each running one compound task (every model once), blocking.
  auto gated = make_staged_dag(c.plans, found.best.rho, StageOrder::gates);
  auto ranked = make_staged_dag(c.plans, found.best.rho, StageOrder::priority);
  std::mutex fifo;  // one after the other: tasks also wait for each other's turn
  std::vector<Layout> layouts = {
      {"mt-graph, stage gates", [&] { run_staged(engine, c, gated); }},
      {"mt-graph, stage priority", [&] { run_staged(engine, c, ranked); }},
      {"together, no stages", [&] { run_together(c.models); }},
      {"one after the other", [&] {
         std::lock_guard<std::mutex> lock(fifo);
         run_in_turn(c.models);
       }},
      {"split cores", [&] { run_together(split); }},
  };
  for (int i = 0; i < o.runs; ++i)
    for (size_t k = 0; k < layouts.size(); ++k) {  // rotated, so no layout always follows another
      Layout& l = layouts[(static_cast<size_t>(i) + k) % layouts.size()];
      auto t = Clock::now();
      l.run();
      l.alone_ms.push_back(ms_since(t));
    }
  // A request stream: compound tasks arriving every `interval` (80% of what plain
  // co-execution sustains), each judged against an SLO of twice its latency alone.
  const double together_ms = percentile(layouts[2].alone_ms, 50);
  const double interval_ms = together_ms / 0.8, slo_ms = 2 * together_ms;
  const int tasks = std::max(20, 4 * o.runs);
  for (Layout& l : layouts) l.stream = stream(l.run, tasks, interval_ms, slo_ms);

  const std::string rho = serve::pointer_matrix_str(found.best.rho);
  if (o.json) {
    std::printf("{\"models\": [");
    for (int i = 0; i < n; ++i) std::printf("%s\"%s\"", i ? ", " : "", o.models[static_cast<size_t>(i)].c_str());
    std::printf("], \"threads\": %d, \"rho\": \"%s\", \"search_s\": %.2f, \"profiled\": %zu, \"rounds\": %d, "
                "\"stream_interval_ms\": %.3f, \"slo_ms\": %.3f, \"layouts\": [",
                engine.threads(), rho.c_str(), search_s, found.records.size(), o.runs, interval_ms, slo_ms);
    for (size_t k = 0; k < layouts.size(); ++k) {
      const Layout& l = layouts[k];
      std::printf("%s{\"name\": \"%s\", \"p50_ms\": %.4f, \"stream_p50_ms\": %.4f, \"stream_p99_ms\": %.4f, "
                  "\"slo_met\": %.4f, \"tasks_per_s\": %.3f}",
                  k ? ", " : "", l.name, percentile(l.alone_ms, 50), l.stream.p50_ms, l.stream.p99_ms, l.stream.slo_met,
                  l.stream.tasks_per_s);
    }
    std::printf("]}\n");
    return 0;
  }
  std::printf("MT-Graph over %d models, %d threads: %zu schedules profiled in %.1f s (%d pointers, %d rounds, %d candidates, %d runs each)\n",
              n, engine.threads(), found.records.size(), search_s, o.mt_pointers, o.mt_rounds, o.mt_candidates, o.mt_profile_runs);
  for (int i = 0; i < n; ++i) std::printf("  %s (%d ops)\n", o.models[static_cast<size_t>(i)].c_str(), ops[static_cast<size_t>(i)]);
  std::printf("best pointer matrix %s (one stage, plain co-execution, is %s)%s\n", rho.c_str(),
              serve::pointer_matrix_str(found.start.rho).c_str(),
              found.best.rho == found.start.rho ? ": no staged schedule beat plain co-execution when profiled again" : "");
  std::printf("compound task: latency alone (%d interleaved rounds, median), then a stream of %d tasks every %.2f ms "
              "with an SLO of %.2f ms\n", o.runs, tasks, interval_ms, slo_ms);
  std::printf("  %-26s %10s %12s %12s %8s %10s\n", "", "alone p50", "stream p50", "stream p99", "SLO met", "tasks/s");
  for (const Layout& l : layouts)
    std::printf("  %-26s %7.3f ms %9.3f ms %9.3f ms %7.1f%% %10.1f\n", l.name, percentile(l.alone_ms, 50), l.stream.p50_ms,
                l.stream.p99_ms, 100 * l.stream.slo_met, l.stream.tasks_per_s);
  return 0;
}

}  // namespace grove::cli
