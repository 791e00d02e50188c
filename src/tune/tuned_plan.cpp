#include "tune/tuned_plan.h"

#include <filesystem>
#include <fstream>
#include <iterator>

#include "tune/perf_select.h"
#include "tune/record.h"

namespace grove::tune {
namespace {

// The choices this machine's performance model, where grove tune --fit left one, prices
// lowest on a plan of the rules' structure (no weights packed). `asked` (tuning "model"): a
// missing or unreadable model is an Error; otherwise the rules, with a note.
TuningDecisions model_decisions(const Graph& graph, const PlanOptions& po, bool asked) {
  const std::string path = perf_model_path();
  std::error_code ec;
  if (path.empty() || !std::filesystem::exists(path, ec)) {
    if (asked) throw Error("tuning model: this machine has no performance model (" + (path.empty() ? std::string("no cache folder") : path) + "; make one with grove tune --fit)");
    return {};
  }
  try {
    std::ifstream f(path, std::ios::binary);
    const std::string text((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
    const PerfModel model = PerfModel::load(text);
    TuningDecisions d;
    d.choices = predicted_choices(graph, po, model);
    d.source = "performance model " + path + " (" + std::to_string(d.choices.size()) + " choices)";
    d.from = DecisionSource::model;
    return d;
  } catch (const Error& e) {
    if (asked) throw Error(path + ": " + e.what());
    return {{}, "performance model " + path + " ignored: " + e.what(), DecisionSource::record};
  }
}

}  // namespace

const char* precision_name(Precision p) { return p == Precision::bf16 ? "bf16" : "fp32"; }

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
    const std::string source = "tuning record " + tuning + " (" + std::to_string(record.choices.size()) + " choices)";
    return {std::move(record.choices), source, DecisionSource::record};
  }
  const std::string dir = tune::machine_tuning_dir();
  const std::string path = dir.empty() ? "" : dir + "/" + tune::record_file_name(key, po.threads, precision);
  std::error_code ec;
  if (tuning == "model") return model_decisions(graph, po, true);
  if (path.empty() || !std::filesystem::exists(path, ec))
    return tuning == "record" ? TuningDecisions{} : model_decisions(graph, po, false);
  try {
    tune::TuningRecord record = tune::load_record_file(path);
    if (std::string why = tune::record_mismatch(record, key, po.threads, precision); !why.empty()) throw Error(why);
    const std::string source = "tuning record " + path + " (" + std::to_string(record.choices.size()) + " choices)";
    return {std::move(record.choices), source, DecisionSource::record};
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
