// grove simulate: predicts the model's latency on N cores (docs/scaling.md). Each plan (cut
// for N cores) runs on one thread with a trace, so every tile is timed alone; a discrete-event
// simulation of the engine's schedule over those times, with this machine's measured memory
// bandwidth and pool costs, gives the makespan on N virtual cores. --validate measures the
// cores this machine has, side by side, to show the prediction's error.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <map>
#include <random>

#include "cli/bench_stats.h"
#include "cli/commands.h"
#include "cli/options.h"
#include "cli/format.h"
#include "cli/inputs.h"
#include "onnx/import.h"
#include "runtime/session.h"
#include "sim/probe.h"
#include "sim/tile_costs.h"

namespace grove::cli {
namespace {

using Clock = std::chrono::steady_clock;

struct Row {
  std::string schedule;
  int cores = 1;
  int tiles = 0;
  SimResult sim;
  double measured_ms = -1;  // --validate only
};

// Row labels: "aspen", "barrier", and with the fixed rule's tile counts "aspen/fixed", "barrier/fixed".
Schedule schedule_of(const std::string& label) { return label.rfind("barrier", 0) == 0 ? Schedule::barrier : Schedule::aspen; }
TileCounts counts_of(const std::string& label) {
  return label.size() > 6 && label.substr(label.size() - 6) == "/fixed" ? TileCounts::fixed : TileCounts::tail_aware;
}

// Slow cores among n for --slow-fraction (at least one when the fraction is above 0).
int slow_cores(const SimulateOptions& o, int n) {
  return o.slow_fraction > 0 ? std::clamp(static_cast<int>(std::lround(o.slow_fraction * n)), 1, n) : 0;
}

}  // namespace

int run_simulate(const SimulateOptions& o) {
  ShapeMap shapes = parse_shape_options(o.shapes);
  Graph imported = load_onnx(o.model, o.limits);
  TensorMap inputs = load_input_files(imported, o.inputs, shapes);
  ShapeMap resolved = resolve_input_shapes(imported, shapes);
  std::mt19937_64 rng(o.seed);
  for (const auto& decl : imported.inputs)
    if (!inputs.count(decl.name)) inputs[decl.name] = random_tensor(decl.dtype, resolved.at(decl.name), rng);
  std::vector<std::string> schedules;
  for (const std::string counts : {"fixed", "tail"})
    for (const std::string s : {"aspen", "barrier"})
      if ((o.schedule == "both" || o.schedule == s) && (o.tile_counts == "both" || o.tile_counts == counts))
        schedules.push_back(counts == "fixed" ? s + "/fixed" : s);
  std::vector<int> cores = o.cores;
  std::sort(cores.begin(), cores.end());
  cores.erase(std::unique(cores.begin(), cores.end()), cores.end());
  const int here = available_cores();
  // --validate measures the simulated core counts this machine has; when none is asked for,
  // every count from 1 to its cores. On a many-core machine measuring every count in between
  // would cost minutes for rows nobody asked for.
  std::vector<int> measured;
  for (int n : cores)
    if (n <= here) measured.push_back(n);
  if (o.validate_runs > 0 && measured.empty())
    for (int n = 1; n <= here; ++n) {
      measured.push_back(n);
      if (std::find(cores.begin(), cores.end(), n) == cores.end()) cores.insert(std::upper_bound(cores.begin(), cores.end(), n), n);
    }

  FILE* say = o.json ? stderr : stdout;
  std::fprintf(stderr, "probing this machine (memory bandwidth, pool costs)...\n");
  MachineProbe probe = probe_machine(here);
  const double bandwidth = o.bandwidth_gbs < 0 ? probe.bandwidth_all : o.bandwidth_gbs;  // GB/s == bytes/ns
  std::fprintf(say,
               "machine: %d cores; copy bandwidth %.1f GB/s one core, %.1f GB/s all; pool push %.0f ns, pop %.0f ns, "
               "contention +%.0f%% per core; wake-up %.1f us; spin %.1f us; another core's data +%.3f ns/KB\n",
               here, probe.bandwidth_one, probe.bandwidth_all, probe.push_ns, probe.pop_ns, probe.contention * 100,
               probe.wake_ns / 1e3, probe.spin_ns / 1e3, probe.cross_ns_per_byte * 1024);
  if (o.cross_ns_per_kb >= 0) probe.cross_ns_per_byte = o.cross_ns_per_kb / 1024;
  if (o.slow_fraction > 0)
    std::fprintf(say, "slow cores: %.0f%% of the cores (at least one) take %.2fx as long over each tile\n",
                 o.slow_fraction * 100, o.slow_factor);
  std::fprintf(say, "simulated bandwidth: %s\n", bandwidth > 0 ? strf("%.1f GB/s shared by all cores", bandwidth).c_str() : "unlimited");

  std::vector<Row> rows;
  Engine alone({.threads = 1});
  for (const std::string& s : schedules)
    for (int n : cores) {
      auto t0 = Clock::now();
      Session session(alone, model_from_graph(imported, resolved, o.limits),
                      SessionOptions{.schedule = schedule_of(s), .plan_threads = n, .tile_counts = counts_of(s)});
      // Warm: buffers, packed weights, caches; the first plan also warms the process (its first
      // runs are slower for a while).
      for (int w = 0; w < 3 || (rows.empty() && Clock::now() - t0 < std::chrono::seconds(1)); ++w) session.run(inputs);
      std::vector<double> tile_ns = time_tiles_alone(alone, session, inputs, o.runs);
      auto plan = plan_for(session, resolved);
      if (!plan) throw Error("simulate: " + o.model + " has no single tile graph (control flow or value-dependent shapes)");
      if (tile_ns.size() < static_cast<size_t>(plan->tiles.size())) tile_ns.resize(static_cast<size_t>(plan->tiles.size()), 0.0);
      Row row{s, n, plan->tiles.size(), {}, -1};
      SimMachine machine = sim_machine(probe, n, bandwidth);
      if (o.slow_fraction > 0) {
        machine.slow_cores = slow_cores(o, n);
        machine.slow_factor = o.slow_factor;
      }
      row.sim = simulate(plan->tiles, tile_ns, tile_traffic_bytes(*plan), machine, tile_input_bytes(*plan));
      rows.push_back(row);
      std::fprintf(stderr, "  %-7s %3d cores: %6d tiles timed in %.1f s\n", s.c_str(), n, row.tiles,
                   std::chrono::duration<double>(Clock::now() - t0).count());
    }

  if (o.validate_runs > 0) {
    std::fprintf(stderr, "measuring %zu core counts up to %d, %d runs per schedule, interleaved...\n", measured.size(),
                 measured.back(), o.validate_runs);
    for (int n : measured) {
      if (o.slow_fraction > 0 && n == 1) continue;  // one thread is run_job's caller, which is never slowed
      // Worker 0 is slowed only when the simulation slows one core of this many.
      const bool slow_here = slow_cores(o, n) == 1;
      Engine engine = make_engine({.threads = n}, {.slow_worker = slow_here && n > 1 ? o.slow_factor : 1.0});
      std::vector<std::unique_ptr<Session>> sessions;
      std::vector<std::vector<double>> ms(schedules.size());
      for (const std::string& s : schedules) {
        sessions.push_back(std::make_unique<Session>(engine, model_from_graph(imported, resolved, o.limits),
                                                     SessionOptions{.schedule = schedule_of(s), .tile_counts = counts_of(s)}));
        for (int w = 0; w < 2; ++w) sessions.back()->run(inputs);
      }
      for (int r = 0; r < o.validate_runs; ++r)
        for (size_t k = 0; k < sessions.size(); ++k) {
          auto t = Clock::now();
          sessions[k]->run(inputs);
          ms[k].push_back(std::chrono::duration<double, std::milli>(Clock::now() - t).count());
        }
      for (size_t k = 0; k < schedules.size(); ++k)
        for (Row& row : rows)
          if (row.schedule == schedules[k] && row.cores == n) row.measured_ms = percentile(ms[k], 50);
    }
  }

  std::map<std::string, double> one_core;
  for (const Row& r : rows)
    if (!one_core.count(r.schedule)) one_core[r.schedule] = r.sim.makespan_ns;
  auto find = [&](const std::string& s, int n) -> const Row* {
    for (const Row& r : rows)
      if (r.schedule == s && r.cores == n) return &r;
    return nullptr;
  };
  if (o.json) {
    std::printf("{\"model\": \"%s\", \"machine\": {\"cores\": %d, \"bandwidth_one_gbs\": %.3f, \"bandwidth_all_gbs\": %.3f, "
                "\"push_ns\": %.2f, \"pop_ns\": %.2f, \"contention\": %.4f, \"wake_ns\": %.1f, \"spin_ns\": %.1f, "
                "\"cross_ns_per_kb\": %.3f}, \"bandwidth_gbs\": %.3f, \"rows\": [",
                o.model.c_str(), here, probe.bandwidth_one, probe.bandwidth_all, probe.push_ns, probe.pop_ns,
                probe.contention, probe.wake_ns, probe.spin_ns, probe.cross_ns_per_byte * 1024, bandwidth);
    for (size_t i = 0; i < rows.size(); ++i) {
      const Row& r = rows[i];
      std::printf("%s{\"schedule\": \"%s\", \"cores\": %d, \"tiles\": %d, \"predicted_ms\": %.4f, \"speedup\": %.4f, "
                  "\"utilisation\": %.4f, \"bandwidth_stretch\": %.4f, \"cross_core_ms\": %.4f, \"pool_ms\": %.4f, "
                  "\"steals\": %lld",
                  i ? ", " : "", r.schedule.c_str(), r.cores, r.tiles, r.sim.makespan_ns / 1e6,
                  one_core[r.schedule] / r.sim.makespan_ns, r.sim.utilisation(),
                  r.sim.tile_ns > 0 ? r.sim.stretch_ns / r.sim.tile_ns : 0.0, r.sim.cross_ns / 1e6, r.sim.pool_ns / 1e6,
                  static_cast<long long>(r.sim.steals));
      if (r.measured_ms >= 0) std::printf(", \"measured_ms\": %.4f", r.measured_ms);
      std::printf("}");
    }
    std::printf("]}\n");
    return 0;
  }
  std::printf("model: %s\n", o.model.c_str());
  std::printf("%-12s %6s %7s %12s %8s %6s %8s %8s %12s %7s\n", "schedule", "cores", "tiles", "predicted ms", "speedup",
              "busy", "stretch", "steals", "measured ms", "error");
  for (const Row& r : rows) {
    std::printf("%-12s %6d %7d %12.3f %7.2fx %5.0f%% %7.1f%% %8lld", r.schedule.c_str(), r.cores, r.tiles,
                r.sim.makespan_ns / 1e6, one_core[r.schedule] / r.sim.makespan_ns, r.sim.utilisation() * 100,
                r.sim.tile_ns > 0 ? 100 * r.sim.stretch_ns / r.sim.tile_ns : 0.0, static_cast<long long>(r.sim.steals));
    if (r.measured_ms >= 0)
      std::printf(" %12.3f %+6.1f%%", r.measured_ms, 100 * (r.sim.makespan_ns / 1e6 - r.measured_ms) / r.measured_ms);
    std::printf("\n");
  }
  auto ratio_line = [&](const char* title, const std::string& slow, const std::string& fast) {
    if (std::find(schedules.begin(), schedules.end(), slow) == schedules.end() ||
        std::find(schedules.begin(), schedules.end(), fast) == schedules.end())
      return;
    std::printf("%s:", title);
    for (int n : cores)
      if (const Row *a = find(fast, n), *b = find(slow, n); a && b) std::printf("  %d: %.3fx", n, b->sim.makespan_ns / a->sim.makespan_ns);
    std::printf("\n");
  };
  ratio_line("predicted barrier-free gain (barrier / aspen)", "barrier", "aspen");
  ratio_line("predicted tail-aware gain (fixed / tail, aspen)", "aspen/fixed", "aspen");
  ratio_line("predicted tail-aware gain (fixed / tail, barrier)", "barrier/fixed", "barrier");
  return 0;
}

CLI::App* add_simulate_command(CLI::App& app, SimulateOptions& o) {
  CLI::App* cmd = app.add_subcommand("simulate", "Predict the model's latency on N cores (a simulation over timed tiles)");
  cmd->footer(R"(
For each core count N the model is planned as for N cores, and that plan runs on one thread
with a trace, so each tile is timed alone (--runs times; the median per tile). A discrete-
event simulation then runs the engine's own schedule over those times on N virtual cores:
depth-first following, the ready pool's rows and priority columns, stealing, and for
--schedule barrier the barrier tiles between ops. Memory bandwidth shared by all cores and the
pool's push/pop costs (measured on this machine first) are part of the model; docs/scaling.md
states the assumptions and the measured error.
--validate R also runs the model for real at each simulated core count this machine has (at
1..its cores when --cores names none of them), R runs per schedule interleaved, and prints the
prediction's error next to each measurement.

Examples:
  grove simulate resnet50.onnx
  grove simulate resnet50.onnx --cores 1,2 --validate 20
  grove simulate bert.onnx --shape input_ids=1x128 --cores 1,4,16,64 --bandwidth 0 --json)");
  cmd->add_option("model", o.model, "The .onnx file")->required();
  cmd->add_option("--input,-i", o.inputs, "NAME=FILE.npy (other inputs: seeded random data)")
      ->type_name("NAME=FILE");
  add_shape_option(cmd, o.shapes);
  cmd->add_option("--cores,-c", o.cores, "Core counts to simulate, comma-separated")
      ->delimiter(',')->capture_default_str()->check(CLI::Range(1, 1024));
  cmd->add_option("--schedule", o.schedule, "aspen, barrier, or both")
      ->capture_default_str()->check(CLI::IsMember({"aspen", "barrier", "both"}));
  cmd->add_option("--tile-counts", o.tile_counts,
                       "Tiles per op when not forced: fixed (one per thread), tail (TA-DNN's staircase), or both")
      ->capture_default_str()->check(CLI::IsMember({"fixed", "tail", "both"}));
  cmd->add_option("--runs,-r", o.runs, "Traced one-thread runs per plan (median per tile)")
      ->capture_default_str()->check(CLI::Range(1, 1000));
  cmd->add_option("--validate", o.validate_runs,
                       "Also measure the simulated core counts this machine has, this many runs per schedule, and print the error")
      ->check(CLI::Range(1, 100000));
  cmd->add_option("--bandwidth", o.bandwidth_gbs,
                       "GB/s all simulated cores share (default: measured here with every core; 0: unlimited)")
      ->check(CLI::Range(0.0, 1e6));
  cmd->add_option("--cross-core", o.cross_ns_per_kb,
                       "ns per KB a tile pays to read output another core wrote (default: measured here; 0: free)")
      ->check(CLI::Range(0.0, 1e6));
  cmd->add_option("--slow-fraction", o.slow_fraction,
                       "Uneven cores: this fraction of the simulated cores (at least one) is slow (0: none)")
      ->check(CLI::Range(0.0, 1.0));
  cmd->add_option("--slow-factor", o.slow_factor, "How many times as long a slow core takes per tile")
      ->capture_default_str()->check(CLI::Range(1.0, 100.0));
  cmd->add_flag("--json", o.json, "Print one JSON object instead of the table");
  add_seed_option(cmd, o.seed);
  add_limit_options(cmd, o.limits);
  return cmd;
}

}  // namespace grove::cli
