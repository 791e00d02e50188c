#pragma once
// Per-node choices (grove/tuning.h: the Conv primitive and the tile grid) in the plan: a
// tuning record (src/tune) holds one per node it measured; make_plan applies them and refuses,
// naming the node, one that does not fit the node (a record made for another model must never
// reach the kernels).
#include <string>
#include <vector>

#include "graph/graph.h"
#include "grove/tuning.h"

namespace grove {

// Applies the primitives of `choices` to the nodes they name (Decisions::conv, with `source`
// as where they came from). Throws Error for a name the graph lacks, a primitive the node
// cannot take, or a node named twice.
void apply_primitive_choices(Graph& graph, const std::vector<NodeChoice>& choices, DecisionSource source);
// Marks one node, unchecked (for trying a primitive on a copy of a node).
void apply_primitive_choices_to_node(Node& node, ConvPrimitive primitive, DecisionSource source);
// The primitive a NodeChoice names ("" is unset); throws Error naming `node` for an unknown one.
ConvPrimitive primitive_named(const Node& node, const std::string& name);

// Checks an extent against the block sizes the node's tile rule allows (TileRule::cuttable):
// one entry per dim, each 0 or the whole dim (uncut) or a positive multiple of the block where
// the dim may be cut. Throws Error naming the node otherwise. Returns it with every uncut dim
// as the whole dim, as the planner's own grids have it.
Shape fit_choice_extent(const Node& node, const Shape& out_shape, const std::vector<int64_t>& blocks,
                         const Shape& extent);

}  // namespace grove
