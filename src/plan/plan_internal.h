#pragma once
// Steps of make_plan() shared between the planner's files; not part of the interface.
#include <cstdint>
#include <vector>

#include "plan/plan.h"

namespace grove::plan_detail {

// Input and output infos of a node as TileRules see them (constant inputs carry their data).
struct NodeInfos {
  std::vector<ValueInfo> in;
  std::vector<ValueInfo> out;
};
NodeInfos node_infos(const Graph& graph, const Node& node);

// The tile extent per dim of output 0 for a node with `rule`, aiming at the tile count the
// options ask for; the full shape (one tile) when rule is nullptr. `work` is its FLOPs (at
// least one per output element); `producer_tiles` the most tiles of a producer of its inputs;
// `paths` > 1 when the node is on a chain of that many independent paths (TileRule::paths):
// dim 1 is then cut first, in whole paths.
Shape choose_tile_extent(const Node& node, const NodeInfos& infos, const TileRule* rule, const PlanOptions& options,
                         int64_t work, int64_t producer_tiles, int64_t paths = 0);

// Marks the values that are views of their input's buffer (PlannedValue::view_of); their
// nodes get one no-work tile (plan_views.cpp says why).
void mark_views(Plan& plan);

// Marks the inputs of channels-last Concats that their producers can write straight into the
// Concat's buffer (PlannedValue::slice_of), and tells those producers where (plan_views.cpp).
void mark_concat_slices(Plan& plan, TileRuleLookup lookup);

// Appends node's tiles (row-major over its grid) to tg.node / tg.region.
void append_tiles(int32_t node, const Shape& out_shape, const Shape& extent, TileGraph& tg);

// Fills tg.place (DagView::place) from each tile's region: the middle of its first cut dim as
// a fraction of 65536, so row tiles of consecutive ops over the same rows get the same place
// whatever their counts; 0 for a whole op or a barrier tile.
void fill_places(const Plan& plan, TileGraph& tg);

// Fills tg's n_parents, CSR children, depth and sources, and returns the critical-path FLOPs.
// Data edges from `needs` for Schedule::aspen; a barrier chain for Schedule::barrier.
int64_t link_tiles(Plan& plan, const std::vector<NodeInfos>& infos);

}  // namespace grove::plan_detail
