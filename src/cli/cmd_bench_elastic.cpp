// grove bench MODEL --workers-schedule 1:2s,2:2s,1:2s: elastic workers. One engine started
// with the most workers of the schedule; each phase sets the worker count (Engine::
// set_workers) while runs are in flight and keeps as many runs in flight as that most, so the
// throughput of each phase follows its worker count.
#include <algorithm>
#include <cstdio>
#include <future>
#include <string>

#include "cli/bench_stats.h"
#include "cli/coexec_models.h"
#include "cli/commands.h"
#include "graph/error.h"

namespace grove::cli {

std::vector<WorkerPhase> parse_phases(const std::string& text, const std::string& option, int min_count) {
  std::vector<WorkerPhase> phases;
  size_t at = 0;
  while (at <= text.size()) {
    size_t end = text.find(',', at);
    std::string item = text.substr(at, end == std::string::npos ? std::string::npos : end - at);
    size_t colon = item.find(':');
    WorkerPhase p;
    try {
      if (colon == std::string::npos) throw std::invalid_argument(item);
      size_t used = 0;
      p.workers = std::stoi(item.substr(0, colon), &used);
      if (used != colon) throw std::invalid_argument(item);
      std::string secs = item.substr(colon + 1);
      if (!secs.empty() && secs.back() == 's') secs.pop_back();
      p.seconds = std::stod(secs, &used);
      if (used != secs.size()) throw std::invalid_argument(item);
    } catch (const std::exception&) {
      throw Error(option + ": '" + item + "' is not COUNT:SECONDS (e.g. 2:1.5s)");
    }
    if (p.workers < min_count || p.workers > 4096 || !(p.seconds > 0) || p.seconds > 3600)
      throw Error(option + ": '" + item + "' needs a count in " + std::to_string(min_count) +
                  "..4096 and 0..3600 seconds");
    phases.push_back(p);
    if (end == std::string::npos) break;
    at = end + 1;
  }
  return phases;
}

std::vector<WorkerPhase> parse_workers_schedule(const std::string& text) {
  return parse_phases(text, "--workers-schedule", 1);
}

int run_bench_elastic(const BenchOptions& o) {
  if (o.models.size() != 1) throw Error("--workers-schedule times one model");
  std::vector<WorkerPhase> phases = parse_workers_schedule(o.workers_schedule);
  int most = 0;
  for (const auto& p : phases) most = std::max(most, p.workers);
  ShapeMap shapes = parse_shape_options(o.shapes);
  Engine engine({.threads = phases.front().workers, .max_threads = most});
  Loaded model = load_for_coexec(engine, o, o.models[0], shapes);
  for (int i = 0; i < o.warmup; ++i) model.session->run(model.inputs);

  struct Result {
    int workers;
    double seconds;
    int runs = 0;
    std::vector<double> ms;
  };
  std::vector<Result> results;
  // `most` runs in flight; a finished one is replaced at once, in submission order.
  std::vector<std::pair<Clock::time_point, std::future<TensorMap>>> flight;
  for (int k = 0; k < most; ++k) flight.emplace_back(Clock::now(), model.session->submit(model.inputs));
  size_t next = 0;
  for (const auto& p : phases) {
    engine.set_workers(p.workers);
    Result r{p.workers, p.seconds};
    auto start = Clock::now();
    while (ms_since(start) < p.seconds * 1e3) {
      auto& [t, f] = flight[next];
      f.get();
      r.ms.push_back(ms_since(t));
      ++r.runs;
      flight[next] = {Clock::now(), model.session->submit(model.inputs)};
      next = (next + 1) % flight.size();
    }
    results.push_back(std::move(r));
    if (!o.json) std::fprintf(stderr, "  %d workers: %d runs in %.1f s\n", p.workers, results.back().runs, p.seconds);
  }
  for (auto& [t, f] : flight) f.get();

  if (o.json) {
    std::printf("{\"model\": \"%s\", \"max_threads\": %d, \"in_flight\": %d, \"phases\": [", o.models[0].c_str(), most, most);
    for (size_t i = 0; i < results.size(); ++i) {
      const auto& r = results[i];
      std::printf("%s{\"workers\": %d, \"seconds\": %.3f, \"runs\": %d, \"runs_per_s\": %.4f, \"p50_ms\": %.4f}",
                  i ? ", " : "", r.workers, r.seconds, r.runs, r.runs / r.seconds,
                  r.ms.empty() ? 0.0 : percentile(r.ms, 50));
    }
    std::printf("]}\n");
    return 0;
  }
  std::printf("model: %s   elastic engine: up to %d workers, %d runs in flight\n", o.models[0].c_str(), most, most);
  std::printf("%8s %8s %8s %10s %10s\n", "workers", "seconds", "runs", "runs/s", "p50 ms");
  for (const auto& r : results)
    std::printf("%8d %8.1f %8d %10.2f %10.3f\n", r.workers, r.seconds, r.runs, r.runs / r.seconds,
                r.ms.empty() ? 0.0 : percentile(r.ms, 50));
  return 0;
}

}  // namespace grove::cli
