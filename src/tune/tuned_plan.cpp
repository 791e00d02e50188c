#include "tune/tuned_plan.h"

#include <filesystem>

#include "tune/record.h"

namespace grove::tune {

const char* precision_name(Precision p) { return p == Precision::bf16 ? "bf16" : "fp32"; }

std::shared_ptr<const Plan> plan_with_tuning(const Graph& graph, PlanOptions po, const std::string& tuning,
                                             const std::vector<NodeChoice>& choices) {
  if (!choices.empty()) {
    po.choices = choices;
    po.choices_source = "explicit choices";
    return make_plan(graph, po);
  }
  // A tile count the caller fixed (--tiles-per-op) wins over a record's grids.
  if (tuning == "off" || (tuning == "auto" && po.tiles_per_op > 0)) return make_plan(graph, po);
  const std::string key = tune::model_key(graph), precision = precision_name(po.precision);
  if (tuning != "auto") {
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
  if (path.empty() || !std::filesystem::exists(path, ec)) return make_plan(graph, po);
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
