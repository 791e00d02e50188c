#include "tune/tuned_plan.h"

#include <filesystem>
#include <fstream>
#include <iterator>

#include "tune/perf_select.h"
#include "tune/record.h"

namespace grove::tune {
namespace {

// No record: this machine's performance model, where grove tune --fit left one, prices each
// Conv's candidates on a plan of the rules' structure (no weights packed), and the plan takes
// the cheapest. `asked` (tuning "model"): a missing or unreadable model is an Error.
std::shared_ptr<const Plan> plan_with_model(const Graph& graph, PlanOptions po, bool asked) {
  const std::string path = perf_model_path();
  std::error_code ec;
  if (path.empty() || !std::filesystem::exists(path, ec)) {
    if (asked) throw Error("tuning model: this machine has no performance model (" + (path.empty() ? std::string("no cache folder") : path) + "; make one with grove tune --fit)");
    return make_plan(graph, po);
  }
  try {
    std::ifstream f(path, std::ios::binary);
    const std::string text((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
    const PerfModel model = PerfModel::load(text);
    const std::vector<NodeChoice> choices = predicted_choices(graph, po, model);
    po.choices_source = "performance model " + path + " (" + std::to_string(choices.size()) + " choices)";
    po.choices = choices;
    po.choices_from = DecisionSource::model;
    return make_plan(graph, po);
  } catch (const Error& e) {
    if (asked) throw Error(path + ": " + e.what());
    po.choices.clear();
    po.choices_source = "performance model " + path + " ignored: " + e.what();
    return make_plan(graph, po);
  }
}

}  // namespace

const char* precision_name(Precision p) { return p == Precision::bf16 ? "bf16" : "fp32"; }

std::shared_ptr<const Plan> plan_with_tuning(const Graph& graph, PlanOptions po, const std::string& tuning,
                                             const std::vector<NodeChoice>& choices) {
  if (!choices.empty()) {
    po.choices = choices;
    po.choices_source = "explicit choices";
    po.choices_from = DecisionSource::probe;  // grove tune's measured candidates
    return make_plan(graph, po);
  }
  // A tile count the caller fixed (--tiles-per-op) wins over a record's grids.
  if (tuning == "off" || (tuning == "auto" && po.tiles_per_op > 0)) return make_plan(graph, po);
  const std::string key = tune::model_key(graph), precision = precision_name(po.precision);
  if (tuning != "auto" && tuning != "model" && tuning != "record") {
    tune::TuningRecord record = tune::load_record_file(tuning);
    if (std::string why = tune::record_mismatch(record, key, po.threads, precision); !why.empty())
      throw Error(tuning + ": this tuning record does not fit: " + why);
    po.choices_source = "tuning record " + tuning + " (" + std::to_string(record.choices.size()) + " choices)";
    po.choices = std::move(record.choices);
    return make_plan(graph, po);
  }
  const std::string dir = tune::machine_tuning_dir();
  const std::string path = dir.empty() ? "" : dir + "/" + tune::record_file_name(key, po.threads, precision);
  std::error_code ec;
  if (tuning == "model") return plan_with_model(graph, po, true);
  if (path.empty() || !std::filesystem::exists(path, ec))
    return tuning == "record" ? make_plan(graph, po) : plan_with_model(graph, po, false);
  PlanOptions tuned = po;
  try {
    tune::TuningRecord record = tune::load_record_file(path);
    if (std::string why = tune::record_mismatch(record, key, po.threads, precision); !why.empty()) throw Error(why);
    tuned.choices_source = "tuning record " + path + " (" + std::to_string(record.choices.size()) + " choices)";
    tuned.choices = std::move(record.choices);
    return make_plan(graph, tuned);
  } catch (const Error& e) {
    po.choices_source = "tuning record " + path + " ignored: " + e.what();
    return make_plan(graph, po);
  }
}

}  // namespace grove::tune
