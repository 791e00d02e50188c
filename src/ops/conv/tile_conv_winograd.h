#pragma once
// The Winograd path of the Conv tile rule (tile_conv.cpp): which layers take it, their
// weights transformed at plan time, and one tile computed by kernels/winograd_f4x3.
#include <memory>

#include "graph/graph.h"
#include "graph/tensor.h"
#include "kernels/epilogue.h"
#include "kernels/im2col.h"
#include "graph/region.h"
#include "ops/tile_scratch.h"

namespace grove::tiling {

// A layer-level choice (never per tile, so every tile of a layer computes its elements the
// same way). Winograd can run a 3x3, stride-1, dilation-1 conv of one group with enough
// channels (winograd_fits); the hand rule also wants a plane big enough to fill the GEMM
// panels (winograd_by_rule; thresholds measured, docs/kernels.md). A plan's per-node choice
// (graph/node_decisions.h, from a tuning record) overrides the rule either way where it fits.
bool winograd_fits(const kernels::Conv2dShape& shape, int64_t group, int64_t out_channels);
bool winograd_by_rule(const kernels::Conv2dShape& shape, int64_t group, int64_t out_channels);
// The same rule for a conv the layout pass runs channels-last, which wins on smaller planes
// too: those of 16-47 GEMM columns whose transformed weights fit half the last-level cache.
bool winograd_channels_last_by_rule(const kernels::Conv2dShape& shape, int64_t group, int64_t out_channels);
// Bytes of the 36 transformed weight matrices (f32) of a conv of this shape.
int64_t winograd_transformed_weight_bytes(const kernels::Conv2dShape& shape, int64_t out_channels);
// Whether a Winograd conv is cut by rows (planes of >= 128 GEMM columns) or, on smaller
// planes, by output channels only, so every tile's GEMMs keep the whole plane's columns.
bool winograd_cut_rows(const kernels::Conv2dShape& shape);
// The channels-last forms also cut one image's small plane by rows where its weights are few
// for its columns (at most kRowCutChannelsPerColumn output channels per GEMM column), so the
// input transform is done once, not once per channel tile (ops/conv/tile_conv_winograd.cpp
// says what was measured). `images`: the output's batch; several are cut by images instead.
bool winograd_nhwc_cut_rows(const kernels::Conv2dShape& shape, int64_t out_channels, int64_t images);

// Whether a Conv node (input X, weights W of these shapes) takes the Winograd path. Winograd
// runs in fp32 only: the plan leaves such layers out of bf16 (plan/precision.cpp says why).
bool conv_node_uses_winograd(const Node& node, const Shape& x, const Shape& w);
// Whether it takes the channels-last Winograd when the layout pass runs it channels-last.
bool conv_node_uses_winograd_channels_last(const Node& node, const Shape& x, const Shape& w);
// Whether Winograd could run it (a plan may choose it: plan/node_choice.h).
bool conv_node_fits_winograd(const Node& node, const Shape& x, const Shape& w);
// The same for the direct kernel (kernels/conv_direct.h), which the rule takes for convs of
// few input channels, in fp32.
bool conv_node_uses_direct(const Node& node, const Shape& x, const Shape& w);
bool conv_node_fits_direct(const Node& node, const Shape& x, const Shape& w);

// Output rows are computed in blocks of this many: tiles cut rows at its multiples.
constexpr int64_t kWinogradRows = 4;

// U = G g G^T of W [Cout][Cin][3][3], packed once.
std::shared_ptr<const void> winograd_prepare(const Tensor& w);

// Bytes of what winograd_prepare returned.
int64_t winograd_prepared_bytes(const void* prepared);

// Output region r (images, channels, rows, all columns) of y. `prepared` is what
// winograd_prepare returned, or null (then the weights are transformed here, with the same
// bits). `epilogue.row_bias` is indexed by output channel; `epilogue.residual` points at
// image 0, channel 0 of a tensor shaped like y.
void winograd_conv_tile(const kernels::Conv2dShape& shape, const Tensor& x, const Tensor& w, Tensor& y,
                        const Region& r, const kernels::Epilogue& epilogue, const void* prepared, TileScratch& scratch);

// The channels-last forms, for grove.internal ConvNhwc nodes the layout pass leaves on
// Winograd (primitive winograd or winograd_nhwc, graph/node_decisions.h: F(4x4, 3x3),
// kernels/winograd_f4x3_nhwc.h) or a tuning record puts on F(2x2, 3x3) ("winograd_f2x3_nhwc",
// kernels/winograd_f2x3_nhwc.h). `block` (4 or 2) names the form: U_t packed as B.
std::shared_ptr<const void> winograd_nhwc_prepare(const Tensor& w, int64_t block);
// The block of the channels-last form a node's decision names: 4 for "winograd" and
// "winograd_nhwc", 2 for "winograd_f2x3_nhwc", 0 for any other choice.
int64_t winograd_nhwc_block(const Node& node);
int64_t winograd_nhwc_prepared_bytes(const void* prepared);

// Output region r (images, rows, all columns, channels starting on a panel boundary) of y
// [N, OH, OW, M] from x [N, H, W, C]. `prepared` is what winograd_nhwc_prepare returned for
// this `block`, or null. `epilogue.bias` is indexed by output channel; `epilogue.residual` points at image 0 of
// a tensor [N, OH, OW, M]. y may be wider, a Concat's buffer [N, OH, OW, M'] whose channels
// [y_channel, y_channel + M) are this conv's (then without a residual). With `keep`, every
// image's conv is a pruned conv's (kernels/winograd_nhwc.h: it adds up the kept channels, reads
// the kept positions and computes the outputs flagged computed); its keep row differs per
// image, so r covers one image then.
struct WinogradNhwcKeep {
  const uint32_t* channels = nullptr;  // WinogradNhwcCall::kept_channels (null: every channel)
  size_t kept = 0;
  const unsigned char* positions = nullptr;  // WinogradNhwcCall::kept_positions
  const unsigned char* computed = nullptr;   // WinogradNhwcCall::computed
};
void winograd_nhwc_conv_tile(int64_t block, const kernels::Conv2dShape& shape, const Tensor& x, const Tensor& w,
                             Tensor& y, int64_t y_channel, const Region& r, const kernels::Epilogue& epilogue,
                             const void* prepared, TileScratch& scratch, const WinogradNhwcKeep& keep = {});

}  // namespace grove::tiling
