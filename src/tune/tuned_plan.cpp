#include "tune/tuned_plan.h"

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <optional>

#include "graph/graph_hash.h"
#include "kernels/cpu_info.h"
#include "kernels/isa.h"
#include "tune/perf_select.h"
#include "tune/record.h"
#include "tune/shipped_models.h"

namespace grove::tune {
namespace {

// The least share of its convs' predicted time a plan of the shipped model must save to be
// taken over the rules'. The shipped model was trained on another CPU of the ISA family, and a
// few layers' predicted gain is within what it misjudges on this one: on a Zen 5 the AVX-512
// model's plans for ResNet-50 and GoogLeNet (predicted to save 0.05-1.4%) ran 1-4% slower than
// the rules', while those predicted to save 4-37% (VGG-16, YOLOv3, a conv stack) ran 3-57%
// faster (docs/tuning.md). A model calibrated here is trusted node by node.
constexpr double kShippedModelMinGain = 0.03;

// The layout model plans price layout changes with (tune/layout_model.h): this machine's,
// where grove tune --fit-layouts left one, else the one shipped for its ISA; none (the
// plan's price per element) where neither is readable.
struct NamedModel {
  PerfModel model;
  std::string name;
};
std::optional<NamedModel> layout_model() {
  std::error_code ec;
  if (const std::string path = layout_model_path(); !path.empty() && std::filesystem::exists(path, ec)) {
    std::ifstream f(path, std::ios::binary);
    const std::string text((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
    try {
      return NamedModel{PerfModel::load(text), "layout model " + path};
    } catch (const Error&) {
    }
  }
  const std::string isa(kernels::isa_name(kernels::active_isa()));
  const std::string_view shipped = shipped_layout_model(isa);
  if (shipped.empty()) return std::nullopt;
  return NamedModel{PerfModel::load(std::string(shipped)), "layout model shipped for " + isa};
}

TuningDecisions choices_of(const Graph& graph, const PlanOptions& po, const std::string& text, const std::string& name,
                           double min_gain) {
  const std::optional<NamedModel> layouts = layout_model();
  return model_choices(graph, po, PerfModel::load(text), layouts ? name + " and " + layouts->name : name, min_gain,
                       layouts ? &layouts->model : nullptr);
}

// The choices a performance model prices lowest on a plan of the rules' structure (no weights
// packed): this machine's, where grove tune --fit or --calibrate left one, else the one grove
// ships for this ISA (a candidate must beat the rules by the model's own errors, so where it
// predicts no gain the plan is the rules'). `asked` (tuning "model"): an unreadable model of
// this machine, or no model at all, is an Error; otherwise the rules, with a note.
TuningDecisions model_decisions(const Graph& graph, const PlanOptions& po, bool asked) {
  const std::string path = perf_model_path();
  std::error_code ec;
  if (path.empty() || !std::filesystem::exists(path, ec)) {
    const std::string isa(kernels::isa_name(kernels::active_isa()));
    const std::string_view shipped = shipped_perf_model(isa);
    if (shipped.empty()) {
      if (asked) throw Error("tuning model: grove ships no performance model for " + isa + " and this machine has none (" + (path.empty() ? std::string("no cache folder") : path) + "; make one with grove tune --fit)");
      return {};
    }
    return choices_of(graph, po, std::string(shipped), "performance model shipped for " + isa, kShippedModelMinGain);
  }
  try {
    std::ifstream f(path, std::ios::binary);
    const std::string text((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
    return choices_of(graph, po, text, "performance model " + path, 0);
  } catch (const Error& e) {
    if (asked) throw Error(path + ": " + e.what());
    return {{}, "performance model " + path + " ignored: " + e.what(), DecisionSource::record};
  }
}

// What a plan with `record` says of its choices.
std::string record_source(const TuningRecord& record, const std::string& path) {
  const std::string n = std::to_string(record.choices.size());
  if (record.measured_by != kMeasuredByTrial) return "tuning record " + path + " (" + n + " choices)";
  char times[96];
  std::snprintf(times, sizeof times, "%.3f ms against %.3f ms", record.choices.empty() ? record.default_ms : record.tuned_ms,
                record.choices.empty() ? record.tuned_ms : record.default_ms);
  return "tuning record " + path + " (a plan trial kept " +
         (record.choices.empty() ? "the rules' plan over the performance model's: "
                                 : "the performance model's " + n + " choices over the rules' plan: ") +
         times + ")";
}

}  // namespace

std::string record_path(const Graph& graph, const PlanOptions& po) {
  const std::string dir = machine_tuning_dir();
  if (dir.empty()) return "";
  return dir + "/" + record_file_name(model_key(graph), po.threads, precision_name(po.precision));
}

namespace {

// A session's trial verdict as a record for `key` at po's threads and precision, written to
// `path`: "" or why it could not be.
std::string write_trial_record(TuningRecord r, const std::string& key, const PlanOptions& po, const std::string& path) {
  if (path.empty()) return "no cache folder to keep it in";
  r.machine = kernels::machine_key();
  r.model = key;
  r.threads = po.threads;
  r.precision = precision_name(po.precision);
  try {
    write_record_file(r, path);
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

}  // namespace

std::string keep_trial_verdict(const Graph& graph, const PlanOptions& po, const std::vector<NodeChoice>& choices,
                               bool model_kept, double model_ms, double rules_ms) {
  TuningRecord r;
  r.default_ms = rules_ms;
  r.tuned_ms = model_ms;
  if (model_kept) {
    r.choices = choices;
    r.node_us.assign(choices.size(), 0);
    r.rule_us.assign(choices.size(), 0);
  }
  r.measured_by = kMeasuredByTrial;
  return write_trial_record(std::move(r), model_key(graph), po, record_path(graph, po));
}

namespace {

// The model's key with the pruning statements hashed in: a model pruned another way is
// another trial.
std::string pruned_model_key(const Graph& graph, const PlanOptions& po) {
  std::string statements;
  char line[96];
  for (const FeatureMapPruning& p : po.feature_pruning) {
    std::snprintf(line, sizeof line, " %.17g %.17g %lld\n", p.channels, p.positions, static_cast<long long>(p.block));
    statements += p.value + line;
  }
  char key[17];
  std::snprintf(key, sizeof key, "%016llx",
                static_cast<unsigned long long>(bytes_hash(statements.data(), statements.size())));
  return model_key(graph) + "-pruned-" + key;
}

}  // namespace

std::string pruning_record_path(const Graph& graph, const PlanOptions& po) {
  const std::string dir = machine_tuning_dir();
  if (dir.empty()) return "";
  return dir + "/" + record_file_name(pruned_model_key(graph, po), po.threads, precision_name(po.precision));
}

std::string keep_pruning_verdict(const Graph& graph, const PlanOptions& po, bool winograd_kept, double winograd_ms,
                                 double gemm_ms) {
  TuningRecord r;
  r.default_ms = winograd_ms;
  r.tuned_ms = gemm_ms;
  r.measured_by = kMeasuredByPruningTrial;
  r.pruned_convs = winograd_kept ? "winograd" : "gemm";
  return write_trial_record(std::move(r), pruned_model_key(graph, po), po, pruning_record_path(graph, po));
}

std::optional<bool> recorded_pruned_winograd(const Graph& graph, const PlanOptions& po) {
  const std::string dir = machine_tuning_dir();
  if (dir.empty()) return std::nullopt;
  const std::string key = pruned_model_key(graph, po);
  const std::string path = dir + "/" + record_file_name(key, po.threads, precision_name(po.precision));
  std::error_code ec;
  if (!std::filesystem::exists(path, ec)) return std::nullopt;
  try {
    const TuningRecord r = load_record_file(path);
    if (r.measured_by != kMeasuredByPruningTrial || r.pruned_convs.empty() ||
        !record_mismatch(r, key, po.threads, precision_name(po.precision)).empty())
      return std::nullopt;
    return r.pruned_convs == "winograd";
  } catch (const Error&) {
    return std::nullopt;
  }
}

TuningDecisions model_choices(const Graph& graph, const PlanOptions& po, const PerfModel& model, const std::string& name,
                              double min_gain, const PerfModel* layout_model) {
  TuningDecisions d;
  double gain = 0;
  d.choices = predicted_choices(graph, po, model, 0.03, &gain, layout_model);
  d.from = DecisionSource::model;
  char share[96];
  std::snprintf(share, sizeof share, "predicted to save %.1f%% of the convs' time", 100 * gain);
  if (!d.choices.empty() && gain < min_gain) {
    d.choices.clear();
    d.source = name + ": the rules' plan (" + share + ", under the " + std::to_string(int(100 * min_gain)) +
               "% a model of another CPU is trusted with)";
    return d;
  }
  d.source = name + " (" + std::to_string(d.choices.size()) + " choices, " + share + ")";
  return d;
}

const char* precision_name(Precision p) {
  return p == Precision::bf16 ? "bf16" : p == Precision::int8_weights ? "int8w" : "fp32";
}

TuningDecisions tuning_decisions(const Graph& graph, const PlanOptions& po, const std::string& tuning,
                                 const std::vector<NodeChoice>& choices) {
  if (!choices.empty()) return {choices, "explicit choices", DecisionSource::probe};  // grove tune's measured candidates
  // A tile count the caller fixed (--tiles-per-op) wins over a record's grids.
  if (tuning == "off" || (tuning == "auto" && po.tiles_per_op > 0)) return {};
  const std::string key = tune::model_key(graph), precision = precision_name(po.precision);
  if (tuning != "auto" && tuning != "model" && tuning != "record") {
    tune::TuningRecord record = tune::load_record_file(tuning);
    if (std::string why = tune::record_mismatch(record, key, po.threads, precision); !why.empty())
      throw Error(tuning + ": this tuning record does not fit: " + why);
    std::string source = record_source(record, tuning);  // before the choices move out
    return {std::move(record.choices), std::move(source), DecisionSource::record};
  }
  const std::string path = record_path(graph, po);
  std::error_code ec;
  if (tuning == "model") return model_decisions(graph, po, true);
  if (path.empty() || !std::filesystem::exists(path, ec))
    return tuning == "record" ? TuningDecisions{} : model_decisions(graph, po, false);
  try {
    tune::TuningRecord record = tune::load_record_file(path);
    if (std::string why = tune::record_mismatch(record, key, po.threads, precision); !why.empty()) throw Error(why);
    std::string source = record_source(record, path);  // before the choices move out
    return {std::move(record.choices), std::move(source), DecisionSource::record};
  } catch (const Error& e) {
    return {{}, "tuning record " + path + " ignored: " + e.what(), DecisionSource::record};
  }
}

std::shared_ptr<const Plan> plan_with_tuning(const Graph& graph, PlanOptions po, const std::string& tuning,
                                             const std::vector<NodeChoice>& choices) {
  TuningDecisions d = tuning_decisions(graph, po, tuning, choices);
  po.choices = std::move(d.choices);
  po.choices_source = std::move(d.source);
  po.choices_from = d.from;
  return make_plan(graph, po);
}

}  // namespace grove::tune
