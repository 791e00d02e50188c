#pragma once
// The two ways the NCHW conv rules (tile_conv.cpp, tile_pruned_conv.cpp) put a conv on the
// GEMM: C[out channels x pixels] = W . im2col, or its transpose C^T = im2col^T . W^T when a
// tile has few pixels.
#include <algorithm>
#include <cstddef>
#include <cstdint>

#include "kernels/im2col.h"
#include "kernels/transpose.h"
#include "ops/conv/conv_geometry.h"

namespace grove::tiling {

// The im2col shape of a 2-D conv over `channels` input channels (one group, or the kept ones).
inline kernels::Conv2dShape conv2d_shape_2d(const WindowGeometry& g, int64_t channels) {
  auto u = [](int64_t v) { return static_cast<size_t>(v); };
  return {.channels = u(channels), .in_h = u(g.input[0]), .in_w = u(g.input[1]), .out_h = u(g.output[0]),
          .out_w = u(g.output[1]), .kernel_h = u(g.kernel[0]), .kernel_w = u(g.kernel[1]),
          .stride_h = u(g.strides[0]), .stride_w = u(g.strides[1]), .dilation_h = u(g.dilations[0]),
          .dilation_w = u(g.dilations[1]), .pad_top = u(g.pads_begin[0]), .pad_left = u(g.pads_begin[1])};
}

// Pixels packed per GEMM call: the packed im2col block (k x pixels) is kept to about
// kPackedFloats so it stays in L2 next to the GEMM's A block; at least kMinPixels so that
// re-reading the weights (once per call) stays a small part of the work. Not tuned by
// measurement yet.
inline constexpr size_t kPackedFloats = 96 * 1024;
inline constexpr size_t kMinPixels = 256;
inline size_t pixels_per_gemm_call(size_t k, size_t nr, size_t packed_floats = kPackedFloats) {
  return std::max(kMinPixels, packed_floats / std::max<size_t>(k, 1) / nr * nr);
}

// Few pixels (the deep layers' 7 x 7 or 14 x 14 planes cut into row tiles) fill few lanes of
// a B panel (7 pixels: 7 of 32). The transposed form puts the output channels in the panels
// instead. Both forms compute every element with the same fused multiply-adds over the same
// k blocks (a * b = b * a exactly) and the bias after them, so either form gives the same
// bits and the choice may depend on the tile.
inline bool transposed_is_better(size_t pixels, size_t channels, size_t nr) {
  const size_t pixel_lanes = (pixels + nr - 1) / nr * nr, channel_lanes = (channels + nr - 1) / nr * nr;
  return pixels * 5 < pixel_lanes * 4 && channels * 5 >= channel_lanes * 4;
}

// dst[j][i] = src[i][j] for a rows x cols src (the SIMD block transpose, kernels/transpose.h).
inline void transpose_block(const float* src, size_t src_stride, size_t rows, size_t cols, float* dst,
                            size_t dst_stride) {
  kernels::transpose_4byte(src, src_stride, rows, cols, dst, dst_stride);
}

}  // namespace grove::tiling
