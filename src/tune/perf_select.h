#pragma once
// The performance model at work (paper 003): a profile of measured candidates (grove tune
// --dataset) becomes its training set, and at plan time, for a model with no tuning record, it
// prices every candidate of every Conv so the plan takes the cheapest without profiling.
#include <string>
#include <vector>

#include "tune/conv_candidates.h"
#include "tune/perf_model.h"

namespace grove::tune {

struct ProfileRow {
  std::string machine;
  int threads = 1;
  ConvConfig config;
  std::string primitive;
  Shape extent;
  int64_t tiles = 1;
  double us = 0;  // the node's tile time per run
};

// Reads grove tune's CSV (its header first); Error naming the line for anything else.
std::vector<ProfileRow> read_profile_csv(const std::string& path);

// The primitives of model_primitives() that some row measured, in that order: the outputs of
// a model trained on the rows.
std::vector<std::string> measured_primitives(const std::vector<ProfileRow>& rows);

// One sample per (configuration, grid, threads): the time of each of `primitives` measured
// with exactly that grid (a channels-last grid as its NCHW twin, nchw_extent), NaN (masked)
// for the others.
std::vector<PerfSample> samples_from_rows(const std::vector<ProfileRow>& rows, const std::vector<std::string>& primitives);

// What each output of the model prices: its output names, or for a version 1 file the two
// primitives it could price then. Error for a version 1 file of another width.
std::vector<std::string> priced_primitives(const PerfModel& model);

// Where this machine's performance model lives (machine_tuning_dir()), "" without a cache.
std::string perf_model_path();
// Where this machine's layout model lives (tune/layout_model.h), "" without a cache.
std::string layout_model_path();

// What grid_cost charges a node for a grid: its tiles' time over the threads plus one tile's
// time (the tiles taken as equal), which the next layers wait on.
double predicted_cost(double total_us, int64_t tiles, int threads);

// The model's selection for the convs of a graph (paper 003, section 3.3), planned with
// `options` (structure only): each conv the model prices gets a choice among the rule's own
// and the candidates with the rule's tile count (on the graph as written, every conv NCHW;
// past one thread, only those in the rule's layout);
// the convs it cannot price keep the rule's layout. Changing layout between linked convs
// costs a Transpose (layout_links), priced from the plan's transpose_flops at the rate the
// model predicts for this model's convs; PBQP picks the cheapest whole assignment. A
// candidate must beat the rule by its and the rule's prediction errors together (the model's
// output_errors), and by at least `keep_share`. Returns the choices that differ from
// the rules, and those that keep the solution's layout where the rules would change it;
// `plan_gain`, when given, gets the share of the priced convs' predicted time (Transposes
// between them included) the solution saves over the rules' plan. With a `layout_model`
// (tune/layout_model.h) each layout change costs what it predicts for the value's shape and
// direction, and every layout is offered at every thread count; without one, a change costs
// the plan's price per moved element, and past one thread only the rule's layout is offered.
std::vector<NodeChoice> predicted_choices(const Graph& graph, const PlanOptions& options, const PerfModel& model,
                                          double keep_share = 0.03, double* plan_gain = nullptr,
                                          const PerfModel* layout_model = nullptr);

}  // namespace grove::tune
