// grove bench MODEL --subnet all|NAME|RATIOS: each sub-net's latency, interleaved (A B C A B C).
// grove bench MODEL --latency-target-ms T [--co-run OTHER --co-run-schedule 0:3s,1:3s,0:3s]:
// one stream of back-to-back runs, each on the sub-net the controller picks, while OTHER runs
// in the number of streams each phase gives on the same engine; then the same schedule with
// the full model every time. Per 1-second window: P99 against the target, and the sub-nets run.
#include <algorithm>
#include <atomic>
#include <cstdio>
#include <map>
#include <thread>

#include "cli/bench_stats.h"
#include "cli/coexec_models.h"
#include "cli/commands.h"
#include "cli/format.h"
#include "cli/subnets.h"
#include "graph/error.h"
#include "onnx/import.h"

namespace grove::cli {
namespace {

// Every sub-net runs with the plan options the command line gives; the ones that compare two
// plans side by side ('both') time plain models only.
SessionOptions session_options(const BenchOptions& o) {
  const std::pair<const char*, std::string> compared[] = {
      {"--tile-counts", o.tile_counts}, {"--layout", o.layout}, {"--pieces", o.pieces}, {"--tuning", o.tuning}};
  for (const auto& [flag, value] : compared)
    if (value == "both" || value == "compare")
      throw Error(std::string(flag) + " " + value + " compares two plans of a plain model; with --subnet or " +
                  "--latency-target-ms give one value");
  return {.schedule = o.schedule == "barrier" ? Schedule::barrier : Schedule::aspen,
          .tiles_per_op = o.tiles_per_op,
          .tile_counts = o.tile_counts == "fixed" ? TileCounts::fixed : TileCounts::tail_aware,
          .precision = parse_precision(o.precision),
          .conv_layout = o.layout == "nchw" ? ConvLayout::nchw : ConvLayout::channels_last,
          .urgent = o.urgent,
          .tuning = o.tuning,
          .tile_pieces = o.pieces == "on"};
}

int bench_subnets(const BenchOptions& o, Engine& engine, SubnetPick& pick, const TensorMap& inputs, double load_ms) {
  DynamicSession& d = *pick.session;
  struct Row {
    int index;
    double first_ms = 0;
    std::vector<double> ms;
  };
  std::vector<Row> rows;
  for (int i : pick.indices) {
    Row r{i};
    auto t = Clock::now();
    d.run(inputs, i);
    r.first_ms = ms_since(t);
    rows.push_back(std::move(r));
  }
  for (int w = 0; w < o.warmup; ++w)
    for (auto& r : rows) d.run(inputs, r.index);
  const auto start = Clock::now();
  for (int k = 0; k < o.runs || ms_since(start) < o.seconds * 1e3; ++k)
    for (auto& r : rows) {
      auto t = Clock::now();
      d.run(inputs, r.index);
      r.ms.push_back(ms_since(t));
    }
  if (!o.trace_path.empty()) {  // more warm runs of each sub-net, not among the timed ones
    engine.start_trace();
    for (int i = 0; i < o.trace_runs; ++i)
      for (auto& r : rows) d.run(inputs, r.index);
    write_trace(engine, o.trace_path, o.json ? stderr : stdout);  // --json keeps stdout one JSON object
  }
  const double widest = percentile(rows.back().ms, 50);
  if (o.json) {
    std::printf("{\"model\": \"%s\", \"threads\": %d, \"load_ms\": %.3f, \"subnets\": [", o.models[0].c_str(),
                engine.threads(), load_ms);
    for (size_t i = 0; i < rows.size(); ++i) {
      const SubnetInfo& s = d.subnets()[static_cast<size_t>(rows[i].index)];
      std::printf("%s{\"name\": \"%s\", \"width\": %.4f, \"accuracy\": %.4f, \"flops\": %lld, \"parameters\": %lld, "
                  "\"first_ms\": %.4f, \"p50_ms\": %.4f, \"p90_ms\": %.4f, \"p99_ms\": %.4f, \"runs\": %zu}",
                  i ? ", " : "", s.name.c_str(), s.ratio, s.accuracy, static_cast<long long>(s.flops),
                  static_cast<long long>(s.parameters), rows[i].first_ms, percentile(rows[i].ms, 50),
                  percentile(rows[i].ms, 90), percentile(rows[i].ms, 99), rows[i].ms.size());
    }
    std::printf("]}\n");
    return 0;
  }
  std::printf("model: %s   %d threads   all sub-nets loaded, bound and planned in %.1f ms\n", o.models[0].c_str(),
              engine.threads(), load_ms);
  std::printf("%-12s %6s %9s %9s %10s %10s %10s %8s\n", "sub-net", "width", "accuracy", "MFLOP", "first ms", "p50 ms",
              "p90 ms", "speedup");
  for (const auto& r : rows) {
    const SubnetInfo& s = d.subnets()[static_cast<size_t>(r.index)];
    std::printf("%-12s %6.2f %9s %9.2f %10.3f %10.3f %10.3f %7.2fx\n", s.name.c_str(), s.ratio,
                s.accuracy >= 0 ? strf("%.2f%%", 100 * s.accuracy).c_str() : "-", static_cast<double>(s.flops) / 1e6,
                r.first_ms, percentile(r.ms, 50), percentile(r.ms, 90), widest / percentile(r.ms, 50));
  }
  std::printf("runs interleaved, %zu per sub-net after %d warm-up rounds; speedup against the last row\n",
              rows.back().ms.size(), o.warmup);
  return 0;
}

struct RunRecord {
  double start_s;
  int subnet;
  double ms;
  int64_t others;  // other jobs in flight at the start (what the controller saw)
  double predicted_ms;
};

// One pass over the load schedule: `controlled` picks sub-nets under the target, otherwise
// the most accurate sub-net runs every time.
std::vector<RunRecord> drive(DynamicSession& d, const TensorMap& inputs, double target_ms, bool controlled,
                             Loaded* co, const std::vector<WorkerPhase>& phases) {
  int most = 0;
  for (const auto& p : phases) most = std::max(most, p.workers);
  std::atomic<int> streams{phases.front().workers};
  std::atomic<bool> stop{false};
  std::vector<std::thread> load;
  for (int j = 0; co && j < most; ++j)
    load.emplace_back([&, j] {
      while (!stop.load()) {
        if (j < streams.load()) {
          co->session->submit(co->inputs).get();
        } else {
          std::this_thread::sleep_for(std::chrono::milliseconds(1));
        }
      }
    });
  std::vector<RunRecord> runs;
  const int full = static_cast<int>(d.subnets().size()) - 1;
  const auto start = Clock::now();
  double phase_end = 0;
  for (const auto& p : phases) {
    streams = p.workers;
    phase_end += p.seconds;
    while (ms_since(start) < phase_end * 1e3) {
      const double t = ms_since(start) / 1e3;
      SubnetChoice c;
      auto r0 = Clock::now();
      if (controlled) {
        d.run_within(inputs, target_ms, &c);
      } else {
        c = d.choose(target_ms);  // only for the load it saw
        c.subnet = full;
        d.run(inputs, full);
      }
      runs.push_back(RunRecord{t, c.subnet, ms_since(r0), c.others_in_flight, c.predicted_ms});
    }
  }
  stop = true;
  for (auto& th : load) th.join();
  return runs;
}

struct Window {
  int second;
  int streams;
  int loaded = 0;  // runs that started with other jobs in flight
  std::vector<double> ms;
  std::vector<double> predicted;
  std::map<int, int> subnets;  // index -> runs
};

std::vector<Window> windows_of(const std::vector<RunRecord>& runs, const std::vector<WorkerPhase>& phases) {
  std::vector<Window> w;
  for (const auto& r : runs) {
    const int s = static_cast<int>(r.start_s);
    while (static_cast<int>(w.size()) <= s) {
      double t = static_cast<double>(w.size()) + 0.5, acc = 0;
      int streams = phases.back().workers;
      for (const auto& p : phases) {
        if (t < acc + p.seconds) {
          streams = p.workers;
          break;
        }
        acc += p.seconds;
      }
      w.push_back(Window{static_cast<int>(w.size()), streams, 0, {}, {}, {}});
    }
    w[static_cast<size_t>(s)].ms.push_back(r.ms);
    w[static_cast<size_t>(s)].loaded += r.others > 0;
    w[static_cast<size_t>(s)].predicted.push_back(r.predicted_ms);
    ++w[static_cast<size_t>(s)].subnets[r.subnet];
  }
  return w;
}

int bench_target(const BenchOptions& o, Engine& engine, SubnetPick& pick, const TensorMap& inputs) {
  DynamicSession& d = *pick.session;
  const auto phases = parse_phases(o.co_run_schedule, "--co-run-schedule", 0);
  std::unique_ptr<Loaded> co;
  if (!o.co_run.empty()) co = std::make_unique<Loaded>(load_for_coexec(engine, o, o.co_run, parse_shape_options(o.shapes)));
  // Warm-up: every sub-net alone, which also gives the controller each one's base latency.
  for (int w = 0; w < std::max(o.warmup, 1); ++w)
    for (int i = 0; i < static_cast<int>(d.subnets().size()); ++i) d.run(inputs, i);
  if (!o.json) std::fprintf(stderr, "controller pass over the load schedule...\n");
  const auto controlled = windows_of(drive(d, inputs, o.latency_target_ms, true, co.get(), phases), phases);
  if (!o.json) std::fprintf(stderr, "fixed full-model pass...\n");
  const auto fixed = windows_of(drive(d, inputs, o.latency_target_ms, false, co.get(), phases), phases);

  auto met = [&](const std::vector<Window>& ws) {
    int n = 0;
    for (const auto& w : ws) n += !w.ms.empty() && percentile(w.ms, 99) <= o.latency_target_ms;
    return n;
  };
  const int full = static_cast<int>(d.subnets().size()) - 1;
  int idle_windows = 0, idle_full = 0;
  for (const auto& w : controlled)
    if (w.streams == 0 && !w.ms.empty()) {
      ++idle_windows;
      idle_full += w.subnets.size() == 1 && w.subnets.begin()->first == full;
    }
  if (o.json) {
    std::printf("{\"model\": \"%s\", \"co_run\": \"%s\", \"threads\": %d, \"target_ms\": %.4f, \"subnets\": [",
                o.models[0].c_str(), o.co_run.c_str(), engine.threads(), o.latency_target_ms);
    for (size_t i = 0; i < d.subnets().size(); ++i)
      std::printf("%s{\"name\": \"%s\", \"width\": %.4f, \"accuracy\": %.4f}", i ? ", " : "",
                  d.subnets()[i].name.c_str(), d.subnets()[i].ratio, d.subnets()[i].accuracy);
    std::printf("]");
    for (const auto* mode : {"controller", "fixed"}) {
      const auto& ws = std::string(mode) == "controller" ? controlled : fixed;
      std::printf(", \"%s\": [", mode);
      for (size_t i = 0; i < ws.size(); ++i) {
        const auto& w = ws[i];
        std::printf("%s{\"second\": %d, \"streams\": %d, \"runs\": %zu, \"loaded_runs\": %d, \"predicted_p50_ms\": %.4f, "
                    "\"p50_ms\": %.4f, \"p99_ms\": %.4f, \"subnets\": {",
                    i ? ", " : "", w.second, w.streams, w.ms.size(), w.loaded,
                    w.predicted.empty() ? 0.0 : percentile(w.predicted, 50), w.ms.empty() ? 0.0 : percentile(w.ms, 50),
                    w.ms.empty() ? 0.0 : percentile(w.ms, 99));
        size_t k = 0;
        for (const auto& [s, n] : w.subnets)
          std::printf("%s\"%s\": %d", k++ ? ", " : "", d.subnets()[static_cast<size_t>(s)].name.c_str(), n);
        std::printf("}}");
      }
      std::printf("]");
    }
    std::printf(", \"met_controller\": %d, \"met_fixed\": %d, \"windows\": %zu, \"idle_windows\": %d, "
                "\"idle_windows_full\": %d}\n", met(controlled), met(fixed), controlled.size(), idle_windows, idle_full);
    return 0;
  }
  std::printf("model: %s   target: P99 <= %.3f ms per 1 s window   load: %s   %d threads\n", o.models[0].c_str(),
              o.latency_target_ms, o.co_run.empty() ? "none" : o.co_run.c_str(), engine.threads());
  std::printf("%6s %7s %7s | %-30s %9s %9s | %9s\n", "second", "streams", "loaded", "controller: sub-nets run",
              "predicted", "p99 ms", "fixed p99");
  for (size_t i = 0; i < controlled.size(); ++i) {
    const auto& w = controlled[i];
    std::string mix;
    for (const auto& [s, n] : w.subnets) mix += d.subnets()[static_cast<size_t>(s)].name + "x" + std::to_string(n) + " ";
    const double fixed_p99 = i < fixed.size() && !fixed[i].ms.empty() ? percentile(fixed[i].ms, 99) : 0;
    std::printf("%6d %7d %6.0f%% | %-30s %9.3f %9.3f | %9.3f\n", w.second, w.streams,
                w.ms.empty() ? 0.0 : 100.0 * w.loaded / static_cast<double>(w.ms.size()), mix.c_str(),
                w.predicted.empty() ? 0.0 : percentile(w.predicted, 50),
                w.ms.empty() ? 0.0 : percentile(w.ms, 99), fixed_p99);
  }
  std::printf("P99 within target: controller %d of %zu windows, full model %d of %zu; without load the "
              "controller ran only the full model in %d of %d windows\n",
              met(controlled), controlled.size(), met(fixed), fixed.size(), idle_full, idle_windows);
  return 0;
}

}  // namespace

int run_bench_dynamic(const BenchOptions& o) {
  if (o.models.size() != 1) throw Error("--subnet and --latency-target-ms time one model (the load goes in --co-run)");
  if (!o.co_run.empty() && !(o.latency_target_ms > 0)) throw Error("--co-run needs --latency-target-ms");
  const auto t0 = Clock::now();
  Engine engine({.threads = o.threads});
  const Graph imported = load_onnx(o.models[0], o.limits);
  SubnetPick pick = open_subnets(engine, imported, o.models[0], session_options(o), o.subnet.empty() ? "all" : o.subnet);
  const double load_ms = ms_since(t0);
  // Inputs as every bench mode makes them (--input files, else seeded random data).
  Loaded shell = load_for_coexec(engine, o, o.models[0], parse_shape_options(o.shapes));
  if (o.latency_target_ms > 0) return bench_target(o, engine, pick, shell.inputs);
  return bench_subnets(o, engine, pick, shell.inputs, load_ms);
}

}  // namespace grove::cli
