#pragma once
// The TileGraph: every op's output cut into tiles, with exact tile->tile dependencies.
// Immutable once built and shared by every run of a model. Flat arrays (struct of arrays);
// children in CSR form. Built by make_plan() (plan/plan.h).
#include <cstdint>
#include <vector>

#include "graph/region.h"

namespace grove {

struct TileGraph {
  // Per tile.
  std::vector<int32_t> node;      // index into Plan::graph.nodes; -1 for a barrier tile (no work)
  std::vector<Region> region;     // the region of the node's output 0 this tile computes
  std::vector<int32_t> n_parents; // tiles that must finish first
  std::vector<int32_t> depth;     // longest path from a source, in tiles: the pool's priority
  std::vector<int64_t> child_begin;  // children of t: children[child_begin[t] .. child_begin[t + 1])
  std::vector<int32_t> children;
  std::vector<int32_t> sources;      // tiles with no parents, in order
  std::vector<uint16_t> place;       // DagView::place: the tile's place in its op's output

  // Per node of the graph: its tiles are first_tile[n] .. first_tile[n] + tile_count[n] - 1.
  std::vector<int32_t> first_tile;
  std::vector<int32_t> tile_count;

  int32_t size() const { return static_cast<int32_t>(node.size()); }
  int64_t edge_count() const { return static_cast<int64_t>(children.size()); }
};

}  // namespace grove
