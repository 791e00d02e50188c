#pragma once
// grove tune's measurements (docs/tuning.md): each Conv's candidate primitives and tile grids
// timed inside the model, on this machine's engine, and the choices that measured best.
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "grove/tuning.h"
#include "runtime/session.h"
#include "tune/conv_candidates.h"

namespace grove::profile {

struct TuneCandidate {
  std::string primitive;  // "gemm" or "winograd" (NCHW, as the model writes the conv)
  Shape extent;
  int64_t tiles = 1;
  double us = 0;          // median tile time of the node per run, this candidate in place (0: not measured)
  double max_us = 0;      // median time of its slowest tile
};

struct TunedNode {
  std::string name;       // plans differ by candidate (Transposes come and go): nodes are found by name
  bool conv = false;      // a Conv (else a MatMul or Gemm grid)
  tune::ConvConfig config;  // a Conv's layer configuration, as the model writes it (NCHW)
  std::string rule_primitive;  // "gemm", "winograd", or "nhwc" / "winograd_nhwc" where the rules run it channels-last
  Shape rule_extent;
  double rule_us = 0;  // measured as the rules plan it
  double rule_max_us = 0;
  int64_t rule_tiles = 1;
  std::vector<TuneCandidate> candidates;
  int best = -1;       // index into candidates, or -1: the rule's choice stays
};

struct ProfileSettings {
  int runs = 10;      // traced runs per round
  int passes = 2;     // times every round is repeated, in turn (medians over all their runs)
  int warmup = 2;
  double keep_share = 0.03;  // a candidate must beat the rule's time by this share to replace it
  bool progress = true;      // a line per round on stderr
  // Called before each traced run; it may throw to stop the profile (a background
  // calibration gives way to a request so).
  std::function<void()> before_run;
};

// Times every candidate of every Conv (and, past one thread, every grid of every MatMul and
// Gemm with constant weights) of the model as written (NCHW: a conv the rules run
// channels-last may be chosen back to either NCHW primitive) (rounds of the model, each with one
// candidate per node in place), plus the plan the rules make. `make_session` builds a session
// of the same model with the given explicit choices (none: the rules).
std::vector<TunedNode> profile_nodes(
    Engine& engine, const std::function<std::unique_ptr<Session>(const std::vector<NodeChoice>&)>& make_session,
    const TensorMap& inputs, const ShapeMap& shapes, const ProfileSettings& settings);

// The median, over settings.runs traced runs after settings.warmup, of each node's summed tile
// time in `plan` (the plan `session` runs), in microseconds.
std::vector<double> node_median_us(Engine& engine, Session& session, const Plan& plan, const TensorMap& inputs,
                                   const ProfileSettings& settings);

// What a node's grid is taken to cost the model: its tiles' time spread over the threads,
// plus its slowest tile, which the next layers wait on (the planner's tail-aware price,
// plan_tiles.cpp, with measured times).
double grid_cost(double total_us, double max_us, int threads);

// Per node: the candidate whose grid_cost beats the rule's by settings.keep_share (best = -1
// where none does). With `same_tiles`, only candidates with as many tiles as the rule's grid:
// they leave the model's parallel structure as it was.
void choose_best(std::vector<TunedNode>& nodes, int threads, double keep_share, bool same_tiles);

// The choices of the nodes whose best candidate beat the rule.
std::vector<NodeChoice> best_choices(const std::vector<TunedNode>& nodes, std::vector<double>* node_us,
                                     std::vector<double>* rule_us);

// Appends each Conv's measured candidates to the dataset CSV (the performance model's training
// data, grove tune --fit), with a header line when the file is new.
void write_dataset(const std::string& path, const std::vector<TunedNode>& nodes, int threads);

}  // namespace grove::profile
