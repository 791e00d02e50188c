#pragma once
// The Winograd path of the Conv tile rule (tile_conv.cpp): which layers take it, their
// weights transformed at plan time, and one tile computed by kernels/winograd_f4x3.
#include <memory>

#include "graph/graph.h"
#include "graph/tensor.h"
#include "kernels/epilogue.h"
#include "kernels/im2col.h"
#include "graph/region.h"

namespace grove::tiling {

// A layer-level choice (never per tile, so every tile of a layer computes its elements the
// same way): 3x3, stride 1, dilation 1, one group, enough channels and a plane big enough
// to fill the GEMM panels (thresholds measured, docs/kernels.md). GROVE_CONV=gemm in the
// environment turns the path off (read once per process).
bool winograd_applies(const kernels::Conv2dShape& shape, int64_t group, int64_t out_channels);
// Whether a Winograd conv is cut by rows (planes of >= 128 GEMM columns) or, on smaller
// planes, by output channels only, so every tile's GEMMs keep the whole plane's columns.
bool winograd_cut_rows(const kernels::Conv2dShape& shape);

// Whether a Conv node (input X, weights W of these shapes) takes the Winograd path. Winograd
// runs in fp32 only: the plan leaves such layers out of bf16 (plan/precision.cpp says why).
bool conv_node_uses_winograd(const Node& node, const Shape& x, const Shape& w);

// Overrides GROVE_CONV for benchmarks that compare both paths in one process. Only between
// plans: cuttable, needs, prepare and run_tile of one plan must all see the same setting.
void set_winograd_enabled(bool enabled);

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
                        const Region& r, const kernels::Epilogue& epilogue, const void* prepared);

}  // namespace grove::tiling
