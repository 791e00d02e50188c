// Tile->tile dependencies by interval arithmetic on the producer's regular grid: for each
// consumer tile and input, the tiles of the producer overlapping the needed region along dim
// d are floor(begin / extent) .. floor((end - 1) / extent). O(edges), never per element.
#include <algorithm>

#include "passes/flops.h"
#include "plan/plan_internal.h"

namespace grove::plan_detail {
namespace {

struct Edge {
  int32_t parent;
  int32_t child;
};

// Appends to `parents` every tile of producer p overlapping `need`, a region of p's output
// `value_shape` (output 0 when p has more than one tile).
void overlapping_tiles(const Plan& plan, int32_t p, const Shape& value_shape, const Region& need,
                       std::vector<int32_t>& parents) {
  const TileGraph& tg = plan.tiles;
  size_t rank = value_shape.size();
  Shape lo(rank), hi(rank);
  for (size_t d = 0; d < rank; ++d) {
    lo[d] = std::max<int64_t>(need[d].begin, 0);
    hi[d] = std::min(need[d].end, value_shape[d]);
    if (lo[d] >= hi[d]) return;  // nothing of p is read
  }
  int32_t first = tg.first_tile[p];
  if (tg.tile_count[p] == 1) {
    parents.push_back(first);
    return;
  }
  const Shape& extent = plan.tile_extent[p];
  Shape count(rank);
  for (size_t d = 0; d < rank; ++d) {
    count[d] = (value_shape[d] + extent[d] - 1) / extent[d];
    hi[d] = (hi[d] - 1) / extent[d];
    lo[d] = lo[d] / extent[d];
  }
  Shape index = lo;
  while (true) {
    int64_t linear = 0;
    for (size_t d = 0; d < rank; ++d) linear = linear * count[d] + index[d];
    parents.push_back(first + static_cast<int32_t>(linear));
    size_t d = rank;
    while (d-- > 0) {
      if (++index[d] <= hi[d]) break;
      index[d] = lo[d];
    }
    if (d == static_cast<size_t>(-1)) return;
  }
}

// The input regions a tile reads: the rule's `needs`, or every input whole without a rule.
void needed_regions(const Plan& plan, int32_t n, const NodeInfos& infos, const Region& out_region,
                    std::vector<Region>& need) {
  const Node& node = plan.graph.nodes[n];
  need.assign(node.inputs.size(), Region{});
  const TileRule* rule = plan.rules[n];
  if (!rule) {
    for (size_t i = 0; i < node.inputs.size(); ++i)
      if (infos.in[i].present) need[i] = full_region(infos.in[i].shape);
    return;
  }
  rule->needs(node, infos.in, infos.out, out_region, need);
  for (size_t i = 0; i < need.size(); ++i)
    if (!need[i].empty() && need[i].size() != infos.in[i].shape.size())
      throw Error(node.describe() + ": tile rule needs a region of rank " + std::to_string(need[i].size()) +
                  " of input " + std::to_string(i) + ", which has rank " + std::to_string(infos.in[i].shape.size()));
}

std::vector<Edge> data_edges(const Plan& plan, const std::vector<NodeInfos>& infos) {
  const TileGraph& tg = plan.tiles;
  std::vector<Edge> edges;
  std::vector<Region> need;
  std::vector<int32_t> parents;
  for (int32_t n = 0; n < static_cast<int32_t>(plan.graph.nodes.size()); ++n) {
    const auto& inputs = plan.node_inputs[n];
    for (int32_t t = tg.first_tile[n]; t < tg.first_tile[n] + tg.tile_count[n]; ++t) {
      needed_regions(plan, n, infos[n], tg.region[t], need);
      parents.clear();
      for (size_t i = 0; i < inputs.size(); ++i) {
        if (inputs[i] < 0) continue;
        int32_t p = plan.values[inputs[i]].producer;
        if (p < 0) continue;  // a graph input: there from the start
        // {} means "not read", except for a scalar, whose whole region is {}.
        if (need[i].empty() && !infos[n].in[i].shape.empty()) continue;
        if (plan.tiles.tile_count[p] > 1 && plan.graph.nodes[p].outputs[0] != plan.values[inputs[i]].name)
          throw Error(plan.graph.nodes[p].describe() + ": a tiled op may have one output only");
        overlapping_tiles(plan, p, infos[n].in[i].shape, need[i], parents);
      }
      std::sort(parents.begin(), parents.end());
      parents.erase(std::unique(parents.begin(), parents.end()), parents.end());
      for (int32_t p : parents) edges.push_back({p, t});
      if (static_cast<int64_t>(edges.size()) / kMaxEdgesPerTile > plan.options.max_tiles)
        throw Error(plan.graph.nodes[n].describe() + ": the plan reaches " + std::to_string(edges.size()) +
                    " tile dependencies, over the limit of " + std::to_string(kMaxEdgesPerTile) + " x " +
                    std::to_string(plan.options.max_tiles) + " (fewer with --tiles-per-op; raise it with --max-tiles)");
    }
  }
  return edges;
}

// Every tile of op k -> the barrier after op k -> every tile of op k + 1. Barrier tiles were
// numbered between the ops' tiles, so tile order stays topological.
std::vector<Edge> barrier_edges(const Plan& plan) {
  const TileGraph& tg = plan.tiles;
  std::vector<Edge> edges;
  for (size_t n = 0; n + 1 < plan.graph.nodes.size(); ++n) {
    int32_t barrier = tg.first_tile[n] + tg.tile_count[n];
    for (int32_t t = tg.first_tile[n]; t < barrier; ++t) edges.push_back({t, barrier});
    for (int32_t t = tg.first_tile[n + 1]; t < tg.first_tile[n + 1] + tg.tile_count[n + 1]; ++t)
      edges.push_back({barrier, t});
  }
  return edges;
}

// Work of each tile: its node's FLOPs times its share of the output.
std::vector<double> tile_flops(const Plan& plan) {
  const TileGraph& tg = plan.tiles;
  std::vector<double> flops(tg.size(), 0.0);
  for (int32_t n = 0; n < static_cast<int32_t>(plan.graph.nodes.size()); ++n) {
    double node = static_cast<double>(node_flops(plan.graph, plan.graph.nodes[n]));
    double total = 0;
    for (int32_t t = tg.first_tile[n]; t < tg.first_tile[n] + tg.tile_count[n]; ++t) total += volume(tg.region[t]);
    for (int32_t t = tg.first_tile[n]; t < tg.first_tile[n] + tg.tile_count[n]; ++t)
      flops[t] = total > 0 ? node * static_cast<double>(volume(tg.region[t])) / total : node;
  }
  return flops;
}

}  // namespace

int64_t link_tiles(Plan& plan, const std::vector<NodeInfos>& infos) {
  TileGraph& tg = plan.tiles;
  std::vector<Edge> edges = plan.options.schedule == Schedule::barrier ? barrier_edges(plan) : data_edges(plan, infos);
  int32_t tiles = tg.size();

  // CSR by parent. Edges come grouped by child in increasing order, so each child list is sorted.
  tg.n_parents.assign(tiles, 0);
  tg.child_begin.assign(static_cast<size_t>(tiles) + 1, 0);
  for (const Edge& e : edges) {
    ++tg.child_begin[e.parent + 1];
    ++tg.n_parents[e.child];
  }
  for (int32_t t = 0; t < tiles; ++t) tg.child_begin[t + 1] += tg.child_begin[t];
  tg.children.assign(edges.size(), 0);
  std::vector<int64_t> fill(tg.child_begin.begin(), tg.child_begin.end() - 1);
  for (const Edge& e : edges) tg.children[fill[e.parent]++] = e.child;

  // Longest paths, in tiles and in FLOPs, in one pass: every parent has a smaller index.
  std::vector<double> work = tile_flops(plan);
  std::vector<double> path_in(tiles, 0.0);
  tg.depth.assign(tiles, 0);
  tg.sources.clear();
  double critical = 0;
  for (int32_t t = 0; t < tiles; ++t) {
    if (tg.n_parents[t] == 0) tg.sources.push_back(t);
    double path = path_in[t] + work[t];
    critical = std::max(critical, path);
    for (int64_t c = tg.child_begin[t]; c < tg.child_begin[t + 1]; ++c) {
      int32_t child = tg.children[c];
      if (child <= t) throw Error("planner: tile " + std::to_string(t) + " has an earlier child " + std::to_string(child));
      tg.depth[child] = std::max(tg.depth[child], tg.depth[t] + 1);
      path_in[child] = std::max(path_in[child], path);
    }
  }
  return static_cast<int64_t>(critical + 0.5);
}

}  // namespace grove::plan_detail
