// grove tune: measure, on this machine, which primitive and tile grid each Conv of a model
// runs fastest with inside the model (cli/tune_profile.h), check that the model as a whole is
// faster with them, and write a tuning record that sessions then plan with (docs/tuning.md).
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <random>

#include "cli/bench_stats.h"
#include "cli/commands.h"
#include "cli/format.h"
#include "cli/inputs.h"
#include "cli/tune_profile.h"
#include "kernels/cpu_info.h"
#include "onnx/import.h"
#include "runtime/session.h"
#include "tune/conv_candidates.h"
#include "tune/record.h"

namespace grove::cli {
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
    return std::make_unique<Session>(engine, Model(imported, resolved, o.limits),
                                     SessionOptions{.precision = precision, .tuning = "off", .choices = choices});
  };
  ProfileSettings settings;
  settings.runs = o.runs;
  settings.passes = o.passes;
  settings.progress = !o.quiet;
  std::unique_ptr<Session> rules = make_session({});
  const std::shared_ptr<const Plan> plan = rules->plan_for(resolved);
  if (!plan) throw Error(o.model + ": the model's shapes depend on input values, so it has no plan to tune");
  const std::string model_key = tune::model_key(rules->model().graph());
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

}  // namespace grove::cli
