#pragma once
// A discrete-event simulation of the engine's schedule on N virtual cores (grove simulate,
// docs/scaling.md). It runs the engine's policy over a real TileGraph: sources go
// round-robin over the rows; a worker that finishes a tile follows the first child that
// became ready and pushes the others to its own row; with nothing to follow it pops its own
// row first (lowest priority column, oldest first), then steals from the next rows. The
// barrier schedule is the same policy over the plan's barrier tiles.
//
// Two costs that grow with the core count are modelled, each from a measurement:
// - memory bandwidth shared by all cores: while the summed demand of the running tiles
//   (bytes over time alone) exceeds the bandwidth, they all slow down by the same factor;
// - the ready pool: a push or pop costs its measured time, stretched by `contention` per
//   idle worker (idle workers scan the queues and pull their cache lines away).
#include <cstdint>
#include <vector>

#include "grove/priority_policy.h"
#include "plan/tile_graph.h"

namespace grove {

struct SimMachine {
  int cores = 1;
  double bandwidth_bytes_per_ns = 0;  // what all cores together can move; 0: unlimited
  double push_ns = 0;      // one batch of pushed children
  double pop_ns = 0;       // one pop with no other worker at the pool
  double contention = 0;   // a pool operation grows by this fraction per idle worker
  double wake_ns = 0;      // a parked worker until it runs
  double spin_ns = 0;      // an idle worker spins this long before it parks
  // A tile whose parents ran on other cores reads their output across the chip: this many ns
  // per byte of its input, times the share of its parents (through barrier tiles: of their
  // parents) that ran elsewhere.
  double cross_ns_per_byte = 0;
  PriorityPolicy priority;
  // Uneven cores: cores [0, slow_cores) take slow_factor times as long over each tile (and
  // ask for proportionally less bandwidth), as EngineDebugOptions::slow_worker (runtime/engine.h) does to worker 0.
  int slow_cores = 0;
  double slow_factor = 1.0;
};

struct SimResult {
  double makespan_ns = 0;
  double tile_ns = 0;   // summed over cores: running tiles, bandwidth stretch included
  double pool_ns = 0;   // summed over cores: pushes, pops, wake-ups
  double stretch_ns = 0;  // of tile_ns: what shared bandwidth added
  double cross_ns = 0;    // of tile_ns: reading other cores' output
  int64_t follows = 0, pops = 0, steals = 0;
  int cores = 1;
  double utilisation() const { return makespan_ns > 0 ? tile_ns / (makespan_ns * cores) : 0; }
};

// `tile_ns[t]`: tile t's time alone on one core; `tile_bytes[t]`: the bytes it moves (may be
// empty when the bandwidth is unlimited); `input_bytes[t]`: the bytes of other tiles' output it
// reads (may be empty: no cross-core cost). Throws Error when a tile never becomes ready or
// the arrays do not match the graph.
SimResult simulate(const TileGraph& graph, const std::vector<double>& tile_ns, const std::vector<double>& tile_bytes,
                   const SimMachine& machine, const std::vector<double>& input_bytes = {});

}  // namespace grove
