#pragma once
// The planner (the paper's APU): choose how each op's output is cut, derive tile->tile
// dependencies analytically from each op's `needs`, and plan per-run buffers.
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "graph/graph.h"
#include "grove/layout.h"
#include "grove/schedule.h"
#include "graph/limits.h"
#include "kernels/conv_probe.h"
#include "ops/tiling.h"
#include "plan/feature_pruning.h"
#include "plan/node_choice.h"
#include "plan/precision.h"
#include "plan/tile_graph.h"

namespace grove {

class SharedPrepared;  // plan/shared_weights.h

// Which TileRule an op gets; nullptr for a whole-op tile. Tests inject their own.
using TileRuleLookup = const TileRule* (*)(const Node& node);

inline constexpr double kDefaultMoveFlops = 32;
inline constexpr double kDefaultAmxFlopCost = 0.25;
inline constexpr double kDefaultTransposeFlops = 32;

// What this machine measured, for pricing plans (runtime/machine_probes.h measures the values
// and stores them per machine, so a model plans the same in every process). The defaults are
// for plans made without a measurement.
struct MachineProfile {
  // TileCounts::tail_aware: FLOPs one moved element is worth (kernels::measure_move_flops).
  double move_flops = kDefaultMoveFlops;
  // The same for the AMX tile unit: f32 FLOPs one of its FLOPs costs (kernels::measure_amx_flop_cost).
  double amx_flop_cost = kDefaultAmxFlopCost;
  // bf16 without AMX: how many times faster the AVX512-BF16 dot-product GEMM runs than the
  // f32 one (kernels::measure_bf16_dot_gain); 0, not measured: bf16 runs wherever it is asked
  // for. Too small a gain runs fp32 instead (plan/precision.h).
  double bf16_dot_gain = 0;
  // ConvLayout::channels_last: FLOPs one element a layout-change Transpose moves is worth
  // (kernels::measure_transpose_flops), for keeping a group of convs channels-last only where
  // its Transposes cost little next to its products.
  double transpose_flops = kDefaultTransposeFlops;
  // ConvLayout::channels_last: a Winograd layer of at least this many input channels stays on
  // Winograd channels-last, one of fewer runs on the channels-last GEMM; and whether 3x3 convs
  // on planes too small for the NCHW Winograd (13x13, 14x14) run on the channels-last one
  // (kernels::measure_winograd_nhwc).
  int64_t winograd_nhwc_min_channels = kernels::kWinogradNhwcDefaultMinChannels;
  bool winograd_nhwc_small_planes = false;
  // How many times faster the channels-last Winograd runs a 14x14 layer than the row GEMM
  // (kernels::WinogradNhwcProbe::small_plane_gain); feature pruning keeps a Winograd conv
  // whole where pruning leaves it more than 1 / gain of its products. 0: not measured (prune).
  double winograd_small_plane_gain = 0;
  // The channels-last Winograd's time keeping half the input channels over its time keeping all
  // (kernels::WinogradNhwcProbe::small_plane_half_kept): with the gain, whether a pruned
  // Winograd conv stays on Winograd or takes the row GEMM. 0: not measured (Winograd).
  double winograd_small_plane_half_kept = 0;
  // For reports: where the values came from (the machine's stored file, or measured by this
  // process); "" when none were taken.
  std::string source;
};

// Switches for tests and for comparing one mechanism with its absence. The defaults are what
// every user gets; nothing outside tests, benchmarks and tools sets them.
struct PlanDebug {
  TileRuleLookup rule_lookup = nullptr;  // nullptr: find_tile_rule; tests inject their own
  // false: no rule's `prepare` runs (no packed weights): a plan for its structure only (tile
  // grids, edges), as the plan-time selection reads it; it cannot be run.
  bool prepare_weights = true;
  // Producers write a channels-last Concat's inputs straight into its buffer where their rules
  // can (PlannedValue::slice_of); false: every Concat copies.
  bool concat_slices = true;
  // A 1x1 expand conv and the depthwise conv that alone reads it run as one node, band by band
  // in cache (passes/fuse_expand_depthwise.cpp); false: apart.
  bool fuse_expand_depthwise = true;
  // The 1x1 project conv that alone reads such a node's output joins it too where that output
  // outgrows half of L2 (InvertedResidualNhwc); false: the project conv runs apart.
  bool fuse_depthwise_project = true;
  // A conv and the max pool that alone reads it run as one node, band by band in cache
  // (passes/fuse_conv_max_pool.cpp); false: apart.
  bool fuse_conv_max_pool = true;
};

// What a plan is made from: what the user chose, what the machine measured, and debug switches.
struct PlanOptions {
  int threads = 1;              // the cores the tiles are cut for
  int tiles_per_op = 0;         // target tiles per op; 0 chooses by rule (enough for every core, each big enough)
  int64_t min_tile_flops = 0;   // 0 chooses by rule (kDefaultMinTileFlops when tiles_per_op is 0, else no minimum)
  // Bytes a tile's piece streams at least (TileRule::pieces); 0: kDefaultPieceBytes. With one
  // thread no tile is cut in pieces: there is no other core to take one.
  int64_t piece_bytes = 0;
  bool tile_pieces = true;  // false: every tile runs whole (SessionOptions::tile_pieces)
  Schedule schedule = Schedule::aspen;
  TileCounts tile_counts = TileCounts::fixed;  // when tiles_per_op is 0
  // Bound on the TileGraph, from Limits::max_tiles (a hostile model with many big ops must not
  // make the planner allocate without bound): more tiles, or more than kMaxEdgesPerTile times
  // as many edges, is an Error naming the node.
  int64_t max_tiles = kDefaultMaxTiles;
  Precision precision = Precision::fp32;  // the GEMM ops' arithmetic (plan/precision.h)
  ConvLayout conv_layout = ConvLayout::channels_last;  // float convs' activation layout (passes/layout_f32.cpp)
  std::vector<FeatureMapPruning> feature_pruning;  // dynamic feature-map pruning (plan/feature_pruning.h)
  // A pruned conv the layout pass put on Winograd stays on it where the machine's probes price
  // that cheaper than the pruned GEMM (apply_feature_pruning); false: every pruned conv takes
  // the pruned GEMM (the alternative a session's pruning trial times, runtime/plan_trial.h).
  bool pruned_winograd = true;
  // Per-node primitives and tile grids that override the rules (a tuning record's, src/tune).
  std::vector<NodeChoice> choices;
  std::string choices_source;  // for reports: where `choices` came from ("" when there are none)
  // Where `choices` came from, as the nodes' decisions record it (Decisions::conv_source): a
  // tuning record unless the caller says otherwise (the performance model, or candidates it
  // measured itself).
  DecisionSource choices_from = DecisionSource::record;

  MachineProfile machine;
  PlanDebug debug;
  // Prepared weights shared with the other plans made with the same pointer (a session's plans
  // for other input shapes, plan/shared_weights.h); null: this plan prepares its own.
  std::shared_ptr<SharedPrepared> shared_prepared;
};

// The rule when tiles_per_op is 0: about kAutoTilesPerThread tiles per thread (one per op
// at one thread, where spare tiles have no other core to fill), at most
// kMaxAutoTiles per op, and no tile under kDefaultMinTileFlops (so a tiny op is one tile),
// except that an op is cut at least as finely as the producers of its inputs.
// One: every extra tile of a conv or MatMul streams its weights (or repacks its im2col, or
// reads its halo rows) again, and since each worker keeps to its share of the places
// (DagView::place) a spare tile no longer buys overlap between layers (docs/scaling.md).
inline constexpr int kAutoTilesPerThread = 1;
inline constexpr int kMaxAutoTiles = 256;
inline constexpr int64_t kDefaultMinTileFlops = 1 << 20;
// TileCounts::tail_aware: what one more tile is taken to cost, in FLOPs of work (its
// scheduling; what it packs or streams again is the rule's TileWork::moves).
inline constexpr int64_t kTileOverheadFlops = 1 << 18;
// PlanOptions::piece_bytes by default. Taking a piece costs a compare-exchange and the
// kernel's set-up, about 0.1 us; at the 20-40 GB/s one core streams, 256 KiB take 6-13 us, so
// that stays near 1%, while a core that finishes its share early waits at most one piece.
inline constexpr int64_t kDefaultPieceBytes = int64_t{256} << 10;

// Per value that a run computes (everything but initializers): where consumers find it, and
// when its buffer can be released.
struct PlannedValue {
  std::string name;
  DType dtype = DType::undefined;
  Shape shape;
  int32_t producer = -1;        // node index; -1 for a graph input
  int32_t consumer_tiles = 0;   // (tile, input slot) pairs that read it: released after the last one
  bool is_output = false;       // graph outputs are never released
  int32_t view_of = -1;         // a view (plan_views.cpp): the value whose buffer it shares
  // A slice (plan_views.cpp): its producer writes it straight into channels
  // [slice_offset, slice_offset + its channels) of this value, the Concat that reads it.
  int32_t slice_of = -1;
  int64_t slice_offset = 0;
};

struct Plan {
  Plan() = default;
  Plan(const Plan&) = delete;  // node_constants points into graph
  Plan& operator=(const Plan&) = delete;

  Graph graph;                  // bound and optimised; owns the weights
  PlanOptions options;
  TileGraph tiles;              // with barrier tiles between ops when options.schedule == barrier
  std::vector<PlannedValue> values;
  // Per node: the value index of each input (-1: an initializer or a missing optional input)
  // and of each output (-1: an unnamed optional output).
  std::vector<std::vector<int32_t>> node_inputs;
  std::vector<std::vector<int32_t>> node_outputs;
  // Per node input: the initializer of graph it reads, or null (a run's value, or a missing
  // optional input); found once here so that no run looks weights up by name.
  std::vector<std::vector<const Tensor*>> node_constants;
  // Per node: its TileRule (nullptr: one tile computed by the reference), and the tile extent
  // per dim of output 0 (a regular grid; the last tile along a dim may be smaller).
  std::vector<const TileRule*> rules;
  std::vector<Shape> tile_extent;
  // Per node: how its tiles may run in pieces that idle cores join (dim -1: whole).
  std::vector<TilePieces> pieces;
  // Per node: the number of independent paths of the chain it is on (DCCNN: grouped convs of
  // the same group count feeding each other, cut path by path when there is a core per path),
  // 0 when it is on none. A grid chosen for it later must keep its tiles within paths.
  std::vector<int64_t> path_chain;
  // Per node: what its rule's `prepare` returned (packed weights, ...), passed to every
  // run_tile of the node; null when the rule has no prepare step.
  std::vector<std::shared_ptr<const void>> prepared;
  int64_t prepared_bytes = 0;       // what `prepared` holds in all (packed weights), for reports
  int64_t critical_path_flops = 0;  // max over tile paths of the summed tile FLOPs
  int64_t total_flops = 0;          // graph_flops of the graph
  PrecisionReport precision;        // which nodes run in bf16 (marked on `graph`)
  int channels_last_convs = 0;      // Convs rewritten to ConvNhwc in `graph` (PlanOptions::conv_layout)
  FeaturePruningReport pruning;     // the feature maps pruned per run (rewritten in `graph`)
};

// True when node n only relabels its input's buffer: one no-work tile, no copy.
inline bool is_view_node(const Plan& plan, int32_t n) {
  const auto& outs = plan.node_outputs[static_cast<size_t>(n)];
  return outs.size() == 1 && outs[0] >= 0 && plan.values[static_cast<size_t>(outs[0])].view_of >= 0;
}

// True when node n is a Concat whose inputs were all written into its output by their
// producers (PlannedValue::slice_of): its tiles keep their edges and copy nothing.
inline bool is_gathered_node(const Plan& plan, int32_t n) {
  const auto& ins = plan.node_inputs[static_cast<size_t>(n)];
  const auto& outs = plan.node_outputs[static_cast<size_t>(n)];
  if (ins.empty() || outs.size() != 1 || outs[0] < 0) return false;
  for (int32_t v : ins)
    if (v < 0 || plan.values[static_cast<size_t>(v)].slice_of != outs[0]) return false;
  return true;
}

// Throws Error (naming node and op) when the graph cannot be planned. Runs the compile
// pipeline (plan.cpp kCompilePipeline) on a copy of `bound`.
std::shared_ptr<const Plan> make_plan(const Graph& bound, const PlanOptions& options);

// The names of the compile pipeline's steps, in the order make_plan runs them.
std::vector<std::string> compile_pipeline_steps();

// Tiles of node n along each dim of its grid (ceil(extent / tile extent); 1 for an empty dim).
Shape tile_grid(const Plan& plan, int32_t node);

// For tools that try grids (src/tune): the tile extent of node n of `plan` at about `target`
// tiles, cutting the dims in `order` first, in the blocks its rule allows with `primitive`
// ("" for the plan's own). Empty for a node without a tile rule.
Shape candidate_extent(const Plan& plan, int32_t n, const std::string& primitive, int64_t target,
                       const std::vector<size_t>& order);

// Approximate bytes held by a TileGraph's arrays (regions included), for reports.
int64_t tile_graph_bytes(const TileGraph& tiles);

}  // namespace grove
