// grove tune: measure, on this machine, which primitive and tile grid each Conv of a model
// runs fastest with inside the model (profile/in_model_profile.h), check that the model as a whole is
// faster with them, and write a tuning record that sessions then plan with (docs/tuning.md).
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <random>

#include "cli/bench_stats.h"
#include "cli/commands.h"
#include "cli/options.h"
#include "cli/format.h"
#include "cli/inputs.h"
#include "kernels/cpu_info.h"
#include "onnx/import.h"
#include "profile/in_model_profile.h"
#include "runtime/session.h"
#include "tune/conv_candidates.h"
#include "tune/record.h"

namespace grove::cli {

using profile::best_choices;
using profile::choose_best;
using profile::profile_nodes;
using profile::ProfileSettings;
using profile::TuneCandidate;
using profile::TunedNode;
using profile::write_dataset;
namespace {

using Clock = std::chrono::steady_clock;

const char* or_dash(const std::string& s) { return s.empty() ? "-" : s.c_str(); }

// Median latency of each session, run in turn (A B C A B C ...; who goes first rotates), so
// drift on a noisy machine hits them alike.
std::vector<double> interleaved_ms(const std::vector<Session*>& sessions, const TensorMap& inputs, int runs) {
  std::vector<std::vector<double>> ms(sessions.size());
  for (int i = 0; i < 2; ++i)
    for (Session* s : sessions) s->run(inputs);
  for (int i = 0; i < runs; ++i)
    for (size_t k = 0; k < sessions.size(); ++k) {
      const size_t which = (k + static_cast<size_t>(i)) % sessions.size();
      const auto t = Clock::now();
      sessions[which]->run(inputs);
      ms[which].push_back(std::chrono::duration<double, std::milli>(Clock::now() - t).count());
    }
  std::vector<double> medians;
  for (auto& v : ms) medians.push_back(percentile(v, 50));
  return medians;
}

}  // namespace

int run_tune(const TuneOptions& o) {
  if (o.calibrate) return run_tune_calibrate(o);
  if (!o.fit.empty()) {
    if (!o.model.empty()) throw Error("tune: --fit trains on a dataset; give no model with it");
    return run_tune_fit(o);
  }
  if (o.sample_stems && o.sample == 0) throw Error("tune: --sample-stems goes with --sample N");
  if (o.sample > 0) return run_tune_sample(o);
  if (o.sample_layouts > 0) return run_tune_sample_layouts(o);
  if (!o.fit_layouts.empty()) return run_tune_fit_layouts(o);
  if (o.model.empty()) throw Error("tune: give the .onnx model to tune (or --fit DATASET.csv)");
  const auto t0 = Clock::now();
  ShapeMap shapes = parse_shape_options(o.shapes);
  Graph imported = load_onnx(o.model, o.limits);
  TensorMap inputs = load_input_files(imported, o.inputs, shapes);
  const ShapeMap resolved = resolve_input_shapes(imported, shapes);
  std::mt19937_64 rng(o.seed);
  for (const auto& decl : imported.inputs)
    if (!inputs.count(decl.name)) inputs[decl.name] = random_tensor(decl.dtype, resolved.at(decl.name), rng);

  Engine engine({.threads = o.threads});
  const Precision precision = parse_precision(o.precision);
  auto make_session = [&](const std::vector<NodeChoice>& choices) {
    return std::make_unique<Session>(engine, model_from_graph(imported, resolved, o.limits),
                                     SessionOptions{.precision = precision, .tuning = "off", .choices = choices});
  };
  ProfileSettings settings;
  settings.runs = o.runs;
  settings.passes = o.passes;
  settings.progress = !o.quiet;
  std::unique_ptr<Session> rules = make_session({});
  const std::shared_ptr<const Plan> plan = plan_for(*rules, resolved);
  if (!plan) throw Error(o.model + ": the model's shapes depend on input values, so it has no plan to tune");
  const std::string model_key = tune::model_key(bound_graph(rules->model()));
  const int threads = plan->options.threads;

  std::vector<TunedNode> nodes = profile_nodes(engine, make_session, inputs, resolved, settings);
  tune::TuningRecord record;
  record.machine = kernels::machine_key();
  record.model = model_key;
  record.threads = threads;
  record.precision = o.precision;
  // Two sets of choices: every node's best grid, and the best with the rule's tile count (the
  // model's parallel structure unchanged, only faster tiles). The per-node costs are each
  // node's own; the whole model, timed against the rules, decides which set is kept.
  const int model_threads = threads;
  std::vector<std::vector<NodeChoice>> sets;
  std::vector<std::vector<double>> set_node_us(2), set_rule_us(2);
  std::vector<std::vector<TunedNode>> chosen;
  for (bool same_tiles : {false, true}) {
    choose_best(nodes, model_threads, settings.keep_share, same_tiles);
    const size_t k = sets.size();
    sets.push_back(best_choices(nodes, &set_node_us[k], &set_rule_us[k]));
    chosen.push_back(nodes);
  }
  std::vector<std::unique_ptr<Session>> tuned;
  std::vector<Session*> timed = {rules.get()};
  for (const auto& set : sets)
    if (!set.empty()) {
      tuned.push_back(make_session(set));
      timed.push_back(tuned.back().get());
    }
  const std::vector<double> ms = interleaved_ms(timed, inputs, o.verify_runs);
  record.default_ms = record.tuned_ms = ms[0];
  size_t best_set = sets.size(), timed_index = 1;
  for (size_t k = 0; k < sets.size(); ++k) {
    if (sets[k].empty()) continue;
    const double t = ms[timed_index++];
    if (!o.quiet)
      std::fprintf(stderr, "tune: %s: %zu choices, %.3f ms (rules %.3f ms)\n",
                   k == 0 ? "best grids" : "best with the rules' tile counts", sets[k].size(), t, ms[0]);
    if (t < record.tuned_ms) {
      record.tuned_ms = t;
      best_set = k;
    }
  }
  if (best_set < sets.size()) {
    record.choices = sets[best_set];
    record.node_us = set_node_us[best_set];
    record.rule_us = set_rule_us[best_set];
    nodes = chosen[best_set];
  } else {
    for (TunedNode& t : nodes) t.best = -1;
    std::printf("no set of choices measured faster than the rules (%.3f ms): the record keeps the rules\n", ms[0]);
  }

  std::string path = o.output;
  if (path.empty()) {
    const std::string dir = tune::machine_tuning_dir();
    if (dir.empty()) throw Error("tune: no cache folder (set GROVE_TUNE_DIR or HOME), or give -o FILE");
    path = dir + "/" + tune::record_file_name(model_key, threads, o.precision);
  }
  tune::write_record_file(record, path);
  if (!o.dataset.empty()) write_dataset(o.dataset, nodes, threads);

  std::printf("model: %s  (key %s)\nmachine: %s\nthreads: %d   precision: %s   nodes measured: %zu   time: %s\n",
              o.model.c_str(), model_key.c_str(), record.machine.c_str(), threads, o.precision.c_str(), nodes.size(),
              milliseconds(std::chrono::duration<double>(Clock::now() - t0).count()).c_str());
  std::printf("%-44s %-9s %6s %9s   %-9s %6s %9s\n", "node", "rule", "tiles", "us", "chosen", "tiles", "us");
  for (const TunedNode& t : nodes) {
    const std::string name = t.name.size() > 44 ? "..." + t.name.substr(t.name.size() - 41) : t.name;
    const int64_t rule_tiles = t.rule_tiles;
    if (t.best < 0) {
      std::printf("%-44s %-9s %6lld %9.1f   %-9s\n", name.c_str(), or_dash(t.rule_primitive), (long long)rule_tiles,
                  t.rule_us, "(rule)");
      continue;
    }
    const TuneCandidate& c = t.candidates[static_cast<size_t>(t.best)];
    std::printf("%-44s %-9s %6lld %9.1f   %-9s %6lld %9.1f\n", name.c_str(), or_dash(t.rule_primitive),
                (long long)rule_tiles, t.rule_us, or_dash(c.primitive), (long long)c.tiles, c.us);
  }
  std::printf("whole model, median of %d interleaved runs: rules %.3f ms, tuned %.3f ms (%.3fx)\n", o.verify_runs,
              record.default_ms, record.tuned_ms, record.default_ms / std::max(record.tuned_ms, 1e-9));
  std::printf("record: %s (%zu choices)\n", path.c_str(), record.choices.size());
  return 0;
}

CLI::App* add_tune_command(CLI::App& app, TuneOptions& o) {
  CLI::App* cmd = app.add_subcommand("tune", "Measure each Conv's primitive and tile grid on this machine; write a tuning record");
  cmd->footer(R"(
Each Conv (2-D, fp32 or bf16) of the model has candidates: its primitive (im2col GEMM; the
direct kernel for a stem; the channels-last GEMM, nhwc, for one group; and where Winograd fits,
F(4x4,3x3) in either layout and F(2x2,3x3) channels-last) times a few tile grids (one, two and
four tiles per thread, cut by rows or by output channels). Rounds of the whole model put one candidate of
every Conv in place and time each node's tiles from a trace (--runs runs per round), after
a round planned by the hand rules; every round is repeated --passes times, in turn. A
candidate replaces the rule where its tiles cost 3% less (their time over the threads plus
the slowest tile). Two sets of choices (every node's best; the best with the rule's tile
count) are then timed against the rules as whole models, interleaved (--verify-runs each),
and the fastest is kept, or none if the rules are fastest. The record goes to the
per-machine cache (~/.cache/grove/tune, or $GROVE_TUNE_DIR), keyed by the model's structure,
this CPU, the thread count and the precision; grove run, bench, plan and serve, and sessions
of the C++ and Python APIs, then plan with it (--tuning off to compare). docs/tuning.md.

Examples:
  grove tune resnet50.onnx --threads 2
  grove tune model.onnx --shape input=1x3x224x224 --dataset profile.csv
  grove tune --sample 300 --threads 1 --dataset profile.csv   (sampled conv layers)
  grove tune --calibrate                                       (the shipped performance model, fitted to this machine)
  grove bench resnet50.onnx --threads 2 --tuning both)");
  cmd->add_option("model", o.model, "The .onnx file (not with --fit or --sample)");
  cmd->add_option("--fit", o.fit,
                   "Train this machine's performance model on a --dataset CSV instead of tuning a model: MdRAE on a "
                   "held-out tenth against linear regression, then saved where plans without a record use it")
      ->type_name("FILE.csv");
  cmd->add_option("--model-out", o.model_out, "--fit: write the model here instead of the per-machine cache")
      ->type_name("FILE");
  cmd->add_option("--transfer-from", o.transfer_from,
                   "--fit: fine-tune this (another machine's) model on --sample-share of the samples, against training "
                   "from scratch on them")->type_name("FILE");
  cmd->add_option("--fit-machine", o.fit_machine,
                   "--fit: the rows of this machine key (another CPU's profile, for a study) instead of this "
                   "machine's; needs --model-out")->type_name("KEY");
  cmd->add_option("--fit-report", o.fit_report, "--fit: write the test split's measured and predicted times here")
      ->type_name("FILE.csv");
  cmd->add_option("--sample-share", o.sample_share, "--fit --transfer-from: share of the training samples used")
      ->capture_default_str()->check(CLI::Range(0.001, 1.0));
  add_input_option(cmd, o.inputs,
                   "Input from a .npy file: NAME=FILE.npy; others get seeded random data");
  add_shape_option(cmd, o.shapes);
  add_threads_option(cmd, o.threads, "Worker threads to tune for (0: the cores this process may use)");
  add_precision_option(cmd, o.precision, {"fp32", "bf16", "int8"});
  cmd->add_option("--runs,-r", o.runs, "Traced runs per round (each conv's median)")
      ->capture_default_str()->check(CLI::Range(1, 1000));
  cmd->add_option("--passes", o.passes, "Times every round is repeated, in turn (medians over all their runs)")
      ->capture_default_str()->check(CLI::Range(1, 100));
  cmd->add_option("--verify-runs", o.verify_runs, "Whole-model runs of the rules and of the choices, interleaved")
      ->capture_default_str()->check(CLI::Range(1, 10000));
  cmd->add_option("--output,-o", o.output, "Write the record here instead of the per-machine cache")->type_name("FILE");
  cmd->add_option("--dataset", o.dataset,
                   "Append every measured candidate (layer configuration, primitive, grid, time) to this CSV")
      ->type_name("FILE.csv");
  cmd->add_option("--sample", o.sample,
                   "Instead of a model, profile N conv layers sampled from the sizes CNNs use (channels 8-768, planes "
                   "7-112, kernels 1/3/5/7, strides 1/2; every eighth a stem: 1-4 channels on a 56-416 plane), "
                   "each as a one-conv model, into --dataset")
      ->type_name("N")->check(CLI::Range(1, 100000));
  cmd->add_option("--sample-layouts", o.sample_layouts,
                   "Instead of a model, time every layout change (NCHW, NHWC, channel-blocked, each way) of N sampled "
                   "values [1, C, H, W] at 1 thread and at --threads, into --dataset (the layout model's data)")
      ->type_name("N")->check(CLI::Range(1, 100000));
  cmd->add_option("--fit-layouts", o.fit_layouts,
                   "Train this machine's layout model on a --sample-layouts CSV: MdRAE on a held-out tenth against "
                   "linear regression and one price per element, then saved where plans find it (or --model-out)")
      ->type_name("FILE.csv");
  cmd->add_flag("--sample-stems", o.sample_stems,
                 "--sample: stems only (a network's first conv, where the direct kernel competes)");
  cmd->add_flag("--calibrate", o.calibrate,
                 "Move the performance model shipped for this ISA (or --transfer-from's) to this machine: profile "
                 "--sample sampled conv layers (default 25) at 1 thread and at --threads, fine-tune the model on them, "
                 "report its MdRAE against the shipped model as is and against one trained from scratch, and install "
                 "it where plans without a tuning record use it (a few minutes)");
  cmd->add_flag("--quiet,-q", o.quiet, "No progress lines on stderr");
  add_seed_option(cmd, o.seed);
  add_limit_options(cmd, o.limits);
  return cmd;
}

}  // namespace grove::cli
