#pragma once
// The float32 channels-last max pool's rows (tile_pool_nhwc.cpp) over any buffer: the conv and
// max pool run as one node (tile_conv_max_pool.cpp) pool a band of conv rows it holds itself.
#include <cstdint>

#include "ops/conv/conv_geometry.h"

namespace grove::tiling {

// Output rows [oy0, oy1) of one image: input pixel (iy, ix), channel j at
// x + (iy * IW + ix) * x_stride + j; output pixel (oy, ox) at y + (oy * OW + ox) * y_stride + j,
// for j < channels. Rows outside [0, IH) are padding, as in the geometry.
void max_pool_nhwc_rows_f32(const float* x, int64_t x_stride, int64_t channels, const WindowGeometry& g, int64_t oy0,
                            int64_t oy1, float* y, int64_t y_stride);

}  // namespace grove::tiling
