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

// One sample per (configuration, grid, threads): the time of each of model_primitives()
// measured with exactly that grid, NaN (masked) for the others.
std::vector<PerfSample> samples_from_rows(const std::vector<ProfileRow>& rows);

// Where this machine's performance model lives (machine_tuning_dir()), "" without a cache.
std::string perf_model_path();

// What grid_cost charges a node for a grid: its tiles' time over the threads plus one tile's
// time (the tiles taken as equal), which the next layers wait on.
double predicted_cost(double total_us, int64_t tiles, int threads);

// For each Conv of `rules` (a plan made by the hand rules): the candidate with the rule's tile
// count that the model prices lowest, where it beats the model's price of the rule's own
// choice by `keep_share`.
std::vector<NodeChoice> predicted_choices(const Plan& rules, const PerfModel& model, double keep_share = 0.03);

}  // namespace grove::tune
