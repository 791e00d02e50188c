#pragma once
// Planning with a tuning record (docs/tuning.md): what sessions and grove plan call instead of
// make_plan.
#include <memory>
#include <string>
#include <vector>

#include "grove/tuning.h"
#include "plan/plan.h"

namespace grove::tune {

const char* precision_name(Precision p);

// The plan with the per-node choices asked for: `choices` when there are any; else by the
// rules when `tuning` is "off"; the record file `tuning` names, which must fit (an Error saying
// why not); for "auto", the record grove tune left for this model, machine, thread count and
// precision, skipped with a note in the plan's choices_source when it is unreadable or does
// not fit, and without one the choices this machine's performance model prices lowest (the
// rules without a model); for "record", the record or the rules; for "model", the model's
// choices, whatever records there are.
std::shared_ptr<const Plan> plan_with_tuning(const Graph& graph, PlanOptions po, const std::string& tuning,
                                             const std::vector<NodeChoice>& choices);

}  // namespace grove::tune
