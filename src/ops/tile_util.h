#pragma once
// Shared pieces of the tile rules (tile_*.cpp): walking a region of a tensor row by row,
// copying regions in and out, mapping regions through numpy broadcasting, and the fallback
// that computes a region with the op's reference (for dtypes a rule has no loop for).
#include <array>
#include <cstdint>
#include <map>
#include <span>
#include <string>
#include <vector>

#include "graph/graph.h"
#include "graph/node_decisions.h"
#include "kernels/gemm.h"
#include "ops/conv/conv_geometry.h"
#include "ops/tiling.h"
#include "graph/region.h"

namespace grove::tiling {

// Rules by op type; each family file adds its own.
using RuleTable = std::map<std::string, TileRule>;
void add_elementwise_rules(RuleTable& t);  // tile_elementwise.cpp
void add_conv_rules(RuleTable& t);         // tile_conv.cpp
void add_pool_rules(RuleTable& t);         // tile_pool.cpp
void add_matmul_rules(RuleTable& t);       // tile_matmul.cpp
void add_row_rules(RuleTable& t);          // tile_rows.cpp
void add_movement_rules(RuleTable& t);     // tile_movement.cpp
void add_reshape_rules(RuleTable& t);      // tile_reshape.cpp
void add_attention_rules(RuleTable& t);    // tile_attention.cpp
void add_quant_matmul_rules(RuleTable& t); // tile_quant_matmul.cpp
void add_conv_integer_rules(RuleTable& t); // tile_conv_integer.cpp
void add_quant_conv_nhwc_rules(RuleTable& t);  // tile_quant_conv_nhwc.cpp: QLinearConvNhwc
void add_pool_nhwc_rules(RuleTable& t);        // tile_pool_nhwc.cpp: MaxPoolNhwc
void add_conv_nhwc_rules(RuleTable& t);        // tile_conv_nhwc.cpp: ConvNhwc
void add_conv_nchwc_rules(RuleTable& t);       // tile_conv_nchwc.cpp: ConvNchwc
void add_dwconv_nhwc_rules(RuleTable& t);      // tile_dwconv_nhwc.cpp: DepthwiseConvNhwc
void add_expand_depthwise_rules(RuleTable& t); // tile_expand_depthwise.cpp: ExpandDepthwiseNhwc, InvertedResidualNhwc
void add_conv_max_pool_rules(RuleTable& t);    // tile_conv_max_pool.cpp: ConvMaxPoolNhwc
void add_recurrent_rules(RuleTable& t);    // tile_recurrent.cpp
void add_pruned_conv_rules(RuleTable& t);         // tile_pruned_conv.cpp: PrunedConv, AttentionKeep(Nhwc), ApplyKeep(Nhwc)
void add_pruned_conv_nhwc_rules(RuleTable& t);    // tile_pruned_conv_nhwc.cpp: PrunedConvNhwc
void add_quant_elementwise_rules(RuleTable& t);    // tile_quant_elementwise.cpp: QLinearAdd, QuantizeLinear, DequantizeLinear
void add_resize_rules(RuleTable& t);               // tile_resize.cpp: Resize, Upsample (bilinear)

// The table key of a grove.internal op's rule: "grove.internal:<op_type>".
std::string internal_rule_key(const std::string& op_type);

// Block sizes meaning "every dim may be cut anywhere" / "one tile".
inline std::vector<int64_t> all_cuttable(const Shape& s) { return std::vector<int64_t>(s.size(), 1); }
inline std::vector<int64_t> none_cuttable(const Shape& s) { return std::vector<int64_t>(s.size(), 0); }

bool is_full(const Region& r, const Shape& shape);

// The GEMM precision the plan chose for this node (graph/node_decisions.h): prepared and
// per-tile packing of one node use the same, so a tile gives the same bits either way.
inline kernels::Precision gemm_precision(const Node& node) {
  if (runs_on_amx(node)) return kernels::Precision::bf16_amx;
  if (node.decisions.precision == NodePrecision::int8_weights) return kernels::Precision::int8_weights;
  return runs_in_bf16(node) ? kernels::Precision::bf16 : kernels::Precision::f32;
}

// Whether a weight-stationary op (MatMul/Gemm with constant B) should be cut along its
// weights' output dim (columns) rather than its positions (tokens, rows).
// A position cut gives every tile all the weights to stream; a weight cut gives every tile
// all the activations. Whichever of the two is bigger is the one to split: BERT at batch 1
// (128 tokens, 768x768 and larger weights) streams a weight matrix per tile otherwise.
// Measured with positions cut first: BERT-base tiles ran 35% slower in the barrier-free
// schedule (two cores on different ops, each streaming its own weights from DRAM) than in
// barrier mode, where both share one op's weights in L3; the barrier-free run was 155 ms vs
// 135. Cut by columns, both take 138 ms. (Conv keeps rows first: see conv_cuttable.)
inline bool cut_weights_first(int64_t weight_elements, int64_t activation_elements) {
  return weight_elements > activation_elements;
}

// One step of an odometer over dims [0, dims) of region `r`, the last of them turning fastest:
// index and offset move to the next row, whose stride along dim d is the product of the
// elements inside it (`inner` for dim dims - 1). False once every row was visited.
inline bool next_row(int64_t* index, size_t dims, const Shape& shape, const Region& r, int64_t inner, int64_t& offset) {
  int64_t stride = inner;
  for (size_t d = dims; d-- > 0;) {
    if (++index[d] < r[d].end) {
      offset += stride;
      return true;
    }
    offset -= (r[d].size() - 1) * stride;
    index[d] = r[d].begin;
    stride *= shape[d];
  }
  return false;
}

// Calls row(offset, index) for every innermost run of `r` inside a row-major tensor of
// `shape`: offset is the element offset of the run's first element, index its coordinates;
// each run is r.back().size() elements long (one element for rank 0). Nothing for an empty region.
template <class F>
void for_each_row(const Shape& shape, const Region& r, F&& row) {
  const size_t rank = shape.size();
  for (const Range& x : r)
    if (x.size() <= 0) return;
  std::vector<int64_t> index(rank);
  int64_t offset = 0;
  for (size_t d = rank, inside = 1; d-- > 0; inside *= static_cast<size_t>(shape[d])) {
    index[d] = r[d].begin;
    offset += index[d] * static_cast<int64_t>(inside);
  }
  // The innermost dim is the run itself, so an odometer over the outer dims drives.
  do row(offset, index);
  while (rank > 0 && next_row(index.data(), rank - 1, shape, r, shape[rank - 1], offset));
}

// Like for_each_row, for loops that need no index (operands shaped like the output): rows
// that follow each other in memory are one run, i.e. the trailing dims `r` covers whole are
// merged into the last dim it cuts. row(offset, run) once per run. A [1, 2048, 7, 7] tensor is
// one run of 100352 elements, not 14336 rows of 7. Up to rank 9 it allocates nothing: tiny
// tiles run it on every op.
template <class F>
void for_each_run(const Shape& shape, const Region& r, F&& row) {
  const size_t rank = shape.size();
  if (rank == 0) return row(int64_t{0}, int64_t{1});
  for (const Range& x : r)
    if (x.size() <= 0) return;
  size_t m = rank;  // dims [m, rank) are covered whole; dim m - 1 times them is the run
  while (m > 1 && r[m - 1].begin == 0 && r[m - 1].end == shape[m - 1]) --m;
  int64_t inner = 1;
  for (size_t d = m; d < rank; ++d) inner *= shape[d];
  const int64_t run = r[m - 1].size() * inner;
  constexpr size_t kMaxOuter = 8;
  const size_t outer = m - 1;  // dims an odometer walks
  if (outer > kMaxOuter) {
    Shape merged(shape.begin(), shape.begin() + static_cast<std::ptrdiff_t>(m));
    Region cut(r.begin(), r.begin() + static_cast<std::ptrdiff_t>(m));
    merged.back() *= inner;
    cut.back() = {cut.back().begin * inner, cut.back().end * inner};
    return for_each_row(merged, cut, [&](int64_t offset, const std::vector<int64_t>&) { row(offset, run); });
  }
  std::array<int64_t, kMaxOuter> index{};
  int64_t offset = r[m - 1].begin * inner;
  for (size_t d = outer, inside = static_cast<size_t>(shape[m - 1] * inner); d-- > 0; inside *= static_cast<size_t>(shape[d])) {
    index[d] = r[d].begin;
    offset += index[d] * static_cast<int64_t>(inside);
  }
  do row(offset, run);
  while (next_row(index.data(), outer, shape, r, shape[m - 1] * inner, offset));
}

// The elements of `r` as a new tensor of the region's shape, and back.
Tensor extract_region(const Tensor& t, const Region& r);
void insert_region(Tensor& dst, const Region& r, const Tensor& src);

// The region of an input of shape `in` that a numpy-broadcast read of output region `out_region`
// touches: right-aligned dims, [0, 1) on the input's broadcast dims.
Region broadcast_region(const Shape& in, const Region& out_region);

// Computes out[0] over `out_region` by running the op's reference on the sub-tensors
// in_regions[i] of each input and copying the result in. Exact for ops whose output region
// depends only on those sub-tensors in the same way (elementwise, rows of a softmax, ...).
void reference_on_subtensors(const Node& node, std::span<const Tensor* const> in, std::span<Tensor* const> out,
                             const Region& out_region, std::span<const Region> in_regions);

// Computes the whole op with its reference and copies out `out_region`: the path for
// inputs a rule has no loop for, which cuttable() keeps to one whole tile anyway.
void reference_whole(const Node& node, std::span<const Tensor* const> in, std::span<Tensor* const> out,
                     const Region& out_region);

// The input range along spatial dim d that the windows of output range `o` cover, clamped
// to the input (empty when they read only padding). Conv and the pools.
Range window_input_range(const WindowGeometry& g, size_t d, const Range& o);

// Rows of `width` pixels x `channels` floats that fit a quarter of L2 (at least one): the band a
// fused rule keeps an intermediate tensor's rows in (tile_expand_depthwise.cpp,
// tile_conv_max_pool.cpp).
int64_t band_rows(int64_t width, int64_t channels);

// Infos of whole tensors (for calling a rule's needs from run_tile).
std::vector<ValueInfo> infos_of_tensors(std::span<const Tensor* const> in);

// Throws unless the region fits inside the shape: run_tile is called by the runtime, so a
// bad region is a planner bug that must fail loudly rather than write out of bounds.
void check_region(const Node& node, const Region& r, const Shape& shape);

}  // namespace grove::tiling
