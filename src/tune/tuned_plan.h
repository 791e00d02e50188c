#pragma once
// Planning with a tuning record (docs/tuning.md): what sessions and grove plan call instead of
// make_plan.
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "grove/tuning.h"
#include "plan/plan.h"
#include "tune/perf_model.h"

namespace grove::tune {

const char* precision_name(Precision p);

// Per-node choices that override the rules, where they came from (for reports), and whose
// they are (the nodes' decisions record it).
struct TuningDecisions {
  std::vector<NodeChoice> choices;  // empty: plan by the rules
  std::string source;               // "" when none were looked for
  DecisionSource from = DecisionSource::record;
};

// The per-node choices asked for: `choices` when there are any; none when `tuning` is "off";
// the record file `tuning` names, which must fit (an Error saying why not); for "auto", the
// record grove tune left for this model, machine, thread count and precision, skipped with a
// note in `source` when it is unreadable or does not fit, and without one the choices this
// machine's performance model prices lowest, or without that the model shipped for this ISA
// (none for an ISA without one); for "record", the record or none; for "model", the model's
// choices, whatever records there are.
TuningDecisions tuning_decisions(const Graph& graph, const PlanOptions& po, const std::string& tuning,
                                 const std::vector<NodeChoice>& choices);

// Where the record for `graph` planned with `po` is kept in this machine's folder; "" when
// there is no cache folder.
std::string record_path(const Graph& graph, const PlanOptions& po);

// Writes a plan trial's verdict (runtime/plan_trial.h) as the record for `graph` at `po`, so
// that every later plan of it on this machine takes the kept plan without a trial: the
// performance model's `choices` when `model_kept`, else none (the rules). Returns "" or why
// it could not be written (the verdict then holds for this process only).
std::string keep_trial_verdict(const Graph& graph, const PlanOptions& po, const std::vector<NodeChoice>& choices,
                               bool model_kept, double model_ms, double rules_ms);

// A pruning trial's record (runtime/plan_trial.h): for `graph` pruned as po.feature_pruning
// says, at po's threads and precision, in a file of its own beside the model's record ("" when
// there is no cache folder). The record's model key covers the pruning statements too.
std::string pruning_record_path(const Graph& graph, const PlanOptions& po);

// Writes a pruning trial's verdict there. Returns "" or why it could not be written.
std::string keep_pruning_verdict(const Graph& graph, const PlanOptions& po, bool winograd_kept, double winograd_ms,
                                 double gemm_ms);

// What the pruning record says: true where the trial kept pruned convs on Winograd, false
// where it kept the pruned GEMM; nothing where there is no record, or none that fits
// (unreadable, of another machine: the trial then runs again and replaces it).
std::optional<bool> recorded_pruned_winograd(const Graph& graph, const PlanOptions& po);

// The choices `model` prices lowest (source `name`), with layout changes priced by
// `layout_model` where given, or none where its plan is predicted to save less than
// `min_gain` of the priced convs' time (the source then says so).
TuningDecisions model_choices(const Graph& graph, const PlanOptions& po, const PerfModel& model, const std::string& name,
                              double min_gain, const PerfModel* layout_model = nullptr);

// make_plan with tuning_decisions' choices.
std::shared_ptr<const Plan> plan_with_tuning(const Graph& graph, PlanOptions po, const std::string& tuning,
                                             const std::vector<NodeChoice>& choices);

}  // namespace grove::tune
