#pragma once
// A float32 ConvNhwc's row path (kernels/conv_rows.h, tile_conv_nhwc.cpp) for rules that
// compute a conv's output rows into a buffer of their own: the conv and max pool run as one
// node (tile_conv_max_pool.cpp), whose conv rows live only in a cache-sized band.
#include <memory>
#include <span>
#include <vector>

#include "graph/graph.h"
#include "kernels/gemm.h"

namespace grove::tiling {

// Whether conv_nhwc_rows_f32 computes this ConvNhwc: float32 x, W and bias, no residual, not
// on Winograd, and a CPU whose GEMM kernel reads padded rows in place.
bool conv_nhwc_on_rows(const Node& conv, std::span<const ValueInfo> in);

// The weights packed as the ConvNhwc rule packs them (what conv_nhwc_rows_f32 reads).
std::shared_ptr<const void> conv_nhwc_pack(const Node& conv, const Tensor& w);
int64_t conv_nhwc_packed_bytes(const void* packed);
// Those weights as B: k x M, k ordered (kernel row, kernel column, channel), in panels of nr
// output channels (a pruned conv gathers its kept channels' rows from them).
const kernels::PackedB& conv_nhwc_packed_b(const void* packed);

// Output rows [oy0, oy1) and channels [c0, c1) of image n of the conv, bias and activation
// applied: pixel (oy, ox), channel c0 + j at y + ((oy - oy0) * OW + ox) * y_stride + j. The
// same operations as the ConvNhwc rule's tiles, so the same bits. `padded` is the caller's
// buffer for the padded input rows.
void conv_nhwc_rows_f32(const Node& conv, const Tensor& x, const Tensor& w, const Tensor* bias, const void* packed,
                        int64_t n, int64_t oy0, int64_t oy1, int64_t c0, int64_t c1, float* y, int64_t y_stride,
                        std::vector<float>& padded);

}  // namespace grove::tiling
