#pragma once
// What the simulator needs of each tile of a plan: its time alone on one core, measured, and
// the bytes it moves, counted.
#include <vector>

#include "grove/engine.h"
#include "grove/session.h"
#include "plan/plan.h"

namespace grove {

// Runs `session` `runs` times traced and returns each tile's median time in ns. The session's
// engine must have one thread, so every tile runs alone; the session may be planned for more
// cores (SessionOptions::plan_threads). Throws Error for a model that runs in segments
// (control flow) or on the reference executor: it has no single TileGraph to time.
std::vector<double> time_tiles_alone(Engine& engine, Session& session, const TensorMap& inputs, int runs);

// Bytes each tile reads and writes if every byte moves once: its share (by output elements)
// of its node's activations in and out and of the node's weights.
std::vector<double> tile_traffic_bytes(const Plan& plan);

// Bytes of other tiles' output each tile reads: its share of its node's activation inputs
// (initializers, which every core reads from the same packed copy, not counted).
std::vector<double> tile_input_bytes(const Plan& plan);

}  // namespace grove
