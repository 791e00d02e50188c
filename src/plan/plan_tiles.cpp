// How an op's output is cut: a regular grid, sized for the cores and a minimum work per tile.
#include <algorithm>

#include "plan/plan_internal.h"

namespace grove::plan_detail {
namespace {

int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

// Dims in the order they are cut. Rows (dim r-2: image rows of NCHW, tokens of [B, S, D],
// query rows of attention) first: a tile then reads only nearby rows of its producers, so
// dependency chains stay narrow and cores can run ahead across layers (the paper's
// column-wise insight, with positions as columns). Then the outer dims (channels of NCHW,
// heads, batch), and the last dim (columns) last, because cutting it makes every consumer
// that reduces over it need all of them.
std::vector<size_t> cut_order(size_t rank) {
  std::vector<size_t> order;
  if (rank == 0) return order;
  if (rank == 1) return {0};
  for (size_t d = rank - 1; d-- > 0;) order.push_back(d);
  order.push_back(rank - 1);
  return order;
}

}  // namespace

Shape choose_tile_extent(const Node& node, const NodeInfos& infos, const TileRule* rule, const PlanOptions& options,
                         int64_t work, int64_t producer_tiles) {
  if (infos.out.empty() || node.outputs.empty() || node.outputs[0].empty()) return {};
  const Shape& shape = infos.out[0].shape;
  Shape extent = shape;
  if (!rule) return extent;

  std::vector<int64_t> blocks = rule->cuttable(node, infos.in, infos.out);
  if (blocks.size() != shape.size())
    throw Error(node.describe() + ": tile rule gives " + std::to_string(blocks.size()) + " block sizes for an output of rank " +
                std::to_string(shape.size()));
  for (int64_t b : blocks)
    if (b < 0) throw Error(node.describe() + ": tile rule gives a negative block size");

  int64_t target = options.tiles_per_op > 0
                       ? options.tiles_per_op
                       : std::min<int64_t>(int64_t{kAutoTilesPerThread} * std::max(1, options.threads), kMaxAutoTiles);
  int64_t min_flops = options.min_tile_flops > 0 ? options.min_tile_flops
                      : options.tiles_per_op > 0 ? 0
                                                 : kDefaultMinTileFlops;
  if (min_flops > 0) {
    // A cheap op (an activation, a residual add) is cut no coarser than its producers, so it
    // does not join their tiles into one and stall the flow across layers like a barrier.
    int64_t enough_work = std::max<int64_t>(1, work / min_flops);
    target = std::min(target, options.tiles_per_op > 0 ? enough_work : std::max(enough_work, producer_tiles));
  }

  int64_t remaining = target;
  for (size_t d : cut_order(shape.size())) {
    if (remaining <= 1) break;
    if (blocks[d] == 0 || shape[d] <= blocks[d]) continue;
    int64_t pieces = std::min(remaining, ceil_div(shape[d], blocks[d]));
    int64_t size = ceil_div(ceil_div(shape[d], pieces), blocks[d]) * blocks[d];
    extent[d] = size;
    remaining = ceil_div(remaining, ceil_div(shape[d], size));
  }
  return extent;
}

void append_tiles(int32_t node, const Shape& out_shape, const Shape& extent, TileGraph& tg) {
  size_t rank = out_shape.size();
  Shape count(rank), index(rank, 0);
  int64_t total = 1;
  for (size_t d = 0; d < rank; ++d) {
    count[d] = extent[d] > 0 ? ceil_div(out_shape[d], extent[d]) : 1;
    total = checked_mul(total, count[d]);  // bounded by the tile target; checked all the same
  }
  for (int64_t t = 0; t < total; ++t) {
    Region r(rank);
    for (size_t d = 0; d < rank; ++d) {
      r[d].begin = index[d] * extent[d];
      r[d].end = std::min(out_shape[d], r[d].begin + extent[d]);
    }
    tg.node.push_back(node);
    tg.region.push_back(std::move(r));
    for (size_t d = rank; d-- > 0;) {  // row-major: the last dim varies fastest
      if (++index[d] < count[d]) break;
      index[d] = 0;
    }
  }
}

}  // namespace grove::plan_detail
