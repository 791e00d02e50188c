// How an op's output is cut: a regular grid, sized for the cores and a minimum work per tile.
#include <algorithm>
#include <array>
#include <numeric>

#include "plan/plan_internal.h"

namespace grove::plan_detail {
namespace {

int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

// A fixed-rule grid whose tiles repeat more than this share of the op's work is priced
// against coarser grids even when its waves are full.
constexpr double kRepeatedShare = 0.02;

// Four cache lines: the shortest contiguous run a cut may leave a tile before other dims are
// cut first (grid_extent_in_order).
constexpr int64_t kMinRunBytes = 256;
// FLOPs per output element up to which an op counts as moving data rather than computing.
constexpr int64_t kMovingOpFlopsPerElement = 8;

// Dims in the order they are cut. Rows (dim r-2: image rows of NCHW, tokens of [B, S, D],
// query rows of attention) first: a tile then reads only nearby rows of its producers, so
// dependency chains stay narrow and cores can run ahead across layers (the paper's
// column-wise insight, with positions as columns). Then the outer dims (channels of NCHW,
// heads, batch), and the last dim (columns) last, because cutting it makes every consumer
// that reduces over it need all of them.
// An op on a chain of independent paths (paths_first) is cut along dim 1 first: each tile
// then follows its own paths from the op before, with no edges across them (DCCNN).
// Otherwise, where the batch (dim 0) splits evenly over the threads (images_first), it is
// cut first: each core then takes whole images through the network, a tile reads only what
// the same core wrote for the same images, and no image's rows bounce between cores (up to
// a third faster at batch 2-8 on 2 threads; docs/architecture.md has the measurements). A
// batch that does not split evenly is cut by rows first: one core would get more images.
std::vector<size_t> cut_order(size_t rank, bool paths_first, bool images_first) {
  std::vector<size_t> order;
  if (rank == 0) return order;
  if (rank == 1) return {0};
  const size_t first = paths_first ? 1 : images_first ? 0 : rank;  // rank: none
  if (first < rank) order.push_back(first);
  for (size_t d = rank - 1; d-- > 0;)
    if (d != first) order.push_back(d);
  order.push_back(rank - 1);
  return order;
}

// The grid of about `target` tiles: dims cut in `order`, each into whole blocks. A cut that
// would leave a tile runs of fewer than `min_run` contiguous elements (its piece of the dim
// times everything inside it) is made only after every other dim: on a small plane, row
// pieces of each channel share cache lines with the next tile's, and two cores writing one
// line take turns owning it.
Shape grid_extent_in_order(const Shape& shape, const std::vector<int64_t>& blocks, int64_t target,
                           const std::vector<size_t>& order, int64_t min_run) {
  Shape extent = shape;
  int64_t remaining = target;
  std::vector<size_t> deferred;
  auto cut = [&](size_t d, bool may_defer) {
    if (d >= shape.size() || remaining <= 1) return;
    if (blocks[d] == 0 || shape[d] <= blocks[d]) return;
    int64_t pieces = std::min(remaining, ceil_div(shape[d], blocks[d]));
    int64_t size = ceil_div(ceil_div(shape[d], pieces), blocks[d]) * blocks[d];
    if (may_defer && min_run > 0) {
      int64_t inner = 1;
      for (size_t i = d + 1; i < shape.size(); ++i) inner = checked_mul(inner, shape[i]);
      if (checked_mul(size, inner) < min_run) {
        deferred.push_back(d);
        return;
      }
    }
    extent[d] = size;
    remaining = ceil_div(remaining, ceil_div(shape[d], size));
  };
  for (size_t d : order) cut(d, true);
  for (size_t d : deferred) cut(d, false);
  return extent;
}

Shape grid_extent(const Shape& shape, const std::vector<int64_t>& blocks, int64_t target, bool paths_first,
                  bool images_first, int64_t min_run) {
  return grid_extent_in_order(shape, blocks, target, cut_order(shape.size(), paths_first, images_first), min_run);
}

}  // namespace

Shape choose_tile_extent(const Node& node, const NodeInfos& infos, const TileRule* rule, const PlanOptions& options,
                         int64_t work, int64_t producer_tiles, int64_t paths) {
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
  const bool paths_first = paths > 1 && shape.size() > 1 && blocks[1] > 0 && shape[1] % paths == 0;
  if (paths_first) blocks[1] = std::lcm(blocks[1], shape[1] / paths);  // a tile holds whole paths

  const int64_t threads = std::max(1, options.threads);
  // Rank 2 ([rows, columns]) cuts dim 0 first anyway; below rank 2 there is no batch. A count
  // given in the options keeps the plain order, so tiles measured at chosen counts compare.
  const bool images_first = !paths_first && threads > 1 && shape.size() >= 3 && blocks[0] > 0 &&
                            shape[0] >= threads && shape[0] % threads == 0 && (shape[0] / threads) % blocks[0] == 0;
  // Only an op that moves more than it computes (a transpose, an activation, a residual add)
  // keeps its tiles' runs long: its time is its memory traffic, so lines that bounce between
  // cores are most of it; a conv's arithmetic hides them, and its rows-first cut keeps
  // dependency chains narrow. A count given in the options keeps the plain order.
  const size_t element_bytes = infos.out[0].dtype == DType::string ? 0 : dtype_size(infos.out[0].dtype);
  const bool moves_more = options.tiles_per_op <= 0 && work <= kMovingOpFlopsPerElement * std::max<int64_t>(1, numel(shape));
  const int64_t min_run = element_bytes > 0 && moves_more ? kMinRunBytes / static_cast<int64_t>(element_bytes) : 0;
  int64_t min_flops = options.min_tile_flops > 0 ? options.min_tile_flops
                      : options.tiles_per_op > 0 ? 0
                                                 : kDefaultMinTileFlops;
  // A cheap op (an activation, a residual add) is cut no coarser than its producers, so it
  // does not join their tiles into one and stall the flow across layers like a barrier.
  auto bounded = [&](int64_t target) {
    if (min_flops <= 0) return target;
    int64_t enough_work = std::max<int64_t>(1, work / min_flops);
    return std::min(target, options.tiles_per_op > 0 ? enough_work : std::max(enough_work, producer_tiles));
  };
  if (options.tiles_per_op > 0) return grid_extent(shape, blocks, bounded(options.tiles_per_op), paths_first, false, 0);
  // One thread has no other core to fill, so spare tiles only cost: one tile per op.
  const int64_t fixed_target = threads == 1 ? 1 : std::min<int64_t>(kAutoTilesPerThread * threads, kMaxAutoTiles);
  extent = grid_extent(shape, blocks, bounded(fixed_target), paths_first, images_first, min_run);
  // A rule that reports no TileWork repeats nothing a coarser grid would save.
  if (options.tile_counts != TileCounts::tail_aware || !rule->tile_work) return extent;

  // TA-DNN (thesis 004, 4.2) prices a layer cut into B tiles on S cores as ceil(B / S) waves
  // of one tile's time, and that tile's time grows with what the cut repeats. Here a tile's
  // time is the rule's TileWork: its FLOPs, padding lanes included, plus what it packs or
  // transforms again at this machine's measured price per moved element. The barrier-free
  // schedule fills a partly empty wave with the next ops' tiles, so waves are not the price:
  // a grid costs its total work (repeats and per-tile costs included) spread over the
  // threads, plus one tile's time, which a chain of ops waits on. Only grids that repeat work
  // are priced, and only coarser ones tried: where nothing is repeated, the fixed rule's
  // spare tiles are what lets consecutive ops overlap. The choice ignores the schedule, so
  // the barrier twin keeps the same tiles.
  const double flops_per_element = static_cast<double>(work) / static_cast<double>(std::max<int64_t>(1, numel(shape)));
  auto tile_time = [&](const Shape& size) {  // one tile of this size along every dim
    TileWork w = rule->tile_work(node, infos.in, infos.out, size);
    if (w.flops + w.amx_flops <= 0) w = {static_cast<double>(numel(size)) * flops_per_element, 0};
    return w.flops + options.machine.amx_flop_cost * w.amx_flops + options.machine.move_flops * w.moves;
  };
  const double whole = tile_time(shape);
  struct Priced {
    double cost = 0;
    bool repeats = false;
  };
  auto price = [&](const Shape& e) {
    // Along each dim, full pieces and at most one smaller last piece: every distinct tile
    // size is priced once and counted as often as it occurs.
    const size_t rank = shape.size();
    std::vector<std::array<std::pair<int64_t, int64_t>, 2>> pieces(rank);  // (size, count)
    for (size_t d = 0; d < rank; ++d) {
      const int64_t size = e[d] > 0 ? std::min(e[d], shape[d]) : shape[d];
      pieces[d] = {std::pair<int64_t, int64_t>{size, shape[d] / size}, {shape[d] % size, shape[d] % size > 0 ? 1 : 0}};
    }
    int64_t tiles = 0;
    double total = 0, slowest = 0;
    for (size_t combo = 0; combo < (size_t{1} << rank); ++combo) {
      Shape size(rank);
      int64_t count = 1;
      for (size_t d = 0; d < rank; ++d) {
        const auto& [length, n] = pieces[d][(combo >> d) & 1];
        size[d] = length;
        count *= n;
      }
      if (count == 0) continue;
      const double t = tile_time(size);
      tiles += count;
      total += static_cast<double>(count) * t;
      slowest = std::max(slowest, t);
    }
    Priced p;
    p.repeats = total - whole > kRepeatedShare * whole;
    p.cost = (total + static_cast<double>(tiles * kTileOverheadFlops)) / static_cast<double>(threads) + slowest;
    return p;
  };
  if (numel(shape) == 0) return extent;  // an empty output has nothing to price
  const Priced fixed = price(extent);
  if (!fixed.repeats) return extent;
  double best = fixed.cost;
  for (int64_t target = 1; target < fixed_target; target = target < 16 ? target + 1 : target * 5 / 4) {
    Shape e = grid_extent(shape, blocks, bounded(target), paths_first, images_first, min_run);
    double c = price(e).cost;
    if (c < best * (1 - 1e-9)) {
      best = c;
      extent = e;
    }
  }
  return extent;
}

void fill_places(const Plan& plan, TileGraph& tg) {
  tg.place.assign(tg.node.size(), 0);
  for (size_t t = 0; t < tg.node.size(); ++t) {
    if (tg.node[t] < 0) continue;
    const Node& node = plan.graph.nodes[static_cast<size_t>(tg.node[t])];
    // Output 0 may be an omitted optional output (a recurrent op's Y): no place then.
    if (node.outputs.empty()) continue;
    const auto value = plan.graph.values.find(node.outputs[0]);
    if (value == plan.graph.values.end()) continue;
    const Shape& shape = value->second.shape;
    const Region& r = tg.region[t];
    for (size_t d = 0; d < r.size() && d < shape.size(); ++d) {
      if (shape[d] <= 0 || r[d].size() >= shape[d]) continue;
      const double middle = (double(r[d].begin) + double(r[d].end)) / 2 / double(shape[d]);
      tg.place[t] = static_cast<uint16_t>(std::min(65535.0, middle * 65536.0));
      break;
    }
  }
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

namespace grove {

Shape candidate_extent(const Plan& plan, int32_t n, const std::string& primitive, int64_t target,
                       const std::vector<size_t>& order) {
  const TileRule* rule = plan.rules.at(static_cast<size_t>(n));
  if (!rule) return {};
  Node node = plan.graph.nodes[static_cast<size_t>(n)];
  if (!primitive.empty()) apply_primitive_choices_to_node(node, primitive_named(node, primitive), DecisionSource::probe);
  const plan_detail::NodeInfos infos = plan_detail::node_infos(plan.graph, node);
  if (infos.out.empty() || !infos.out[0].present) return {};
  return plan_detail::grid_extent_in_order(infos.out[0].shape, rule->cuttable(node, infos.in, infos.out),
                                           std::max<int64_t>(1, target), order, 0);
}

}  // namespace grove
