#pragma once
// The planner (the paper's APU): choose how each op's output is cut, derive tile->tile
// dependencies analytically from each op's `needs`, and plan per-run buffers.
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "graph/graph.h"
#include "plan/tile_graph.h"

namespace grove {

enum class Schedule { aspen, barrier };

struct PlanOptions {
  int threads = 1;              // the cores the tiles are cut for
  int tiles_per_op = 0;         // target tiles per op; 0 chooses by rule (enough for every core, each big enough)
  int64_t min_tile_flops = 0;   // 0 chooses by rule
  Schedule schedule = Schedule::aspen;
};

// Per value that a run computes (everything but initializers): where consumers find it, and
// when its buffer can be released.
struct PlannedValue {
  std::string name;
  DType dtype = DType::undefined;
  Shape shape;
  int32_t producer = -1;        // node index; -1 for a graph input
  int32_t consumer_tiles = 0;   // tiles that read it: the buffer is released after the last one
  bool is_output = false;       // graph outputs are never released
};

struct Plan {
  Graph graph;                  // bound and optimised; owns the weights
  PlanOptions options;
  TileGraph tiles;              // with barrier tiles between ops when options.schedule == barrier
  std::vector<PlannedValue> values;
  // Per node: the value index of each input (-1: an initializer or a missing optional input)
  // and of each output (-1: an unnamed optional output).
  std::vector<std::vector<int32_t>> node_inputs;
  std::vector<std::vector<int32_t>> node_outputs;
  int64_t critical_path_flops = 0;
};

// Throws Error (naming node and op) when the graph cannot be planned.
std::shared_ptr<const Plan> make_plan(const Graph& bound, const PlanOptions& options);

}  // namespace grove
