// grove bench: latency percentiles, throughput and memory of one model on the tile runtime,
// optionally both schedules interleaved run by run so their ratio is measured side by side.
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <optional>
#include <cstdio>
#include <random>

#include "cli/bench_stats.h"
#include "cli/commands.h"
#include "cli/options.h"
#include "cli/format.h"
#include "cli/inputs.h"
#include "cli/int8_model.h"
#include "cli/precision_check.h"
#include "runtime/session.h"
#include "onnx/import.h"

namespace grove::cli {
namespace {

using Clock = std::chrono::steady_clock;

struct Series {
  std::string schedule;
  std::string precision;
  std::string counts;  // tile counts: fixed | tail
  std::string pruning;  // with --prune both: "unpruned" | "pruned"
  std::string tuning;   // with --tuning both or compare: "untuned" | "tuned" | "model" | "record"
  std::string layout;   // with --layout both: "nchw" | "nhwc"
  std::string pieces;   // with --pieces both: "whole" | "pieces"
  std::unique_ptr<Session> session;
  double gflop = 0;     // of its plan (pruned convs count their kept channels only)
  std::vector<double> ms;
  int64_t peak_activation_bytes = 0;
  std::string choices_source;  // the plan's tuning record, or why it was ignored
  RunStats last;  // of the last run: whether it went through segments or the reference executor
};

// --precision: fp32, bf16, int8, int8w, both (fp32 and bf16), or a comma list of them.
std::vector<std::string> precision_list(const std::string& text) {
  if (text == "both") return {"fp32", "bf16"};
  std::vector<std::string> list;
  size_t at = 0;
  while (at <= text.size()) {
    const size_t comma = std::min(text.find(',', at), text.size());
    const std::string p = text.substr(at, comma - at);
    if (p != "fp32" && p != "bf16" && p != "int8" && p != "int8w")
      throw Error("--precision " + text + ": expected fp32, bf16, int8, int8w, both, or a comma list such as fp32,int8");
    if (std::find(list.begin(), list.end(), p) == list.end()) list.push_back(p);
    at = comma + 1;
  }
  return list;
}

// Activation buffers the session keeps for later runs (in use + free blocks).
double pool_bytes(const Series& x) {
  BufferPool::Stats s = x.session->buffer_stats();
  return static_cast<double>(s.in_use_bytes + s.free_bytes);
}

}  // namespace

double percentile(std::vector<double> v, double p) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  size_t i = static_cast<size_t>(p / 100.0 * static_cast<double>(v.size() - 1) + 0.5);
  return v[std::min(i, v.size() - 1)];
}

double mean(const std::vector<double>& v) {
  double sum = 0;
  for (double x : v) sum += x;
  return v.empty() ? 0 : sum / static_cast<double>(v.size());
}

double peak_rss_mb() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return static_cast<double>(u.ru_maxrss) / 1024.0;  // ru_maxrss is in KiB on Linux
}

int run_bench(const BenchOptions& o) {
  // Only one model timed alone (or its sub-nets) traces its runs; elsewhere the option would do nothing.
  if (!o.trace_path.empty() && (!o.workers_schedule.empty() || o.latency_target_ms > 0 || !o.co_run.empty() ||
                                o.models.size() > 1))
    throw Error("--trace traces one model timed alone (or its --subnet); it does not apply with "
                "--latency-target-ms, --co-run, --workers-schedule or several models");
  if (!o.workers_schedule.empty()) return run_bench_elastic(o);
  if (!o.subnet.empty() || o.latency_target_ms > 0 || !o.co_run.empty()) return run_bench_dynamic(o);
  if (o.models.size() > 1) return o.mt_graph ? run_bench_mtgraph(o) : run_bench_coexec(o);
  auto t0 = Clock::now();
  ShapeMap shapes = parse_shape_options(o.shapes);
  Graph imported = load_onnx(o.models[0], o.limits);
  TensorMap inputs = load_input_files(imported, o.inputs, shapes);
  ShapeMap resolved = resolve_input_shapes(imported, shapes);
  std::mt19937_64 rng(o.seed);
  std::vector<std::string> drawn;  // inputs not from files: --check draws them again
  for (const auto& decl : imported.inputs)
    if (!inputs.count(decl.name)) {
      inputs[decl.name] = random_tensor(decl.dtype, resolved.at(decl.name), rng);
      drawn.push_back(decl.name);
    }

  Engine engine = make_engine({.threads = o.threads}, {.slow_worker = o.slow_worker});
  std::vector<Series> series;
  const std::vector<std::string> precisions = precision_list(o.precision);
  const bool several_precisions = precisions.size() > 1;
  auto wanted = [&](const std::string& p) { return std::find(precisions.begin(), precisions.end(), p) != precisions.end(); };
  if (!o.calibrate_dir.empty() && !wanted("int8"))
    throw Error("--calibrate " + o.calibrate_dir + " calibrates --precision int8; add int8 to --precision");
  std::optional<Int8Model> int8;  // the model quantized in memory, for --precision int8
  if (wanted("int8")) {
    int8 = quantize_for_bench(o.models[0], imported, o.calibrate_dir, inputs, o.threads);
    if (!o.json) std::printf("int8: %s\n", int8->note.c_str());
  }
  if (o.tile_counts == "both" && (o.schedule == "both" || several_precisions))
    throw Error("--tile-counts both compares one schedule and precision; give --schedule and --precision one value");
  const bool prune_both = o.prune == "both";
  if (prune_both && (o.schedule == "both" || several_precisions || o.tile_counts == "both"))
    throw Error("--prune both compares one schedule, precision and tile count; give each one value");
  if (prune_both && !imported.metadata.count(kFeaturePruningKey))
    throw Error(o.models[0] + ": --prune both compares with the model's grove.antidote metadata, and it has none");
  const bool tuning_both = o.tuning == "both" || o.tuning == "compare";
  if (tuning_both && (o.schedule == "both" || several_precisions || o.tile_counts == "both" || prune_both))
    throw Error("--tuning " + o.tuning + " compares one schedule, precision, tile count and pruning; give each one value");
  const bool layout_both = o.layout == "both";
  if (layout_both && (o.schedule == "both" || several_precisions || o.tile_counts == "both" || prune_both || tuning_both))
    throw Error("--layout both compares one schedule, precision, tile count, pruning and tuning; give each one value");
  const bool pieces_both = o.pieces == "both";
  if (pieces_both && (o.schedule == "both" || several_precisions || o.tile_counts == "both" || prune_both || tuning_both ||
                      layout_both))
    throw Error("--pieces both compares one schedule, precision, tile count, pruning, tuning and layout; give each one value");
  // Series with their SessionOptions::tuning: by the rules, and tuned (both: the record, or the
  // model without one; compare: the model and the record apart).
  const std::vector<std::pair<std::string, std::string>> tunings =
      o.tuning == "both"      ? std::vector<std::pair<std::string, std::string>>{{"untuned", "off"}, {"tuned", "auto"}}
      : o.tuning == "compare" ? std::vector<std::pair<std::string, std::string>>{{"untuned", "off"}, {"model", "model"}, {"record", "record"}}
                              : std::vector<std::pair<std::string, std::string>>{{"", o.tuning}};
  for (const std::string pieces : {"whole", "pieces"})
  for (const std::string layout : {"nchw", "nhwc"})
  for (const auto& [tuning, tuning_option] : tunings)
  for (const std::string pruning : {"unpruned", "pruned"})
    for (const std::string c : {"fixed", "tail"})
      for (const std::string s : {"aspen", "barrier"})
        for (const std::string p : {"fp32", "bf16", "int8", "int8w"}) {
          if ((o.schedule != "both" && o.schedule != s) || !wanted(p) ||
              (o.tile_counts != "both" && o.tile_counts != c) || (!prune_both && pruning == "unpruned") ||
              (o.layout != "both" && o.layout != layout) ||
              (!pieces_both && (pieces == "pieces") != (o.pieces == "on")))
            continue;
          Series x;
          x.schedule = s;
          x.precision = p;
          x.counts = c;
          x.pruning = prune_both ? pruning : "";
          x.tuning = tuning;
          x.layout = layout_both ? layout : "";
          x.pieces = pieces_both ? pieces : "";
          x.session = std::make_unique<Session>(
              engine, model_from_graph(p == "int8" ? int8->graph : imported, resolved, o.limits),
              SessionOptions{.schedule = s == "barrier" ? Schedule::barrier : Schedule::aspen,
                             .tiles_per_op = o.tiles_per_op,
                             .tile_counts = c == "tail" ? TileCounts::tail_aware : TileCounts::fixed,
                             .precision = p == "bf16" ? Precision::bf16 : p == "int8w" ? Precision::int8_weights : Precision::fp32,
                             .conv_layout = layout == "nchw" ? ConvLayout::nchw : ConvLayout::channels_last,
                             .feature_pruning = pruning == "unpruned" ? "off"
                                                : prune_both          ? ""
                                                                      : feature_pruning_option(o.prune),
                             .tuning = tuning_option,
                             .tile_pieces = pieces == "pieces",
                             .run_alone = o.run_alone});
          // A model with control flow plans each segment on its first run: that run counts as loading.
          if (auto planned = plan_for(*x.session, resolved)) {
            x.gflop = double(planned->total_flops) / 1e9;
            // A performance model's plan tried against the rules' says so, whichever was kept.
            const std::string trial = plan_trial_verdict(*x.session);
            x.choices_source = trial.empty() ? planned->options.choices_source : trial;
            if ((tuning == "tuned" || tuning == "record") && x.choices_source.empty())
              throw Error(o.models[0] + ": --tuning " + o.tuning + " needs a tuning record for this model at " +
                          std::to_string(planned->options.threads) + " threads (run grove tune first)");
          }
          else x.session->run(inputs, &x.last);
          series.push_back(std::move(x));
        }
  double load_plan_s = std::chrono::duration<double>(Clock::now() - t0).count();
  auto plan = plan_for(*series[0].session, resolved);
  const bool whole = plan != nullptr;  // one TileGraph for the whole model
  if (!whole && series[0].last.used_reference && !o.json)
    std::printf("note: shapes depend on input values, so every run is on the reference executor\n");
  double gflop = whole ? static_cast<double>(plan->total_flops) / 1e9 : 0.0;
  const int tiles = whole ? plan->tiles.size() : 0;
  const long long edges = whole ? static_cast<long long>(plan->tiles.edge_count()) : 0;
  const double packed = whole ? static_cast<double>(plan->prepared_bytes) : 0.0;

  const auto warm_start = Clock::now();
  for (int i = 0; i < o.warmup || std::chrono::duration<double>(Clock::now() - warm_start).count() < o.warmup_seconds; ++i)
    for (auto& x : series) x.session->run(inputs);
  bool tty = isatty(STDERR_FILENO) && !o.json;
  auto start = Clock::now();
  for (int i = 0;; ++i) {
    double elapsed = std::chrono::duration<double>(Clock::now() - start).count();
    if (i >= o.runs && elapsed >= o.seconds) break;
    for (auto& x : series) {  // interleaved: A B A B ..., never all of A then all of B
      RunStats stats;
      auto t = Clock::now();
      x.session->run(inputs, &stats);
      x.last = stats;
      x.ms.push_back(std::chrono::duration<double, std::milli>(Clock::now() - t).count());
      x.peak_activation_bytes = std::max(x.peak_activation_bytes, stats.peak_activation_bytes);
    }
    if (tty) std::fprintf(stderr, "\r  run %d/%d (%.1f s)", i + 1, o.runs, elapsed);
  }
  if (tty) std::fprintf(stderr, "\r%40s\r", "");
  if (!o.trace_path.empty()) {  // warm, like the timed runs, but not one of them: tracing costs a little
    engine.start_trace();
    for (int i = 0; i < o.trace_runs; ++i)
      for (auto& x : series) x.session->run(inputs);
    write_trace(engine, o.trace_path, o.json ? stderr : stdout);  // --json keeps stdout one JSON object
  }

  // The plan's own account of what runs in bf16 (or why nothing does), once.
  std::string precision_note;
  for (auto& x : series)
    if (x.precision == "bf16" || x.precision == "int8w")
      if (auto p = plan_for(*x.session, resolved)) precision_note = p->precision.note;
  // --check: each reduced precision asked for against fp32 (bf16 when none is asked for).
  std::vector<std::pair<std::string, PrecisionCheck>> checks;
  if (o.check > 0) {
    Session fp32(engine, model_from_graph(imported, resolved, o.limits), SessionOptions{.tiles_per_op = o.tiles_per_op});
    std::vector<std::string> reduced;
    for (const std::string& p : precisions)
      if (p != "fp32") reduced.push_back(p);
    if (reduced.empty()) reduced.push_back("bf16");
    for (const std::string& p : reduced) {
      Session other(engine, model_from_graph(p == "int8" ? int8->graph : imported, resolved, o.limits),
                    SessionOptions{.tiles_per_op = o.tiles_per_op, .precision = p == "bf16" ? Precision::bf16 : p == "int8w" ? Precision::int8_weights : Precision::fp32});
      std::mt19937_64 check_rng(o.seed + 1);
      checks.emplace_back(p, check_precision(fp32, other, imported, resolved, inputs, drawn, o.check, check_rng));
    }
  }

  if (o.json) {
    std::printf("{\"model\": \"%s\", \"threads\": %d, \"gflop\": %.6f, \"load_plan_ms\": %.3f, \"peak_rss_mb\": %.1f, "
                "\"tiles\": %d, \"edges\": %lld, \"packed_weight_bytes\": %lld, \"results\": [",
                o.models[0].c_str(), engine.threads(), gflop, load_plan_s * 1e3, peak_rss_mb(), tiles, edges,
                static_cast<long long>(packed));
    for (size_t k = 0; k < series.size(); ++k) {
      const auto& x = series[k];
      std::printf("%s{\"schedule\": \"%s\", \"precision\": \"%s\", \"tile_counts\": \"%s\", \"runs\": %zu, \"min_ms\": %.4f, \"p50_ms\": %.4f, \"p90_ms\": %.4f, "
                  "\"p99_ms\": %.4f, \"max_ms\": %.4f, \"mean_ms\": %.4f, \"throughput_per_s\": %.4f, "
                  "\"peak_activation_bytes\": %lld, \"buffer_pool_bytes\": %lld",
                  k ? ", " : "", x.schedule.c_str(), x.precision.c_str(), x.counts.c_str(), x.ms.size(), percentile(x.ms, 0), percentile(x.ms, 50),
                  percentile(x.ms, 90), percentile(x.ms, 99), percentile(x.ms, 100), mean(x.ms),
                  1e3 / mean(x.ms), static_cast<long long>(x.peak_activation_bytes), static_cast<long long>(pool_bytes(x)));
      if (!x.pruning.empty()) std::printf(", \"pruning\": \"%s\", \"gflop\": %.6f", x.pruning.c_str(), x.gflop);
      if (!x.tuning.empty()) std::printf(", \"tuning\": \"%s\"", x.tuning.c_str());
      if (!x.layout.empty()) std::printf(", \"layout\": \"%s\"", x.layout.c_str());
      if (const std::string alone = run_alone_verdict(*x.session); !alone.empty())
        std::printf(", \"run_alone\": \"%s\"", alone.c_str());
      std::printf(", \"ms\": [");  // every timed run, in order: a suite pools them across rounds
      for (size_t i = 0; i < x.ms.size(); ++i) std::printf("%s%.4f", i ? ", " : "", x.ms[i]);
      std::printf("]}");
    }
    std::printf("]");
    if (!precision_note.empty()) std::printf(", \"precision_note\": \"%s\"", precision_note.c_str());
    // "check": the first reduced precision's (as before int8 existed); "checks": every one.
    auto print_check = [](const std::string& p, const PrecisionCheck& c) {
      std::printf("{\"inputs\": %d, \"max_error\": %.6g, \"worst_output\": \"%s\", \"rows\": %lld, "
                  "\"top1_agreement\": %.6f, \"top5_agreement\": %.6f, \"precision\": \"%s\"}",
                  c.inputs, c.max_error, c.worst_output.c_str(), static_cast<long long>(c.rows),
                  c.rows ? double(c.top1_agree) / double(c.rows) : 1.0, c.rows ? double(c.top5_agree) / double(c.rows) : 1.0,
                  p.c_str());
    };
    if (!checks.empty()) {
      std::printf(", \"check\": ");
      print_check(checks[0].first, checks[0].second);
      std::printf(", \"checks\": [");
      for (size_t k = 0; k < checks.size(); ++k) {
        if (k) std::printf(", ");
        print_check(checks[k].first, checks[k].second);
      }
      std::printf("]");
    }
    if (int8) std::printf(", \"int8_note\": \"%s\"", int8->note.c_str());
    std::printf("}\n");
    return 0;
  }
  if (whole)
    std::printf("model: %s  (%.3f GFLOPs, %d tiles, %lld edges)\n", o.models[0].c_str(), gflop, tiles, edges);
  else if (series[0].last.segment_runs > 0)
    std::printf("model: %s  (control flow: %lld planned segments per run, docs/control-flow.md)\n", o.models[0].c_str(),
                static_cast<long long>(series[0].last.segment_runs));
  else
    std::printf("model: %s  (not planned: reference executor)\n", o.models[0].c_str());
  std::printf("threads: %d   load + plan: %s   peak RSS: %.1f MB   packed weights: %.1f MB\n", engine.threads(),
              milliseconds(load_plan_s).c_str(), peak_rss_mb(), packed / 1e6);
  if (!precision_note.empty()) std::printf("precision: %s\n", precision_note.c_str());
  for (const auto& x : series) {
    if (!x.choices_source.empty()) std::printf("tuning%s: %s\n", x.tuning.empty() ? "" : (" (" + x.tuning + ")").c_str(), x.choices_source.c_str());
    // Learnt from the plan's first runs (SessionOptions::run_alone), so known by now.
    if (const std::string alone = run_alone_verdict(*x.session); !alone.empty()) std::printf("%s\n", alone.c_str());
  }
  std::printf("%-16s %6s %10s %10s %10s %10s %10s %10s %9s %12s %8s\n", "schedule", "runs", "min ms", "p50 ms", "p90 ms",
              "p99 ms", "max ms", "runs/s", "GFLOP/s", "peak act MB", "pool MB");
  for (const auto& x : series) {
    double p50 = percentile(x.ms, 50);
    const std::string label =
        x.schedule + (x.precision == "fp32" ? "" : "/" + x.precision) + (x.counts == "fixed" ? "/fixed" : "") +
        (x.pruning.empty() ? "" : "/" + x.pruning) + (x.tuning.empty() ? "" : "/" + x.tuning) + (x.layout.empty() ? "" : "/" + x.layout) + (x.pieces.empty() ? "" : "/" + x.pieces);
    std::printf("%-16s %6zu %10.3f %10.3f %10.3f %10.3f %10.3f %10.2f %9.2f %12.2f %8.2f\n", label.c_str(), x.ms.size(),
                percentile(x.ms, 0), p50, percentile(x.ms, 90), percentile(x.ms, 99), percentile(x.ms, 100),
                1e3 / p50, (x.gflop > 0 ? x.gflop : gflop) / (p50 / 1e3), x.peak_activation_bytes / 1e6, pool_bytes(x) / 1e6);
  }
  // Series run in the order aspen, barrier, each in the order fp32, bf16, int8: ratios of
  // matching pairs.
  const size_t per_schedule = precisions.size();
  if (o.schedule == "both")
    std::printf("barrier-free speedup (p50 barrier / p50 aspen): %.3fx\n",
                percentile(series[per_schedule].ms, 50) / percentile(series[0].ms, 50));
  if (o.tile_counts == "both")
    std::printf("tail-aware speedup (p50 fixed / p50 tail): %.3fx\n", percentile(series[0].ms, 50) / percentile(series[1].ms, 50));
  if (wanted("fp32"))
    for (size_t k = 1; k < per_schedule; ++k)
      std::printf("%s speedup (p50 fp32 / p50 %s): %.3fx\n", series[k].precision.c_str(), series[k].precision.c_str(),
                  percentile(series[0].ms, 50) / percentile(series[k].ms, 50));
  for (size_t k = 1; tuning_both && k < series.size(); ++k)
    std::printf("tuning speedup (p50 untuned / p50 %s): %.3fx\n", series[k].tuning.c_str(),
                percentile(series[0].ms, 50) / percentile(series[k].ms, 50));
  if (pieces_both)
    std::printf("pieces speedup (p50 whole / p50 pieces): %.3fx\n", percentile(series[0].ms, 50) / percentile(series[1].ms, 50));
  if (layout_both)
    std::printf("channels-last speedup (p50 nchw / p50 nhwc): %.3fx\n", percentile(series[0].ms, 50) / percentile(series[1].ms, 50));
  if (prune_both)
    std::printf("pruning speedup (p50 unpruned / p50 pruned): %.3fx for %.1f%% of the FLOPs\n",
                percentile(series[0].ms, 50) / percentile(series[1].ms, 50), 100.0 * series[1].gflop / series[0].gflop);
  for (const auto& [p, c] : checks) {
    std::printf("check %s vs fp32 over %d input sets: max error %.3g of the largest |output| (%s)", p.c_str(), c.inputs,
                c.max_error, c.worst_output.c_str());
    if (c.rows)
      std::printf("; top-1 agreement %.2f%%, top-5 %.2f%% of %lld rows", 100.0 * double(c.top1_agree) / double(c.rows),
                  100.0 * double(c.top5_agree) / double(c.rows), static_cast<long long>(c.rows));
    std::printf("\n");
  }
  return 0;
}

CLI::App* add_bench_command(CLI::App& app, BenchOptions& o) {
  CLI::App* cmd = app.add_subcommand("bench", "Time a model: latency percentiles, throughput, memory");
  cmd->footer(R"(
Runs the model on seeded random inputs (as grove run does) after --warmup untimed runs.
--schedule both interleaves the barrier-free and the op-by-op schedule run by run (A B A B),
on the same engine, tiles and kernels, so their ratio is measured side by side.
--precision both does the same for an fp32 and a bf16 session and prints the bf16 speedup;
--precision fp32,int8 quantizes the model in memory (calibrated on --calibrate DIR, else on
the bench inputs) and times it next to fp32. --check N then runs fp32 and each reduced
precision on N input sets and reports the largest output difference relative to the
output's largest magnitude, and top-1/top-5 agreement (docs/precision.md).
Several model files: co-execution. Each round runs every model once submitted together into
one engine and once one after the other (alternating which goes first); reports both medians,
inferences/s and the speedup. --input NAME=FILE.npy goes to the models with that input.

Examples:
  grove bench resnet50.onnx --threads 2 --runs 20
  grove bench bert.onnx --shape input_ids=1x128 --schedule both --json
  grove bench resnet50.onnx --precision both --check 20
  grove bench resnet50.onnx --precision fp32,int8 --calibrate samples/ --check 20
  grove bench resnet50.onnx bert.onnx --threads 2 --runs 10
  grove bench dynamic.onnx --subnet all
  grove bench dynamic.onnx --latency-target-ms 15 --co-run other.onnx --co-run-schedule 0:4s,1:4s,0:4s)");
  cmd->add_option("model", o.models, "The .onnx file; several: co-execution vs one after the other")
      ->required();
  add_input_option(cmd, o.inputs,
                   "Input from a .npy file: NAME=FILE.npy (e.g. valid token ids); others get seeded random data");
  add_shape_option(cmd, o.shapes);
  add_threads_option(cmd, o.threads);
  cmd->add_option("--runs,-r", o.runs, "Timed runs (per schedule; rounds with several models)")->capture_default_str()->check(CLI::Range(1, 1000000));
  cmd->add_option("--seconds,-s", o.seconds, "Keep running until this many seconds (0: just --runs)")
      ->capture_default_str()->check(CLI::Range(0.0, 86400.0));
  cmd->add_option("--warmup,-w", o.warmup, "Untimed runs first (per schedule)")->capture_default_str()->check(CLI::Range(0, 1000));
  cmd->add_option("--warmup-seconds", o.warmup_seconds,
                    "Keep doing untimed runs until this many seconds have passed (at least --warmup runs): "
                    "a fresh process runs slower for its first few hundred milliseconds on some machines (docs/benchmarks.md)")
      ->capture_default_str()->check(CLI::Range(0.0, 3600.0));
  cmd->add_option("--schedule", o.schedule, "aspen, barrier, or both (interleaved)")
      ->capture_default_str()->check(CLI::IsMember({"aspen", "barrier", "both"}));
  cmd->add_option("--tiles-per-op", o.tiles_per_op, "Target tiles per op (0: by rule)")
      ->capture_default_str()->check(CLI::Range(0, 1 << 20));
  cmd->add_option("--tile-counts", o.tile_counts,
                    "Tiles per op when --tiles-per-op is 0: fixed (one per thread), tail (TA-DNN's staircase: "
                    "the count whose waves on the threads cost least, docs/scaling.md), or both (interleaved)")
      ->capture_default_str()->check(CLI::IsMember({"fixed", "tail", "both"}));
  cmd->add_option("--precision", o.precision,
                    std::string(kPrecisionHelp) +
                        " int8 quantizes the float model in memory as grove quantize does (calibrated on --calibrate's "
                        "samples, else on the benchmark's inputs) and runs it on the integer kernels; int8w stores only "
                        "the weights of MatMul and Gemm as int8 (a scale per column; activations stay fp32). 'both' times fp32 "
                        "and bf16 interleaved and prints the speedup; a comma list (fp32,int8 or fp32,bf16,int8) times "
                        "each of them so.")
      ->capture_default_str()
      ->type_name("fp32|bf16|int8|both|LIST");
  cmd->add_option("--calibrate", o.calibrate_dir,
                    "--precision int8: calibrate on these samples (.npy files, or one subdirectory of NAME.npy per "
                    "sample for several inputs), as grove quantize --calibrate")
      ->type_name("DIR");
  cmd->add_option("--tuning", o.tuning,
                    std::string(kTuningHelp) + " 'both' times the model untuned and tuned, interleaved; 'compare' "
                    "times it untuned, with the performance model's choices and with the record's.")
      ->capture_default_str()->type_name("auto|off|model|record|both|compare|FILE");
  cmd->add_option("--layout", o.layout,
                    std::string(kLayoutHelp) + " 'both' times the two interleaved and prints the speedup.")
      ->capture_default_str()
      ->check(CLI::IsMember({"nchw", "nhwc", "both"}));
  cmd->add_option("--check", o.check,
                    "Also run fp32 and each reduced precision of --precision (bf16 if none) on N input sets (the bench "
                    "inputs, then seeded random ones) and report "
                    "the largest output difference relative to the output's largest magnitude, and top-1/top-5 "
                    "agreement of the rows of float outputs")
      ->type_name("N")
      ->check(CLI::Range(0, 100000));
  cmd->add_option("--prune", o.prune,
                    std::string(kPruneHelp) + ". 'both' times the model unpruned and as its metadata prunes it, "
                    "interleaved, and prints the speedup next to the share of FLOPs kept.")
      ->type_name("off|both|STATEMENTS");
  cmd->add_flag("--json", o.json, "Print one JSON object instead of the table");
  cmd->add_flag("--mt-graph", o.mt_graph,
                  "With several models: search MT-Graph stage pointers by coordinate descent on measured latency, "
                  "then compare the best schedule with plain co-execution, one after the other and split cores");
  cmd->add_option("--mt-pointers", o.mt_pointers, "MT-Graph: stage boundaries per model")
      ->capture_default_str()
      ->check(CLI::Range(1, 16));
  cmd->add_option("--mt-rounds", o.mt_rounds, "MT-Graph: coordinate descent rounds")
      ->capture_default_str()
      ->check(CLI::Range(1, 100));
  cmd->add_option("--mt-candidates", o.mt_candidates, "MT-Graph: pointer rows sampled per model per round")
      ->capture_default_str()
      ->check(CLI::Range(1, 1000));
  cmd->add_option("--mt-profile-runs", o.mt_profile_runs, "MT-Graph: runs per profiled schedule (median)")
      ->capture_default_str()
      ->check(CLI::Range(1, 1000));
  cmd->add_option("--slow-worker", o.slow_worker,
                    "Uneven cores test mode: worker thread 0 takes this many times as long over each tile "
                    "(docs/scaling.md; 1: off)")
      ->capture_default_str()->check(CLI::Range(1.0, 100.0));
  cmd->add_option("--workers-schedule", o.workers_schedule,
                    "Elastic workers: phases WORKERS:SECONDS, e.g. 1:2s,2:2s,1:2s; the worker count changes while "
                    "runs are in flight, and each phase's throughput is printed")
      ->type_name("N:S,...");
  cmd->add_option("--subnet", o.subnet,
                    std::string(kSubnetHelp) + " `all`: every sub-net, interleaved, with its first and warm latency")
      ->type_name("NAME|RATIOS|all");
  cmd->add_option("--latency-target-ms", o.latency_target_ms,
                    "Dynamic model: each run takes the widest sub-net predicted to meet this P99 target under "
                    "the current load; prints P99 and the sub-nets run per 1-second window, then the same "
                    "with the full model on every run (docs/dynamic.md)")
      ->check(CLI::Range(0.0, 1e6));
  cmd->add_option("--co-run", o.co_run,
                    "With --latency-target-ms: a model run on the same engine as load, in the number of streams "
                    "--co-run-schedule gives")
      ->type_name("MODEL");
  cmd->add_flag("--urgent", o.urgent,
                  "With --subnet or --latency-target-ms: the timed model's tiles go ahead of the --co-run load's "
                  "in the ready pool (SessionOptions::urgent)");
  cmd->add_option("--co-run-schedule", o.co_run_schedule,
                    "Load phases STREAMS:SECONDS, e.g. 0:3s,1:3s,0:3s (0 streams: no load)")
      ->capture_default_str()
      ->type_name("N:S,...");
  add_seed_option(cmd, o.seed);
  cmd->add_option("--run-alone", o.run_alone,
                  "auto: a plan whose run is short is timed running on the calling thread alone and shared across the "
                  "workers before its first run, and the faster kept (tiny models, where handing tiles between cores costs "
                  "more than they take); on: always alone; off: always shared (docs/runtime.md)")
      ->check(CLI::IsMember({"auto", "on", "off"}))
      ->capture_default_str();
  cmd->add_option("--pieces", o.pieces,
                  "on: a tile that streams weights (a decode step's products) runs in pieces an idle core can join, so a "
                  "slower core does not hold half of every op; off: every tile whole; both: the two interleaved "
                  "(docs/runtime.md)")
      ->check(CLI::IsMember({"on", "off", "both"}))
      ->capture_default_str();
  CLI::Option* trace = cmd->add_option("--trace", o.trace_path,
                    "After the timed runs, --trace-runs more warm runs per schedule (with --subnet: per sub-net) traced to this .json file (Chrome/Perfetto); each run's tiles carry its job id")
      ->type_name("FILE");
  cmd->add_option("--trace-runs", o.trace_runs,
                  "Runs traced with --trace, per schedule or sub-net, interleaved like the timed runs. A run of a few hundred microseconds is a sample of one: trace many and take medians per tile (scripts/trace_op_times.py does)")
      ->check(CLI::Range(1, 1000))
      ->capture_default_str()
      ->needs(trace);

  add_limit_options(cmd, o.limits);
  return cmd;
}

}  // namespace grove::cli
