#pragma once
// How much a model may make grove allocate. A model file is untrusted input: its dims,
// initializer sizes and graph size are checked against these before anything is allocated,
// so a small hostile file gives an Error instead of exhausting memory. Passed down by value
// from the caller (Model::load, the CLI's --max-memory, --max-nodes, --max-tiles); no global
// state. docs/security.md lists every check.
#include <cstdint>

namespace grove {

inline constexpr int64_t kDefaultMaxTiles = 4'000'000;
// The planner's dependency edges may number this many times max_tiles.
inline constexpr int64_t kMaxEdgesPerTile = 16;

struct Limits {
  // Bytes of weights plus every activation tensor the bound graph declares (an upper bound
  // on a run's memory: the runtime reuses buffers). 0: half the physical memory
  // (default_max_memory).
  int64_t max_memory = 0;
  // Nodes in the model, those of nested subgraphs included.
  int64_t max_nodes = 200'000;
  // Initializers in the model (and Constant nodes' tensors), those of nested subgraphs
  // included: each costs a tensor and a map entry even when it holds nothing.
  int64_t max_initializers = 1'000'000;
  // Nesting of subgraphs (If/Loop/Scan bodies) in the model file.
  int max_subgraph_depth = 16;
  // The planner's TileGraph: tiles, and kMaxEdgesPerTile times as many dependency edges
  // (its tables are not charged to max_memory; this bounds them instead).
  int64_t max_tiles = kDefaultMaxTiles;
  // Iterations of one Loop node in one run: a hostile model's endless loop (a trip count
  // near 2^63 and a condition that stays true) becomes an Error instead of a hung request.
  int64_t max_loop_iterations = 10'000'000;

  int64_t memory_limit() const;  // max_memory, with 0 resolved to the default
};

// The default for max_memory: half the machine's physical memory.
int64_t default_max_memory();

}  // namespace grove
