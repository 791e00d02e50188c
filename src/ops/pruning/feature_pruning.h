#pragma once
// grove.internal AttentionKeep, ApplyKeep and PrunedConv: dynamic feature-map pruning
// (feature_pruning.cpp says what each computes; passes/feature_pruning.h makes them).
#include <cstdint>
#include <span>
#include <vector>

#include "graph/graph.h"
#include "kernels/im2col.h"

namespace grove {

inline constexpr size_t kPrunedConvKeepInput = 4;  // after x, w, bias and the fused residual
inline constexpr const char* kAttrKeepChannels = "channels";
inline constexpr const char* kAttrKeepPositions = "positions";
// Positions ranked and kept in square blocks of this many rows and columns, on a grid anchored
// at (0, 0) (the last row and column of blocks may be cut short): a block's score is the mean
// of its positions' means, and the keep row lists kept blocks (row * blocks per row + column).
// 1 (the default): positions one by one. Blocks that match a Winograd conv's output blocks let
// it skip whole blocks (kernels/winograd_nhwc.h computed).
inline constexpr const char* kAttrKeepBlock = "block";

// What a keep row's position part ranks: the positions of an H x W plane (block 1), or its
// blocks of `block` x `block`.
int64_t keep_units(int64_t height, int64_t width, int64_t block);
// The node's block attribute (1 where absent), checked to be at least 1.
int64_t keep_block(const Node& node);

// The Conv a PrunedConv is when nothing is pruned (its reference runs that on masked x).
Node pruned_conv_twin(const Node& node);

// Which output positions a PrunedConv computes when it prunes positions: those whose window
// centre falls on a kept input position (row o * stride - pad_top + (kernel - 1) / 2 *
// dilation, and so along the width); the others are 0, not computed. A 3x3 conv of stride 1
// and pad 1 computes the kept positions themselves; of stride 2, the kept ones at even rows
// and columns. kept_position: one byte per input position (1: kept); computed: one byte per
// output position.
void computed_outputs(const kernels::Conv2dShape& s, const unsigned char* kept_position, unsigned char* computed);

// One image's keep row: the `keep_channels` channels of highest mean over the plane, then the
// `keep_positions` positions (or blocks, kAttrKeepBlock) of highest mean over the channels,
// each ascending, into keep. `scratch` holds the scores between calls (a worker's, or the
// caller's).
struct AttentionKeepScratch {
  std::vector<double> score, ranked;
  std::vector<double> lanes, positions;  // the channels' lanes (kernels/keep_scores.h), the position means
};
void attention_keep(const float* x, int64_t channels, int64_t height, int64_t width, int64_t keep_channels,
                    int64_t keep_positions, int64_t* keep, AttentionKeepScratch& scratch, int64_t block = 1);
// The same keep row from one channels-last image ([plane][channels]): every score is summed in
// the order attention_keep sums it, so both layouts keep the same channels and positions.
void attention_keep_nhwc(const float* x, int64_t channels, int64_t height, int64_t width, int64_t keep_channels,
                         int64_t keep_positions, int64_t* keep, AttentionKeepScratch& scratch, int64_t block = 1);

// Whether a PrunedConv(Nhwc) reads its keep rows from the keep input (an AttentionKeep node's
// output) or, without one, ranks x itself as AttentionKeep would. The plan leaves the decision
// node out where only pruned convs read the map (plan/feature_pruning.h), so that each conv
// tile decides for its own images instead of waiting for a node of its own.
inline bool pruned_conv_reads_keep(std::span<const ValueInfo> in) {
  return in.size() > kPrunedConvKeepInput && in[kPrunedConvKeepInput].present;
}
// Image n's keep row for a PrunedConv(Nhwc): keep's row where keep is given, else the row
// attention_keep (attention_keep_nhwc with nhwc: x [N, H, W, C]) ranks from x into `row`.
const int64_t* pruned_conv_keep_row(const Node& node, const Tensor& x, const Tensor* keep, int64_t n, bool nhwc,
                                    std::vector<int64_t>& row, AttentionKeepScratch& scratch);

// One image's keep row as flags, 1 where kept: kept_channel per channel, kept_position per
// position of the H x W plane (a kept block's positions, where the node has a block). An index
// out of range is an Error naming the node. The flags are a worker's scratch in the tile rules.
struct KeepFlags {
  std::vector<unsigned char> kept_channel, kept_position;
};
void keep_flags(const Node& node, const int64_t* keep, int64_t keep_channels, int64_t keep_positions, int64_t channels,
                int64_t height, int64_t width, KeepFlags& flags);

// The NCHW op a channels-last feature-pruning op computes on rotated tensors
// (feature_pruning_nhwc.cpp): AttentionKeep for AttentionKeepNhwc, and so on.
Node nchw_pruning_twin(const Node& node);

}  // namespace grove
