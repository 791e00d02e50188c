#pragma once
// Tiling of an op: how its output may be cut into tiles, which input regions one output tile
// reads (`needs`, from which the planner derives tile->tile dependencies by interval
// arithmetic), and how one tile is computed (`run_tile`). An op without a TileRule is one
// whole-op tile computed by its reference implementation, so every op runs in the tile
// runtime, and the rules are added where the work is.
//
// Results must not depend on how the output is cut into tiles beyond float rounding of the
// kernel, and must not depend at all on the order tiles run in: each tile always computes its
// region the same way, so runs are bit-identical whatever the schedule.
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "graph/graph.h"
#include "graph/region.h"
#include "ops/tile_scratch.h"

namespace grove {

// What one full-size tile of a grid does, in the rule's own accounting, for choosing how
// finely to cut (plan/plan_tiles.cpp).
struct TileWork {
  double flops = 0;  // arithmetic, counting the register tile's padding lanes
  double moves = 0;  // elements packed, transformed or streamed, which a finer cut repeats
  // Arithmetic on the AMX tile unit instead (bf16_amx nodes): priced apart, at the session's
  // measured cost of one such FLOP in f32 FLOPs (PlanOptions::amx_flop_cost).
  double amx_flops = 0;
};

// How one tile may run in pieces (Job::pieces, runtime/help_board.h): runs of `size`
// elements along output dim `dim`, `size` a multiple of that dim's cuttable block, so each
// piece computes its elements bit for bit as the whole tile would. dim -1: no pieces.
struct TilePieces {
  int dim = -1;
  int64_t size = 0;
};

// A GEMM tile's work on the unit its precision runs on. On AMX the products are so cheap that
// streaming the weights again, which a finer cut of the other dim makes every tile do, is
// no longer hidden under them: those `weights` count as moves there.
inline TileWork gemm_tile_work(bool amx, double flops, double moves, double weights) {
  return amx ? TileWork{0, moves + weights, flops} : TileWork{flops, moves, 0};
}

struct TileRule {
  // Per dim of output 0: the block size tiles along that dim must be a multiple of (the last
  // tile may be smaller), or 0 when the dim must not be cut. E.g. Conv NCHW: {1, 1, 1, 0}.
  std::vector<int64_t> (*cuttable)(const Node& node, std::span<const ValueInfo> in, std::span<const ValueInfo> out);

  // For an output region, the region of each input that it reads (in_regions[i] has the rank
  // of input i; an input not read at all, or missing, gets an empty Region {}).
  void (*needs)(const Node& node, std::span<const ValueInfo> in, std::span<const ValueInfo> out,
                const Region& out_region, std::span<Region> in_regions);

  // Computes out[0] over out_region only. Input tensors are whole (at least the regions
  // `needs` named hold valid data); output tensors are whole and already allocated.
  // `prepared` is what `prepare` returned for this node (nullptr without one); `scratch` is
  // the running worker's working memory (tile_scratch.h).
  void (*run_tile)(const Node& node, std::span<const Tensor* const> in, std::span<Tensor* const> out,
                   const Region& out_region, const void* prepared, TileScratch& scratch);

  // Optional, called once per node at plan time: work done once for every run, e.g. weights
  // packed for the GEMM kernels. constants[i] is input i when it is an initializer, else
  // nullptr. The result must not depend on anything but the constants it names, and run_tile
  // must give the same results with and without it (the tests compare both).
  std::shared_ptr<const void> (*prepare)(const Node& node, std::span<const ValueInfo> in,
                                         std::span<const Tensor* const> constants) = nullptr;

  // Optional, with `prepare`: the bytes what it returned holds (packed weights), for reports.
  int64_t (*prepared_bytes)(const Node& node, std::span<const ValueInfo> in, const void* prepared) = nullptr;

  // A rule of a multi-output op whose one tile (cuttable cuts nothing) computes every output
  // (LSTM: Y, Y_h, Y_c); run_tile gets nullptr for outputs the node leaves unnamed.
  bool every_output = false;

  // Optional: the work of one full-size tile of a grid of this extent (extent[d] is the
  // tile's size along d; the whole dim where it is not cut). Without it a tile is taken to do
  // its share of the op's FLOPs and to repeat nothing.
  TileWork (*tile_work)(const Node& node, std::span<const ValueInfo> in, std::span<const ValueInfo> out,
                        const Shape& extent) = nullptr;

  // Optional: elements of its inputs the op reads from memory with little arithmetic on each
  // (attention over a decoder's key/value cache: 2 FLOPs per element). Such an op runs at the
  // memory's speed, not its FLOPs', so the planner counts each element at the machine's price
  // of a moved element (MachineProfile::move_flops) when it decides how many tiles the op is
  // worth: by its FLOPs alone, a decode step's attention over 64 cached positions is under
  // the minimum tile and runs on one core while the others wait for it.
  int64_t (*streamed_elements)(const Node& node, std::span<const ValueInfo> in, std::span<const ValueInfo> out) =
      nullptr;

  // Optional: how one tile may run in pieces that idle cores join (TilePieces), given the
  // bytes of its inputs a piece should stream at least (PlanOptions::piece_bytes): only where
  // pieces repeat nothing, as a weight stream's output columns do. Without it, or with dim -1,
  // a tile runs whole on the core that took it.
  TilePieces (*pieces)(const Node& node, std::span<const ValueInfo> in, std::span<const ValueInfo> out,
                       int64_t piece_bytes) = nullptr;

  // Optional: G > 1 when output 0 splits along dim 1 into G independent paths, block g of
  // the output reading only block g of input 0 along its dim 1 (a grouped Conv's groups).
  // Consecutive ops of the same G are cut along their paths first (DCCNN, plan.cpp).
  int64_t (*paths)(const Node& node, std::span<const ValueInfo> in) = nullptr;

  // Optional: true when run_tile can write output 0 [N, H, W, M] as channels [o, o + M) of a
  // wider [N, H, W, M'] tensor: a channels-last Concat's buffer, so the Concat copies nothing
  // (plan/plan_views.cpp). The plan then sets the node's Decisions::y_channel_offset to o and hands
  // run_tile that tensor as out[0]; regions stay in the node's own coordinates.
  bool (*writes_channel_slice)(const Node& node, std::span<const ValueInfo> in) = nullptr;

  // True when `prepare` reads no shape but its constants' (and every input's dtype): what it
  // made for one shape of the other inputs serves all of them, so a session's plans for other
  // shapes (a decoder's growing cache, other batch sizes) share one packed copy of the weights.
  bool prepare_ignores_other_shapes = false;
};

// nullptr when the op is computed as one whole tile by its reference implementation.
// Multi-output ops (other than unused optional outputs) have no rule unless it computes
// every output, and then only with output 0 named.
const TileRule* find_tile_rule(const Node& node);

// Every key of the rule table: an ONNX op type, or "grove.internal::Name" for a fused op
// (tiling::internal_rule_key). The generated tests check each has a case generator.
std::vector<std::string> tile_rule_keys();

}  // namespace grove
