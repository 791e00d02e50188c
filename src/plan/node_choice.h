#pragma once
// A per-node choice that overrides the planner's hand rules: the Conv primitive and the tile
// grid. A tuning record (src/tune) holds one per node it measured; make_plan applies them and
// refuses, naming the node, one that does not fit the node (a record made for another model
// must never reach the kernels).
#include <string>
#include <vector>

#include "graph/graph.h"

namespace grove {

struct NodeChoice {
  std::string node;       // the node's name in the planned (fused) graph
  std::string primitive;  // Conv only: "gemm" or "winograd"; empty keeps the rule's
  Shape extent;           // the tile extent per dim of output 0 (0: uncut); empty keeps the rule's
};

// Applies the primitives of `choices` to the nodes they name (graph/choice_attrs.h). Throws
// Error for a name the graph lacks, a primitive the node cannot take, or a node named twice.
void apply_primitive_choices(Graph& graph, const std::vector<NodeChoice>& choices);

// Checks an extent against the block sizes the node's tile rule allows (TileRule::cuttable):
// one entry per dim, each 0 or the whole dim (uncut) or a positive multiple of the block where
// the dim may be cut. Throws Error naming the node otherwise. Returns it with every uncut dim
// as the whole dim, as the planner's own grids have it.
Shape fit_choice_extent(const Node& node, const Shape& out_shape, const std::vector<int64_t>& blocks,
                         const Shape& extent);

}  // namespace grove
