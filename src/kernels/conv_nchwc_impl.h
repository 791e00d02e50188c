#pragma once
// The loop of conv_nchwc.h, included by conv_nchwc_{scalar,avx2,avx512}.cpp with their own ISA
// flags (internal linkage: the linker never merges the copies). Each file builds both block
// widths, so a plan's blocks run on whatever ISA runs the plan; `Pixels8` and `Pixels16` are the
// pixels per register tile that fit the ISA's registers beside two blocks of accumulators per
// pixel, two weight vectors and a broadcast.
#include <algorithm>
#include <array>

#include "kernels/conv_nchwc.h"
#include "kernels/epilogue_vec.h"

namespace grove::kernels {
namespace {

struct NchwcTaps {
  std::array<size_t, kConvNchwcMaxKernelW> column{};  // kernel column kx: its phase's offset plus kx / stride, in floats
};

// Output blocks [ob, ob + Blocks) of output row r, pixels [px, px + Pixels).
template <int L, int Blocks, int Pixels>
inline void nchwc_tile(const ConvNchwcCall& c, const NchwcTaps& taps, size_t ob, size_t r, size_t px) {
  using V = FloatVec<L>;
  const size_t block_weights = conv_nchwc_block_weights(c.in_blocks * L, c.kernel_h, c.kernel_w, L);
  V acc[Blocks][Pixels];
#pragma GCC unroll 2
  for (int o = 0; o < Blocks; ++o) {
    const V b = c.bias ? load_floats<V>(c.bias + (ob + size_t(o)) * L) : V{};
#pragma GCC unroll 16
    for (int p = 0; p < Pixels; ++p) acc[o][p] = b;
  }
  const float* w = c.w + ob * block_weights;
  for (size_t ib = 0; ib < c.in_blocks; ++ib)
    for (size_t ky = 0; ky < c.kernel_h; ++ky) {
      const float* row = c.x + ib * c.x_block_stride + (r * c.stride_h + ky) * c.x_row_stride + px * L;
      for (size_t kx = 0; kx < c.kernel_w; ++kx) {
        const float* p0 = row + taps.column[kx];
#pragma GCC unroll 16
        for (int ci = 0; ci < L; ++ci, w += L) {
          V wv[Blocks];
#pragma GCC unroll 2
          for (int o = 0; o < Blocks; ++o) wv[o] = load_floats<V>(w + size_t(o) * block_weights);
#pragma GCC unroll 16
          for (int p = 0; p < Pixels; ++p) {
            const V xv = splat_floats<V>(p0[p * L + ci]);
#pragma GCC unroll 2
            for (int o = 0; o < Blocks; ++o) acc[o][p] += wv[o] * xv;
          }
        }
      }
    }
  // Unrolled with constant indices, so that the accumulators stay in registers.
#pragma GCC unroll 2
  for (int o = 0; o < Blocks; ++o)
#pragma GCC unroll 16
    for (int p = 0; p < Pixels; ++p) {
      const size_t at = (ob + size_t(o)) * c.y_block_stride + (r * c.out_w + px + size_t(p)) * L;
      finish_floats(c.y + at, acc[o][p], c.residual ? c.residual + at : nullptr, c.activation);
    }
}

// Depthwise: output block ob of row r, pixels [px, px + Pixels): each lane sums its own
// channel's taps, one weight vector and one input vector per tap and pixel.
template <int L, int Pixels>
inline void nchwc_depthwise_tile(const ConvNchwcCall& c, const NchwcTaps& taps, size_t ob, size_t r, size_t px) {
  using V = FloatVec<L>;
  V acc[Pixels];
  const V b = c.bias ? load_floats<V>(c.bias + ob * L) : V{};
#pragma GCC unroll 16
  for (int p = 0; p < Pixels; ++p) acc[p] = b;
  const float* w = c.w + ob * c.kernel_h * c.kernel_w * L;
  for (size_t ky = 0; ky < c.kernel_h; ++ky) {
    const float* row = c.x + ob * c.x_block_stride + (r * c.stride_h + ky) * c.x_row_stride + px * L;
    for (size_t kx = 0; kx < c.kernel_w; ++kx, w += L) {
      const V wv = load_floats<V>(w);
      const float* p0 = row + taps.column[kx];
#pragma GCC unroll 16
      for (int p = 0; p < Pixels; ++p) acc[p] += wv * load_floats<V>(p0 + p * L);
    }
  }
#pragma GCC unroll 16
  for (int p = 0; p < Pixels; ++p) {
    const size_t at = ob * c.y_block_stride + (r * c.out_w + px + size_t(p)) * L;
    finish_floats(c.y + at, acc[p], c.residual ? c.residual + at : nullptr, c.activation);
  }
}

template <int L, int Pixels>
inline void nchwc_depthwise_tile_of(size_t n, const ConvNchwcCall& c, const NchwcTaps& taps, size_t ob, size_t r,
                                    size_t px) {
  if constexpr (Pixels > 1) {
    if (n < size_t(Pixels)) return nchwc_depthwise_tile_of<L, Pixels - 1>(n, c, taps, ob, r, px);
  }
  nchwc_depthwise_tile<L, Pixels>(c, taps, ob, r, px);
}

// Pixels [px, px + n) with n <= Pixels, as one tile of n pixels.
template <int L, int Blocks, int Pixels>
inline void nchwc_tile_of(size_t n, const ConvNchwcCall& c, const NchwcTaps& taps, size_t ob, size_t r, size_t px) {
  if constexpr (Pixels > 1) {
    if (n < size_t(Pixels)) return nchwc_tile_of<L, Blocks, Pixels - 1>(n, c, taps, ob, r, px);
  }
  nchwc_tile<L, Blocks, Pixels>(c, taps, ob, r, px);
}

template <int L, int Pixels>
void conv_nchwc_lanes(const ConvNchwcCall& c) {
  NchwcTaps taps;
  for (size_t kx = 0; kx < std::min(c.kernel_w, kConvNchwcMaxKernelW); ++kx)
    taps.column[kx] = (kx % c.stride_w) * c.x_phase_stride + kx / c.stride_w * L;
  // The row's pixels in tiles as even as can be (13 as 7 + 6, not 12 + 1): a tile of one pixel
  // has too few accumulators to hide the FMA latency.
  const size_t tiles = (c.out_w + Pixels - 1) / Pixels;
  if (c.depthwise) {
    for (size_t r = 0; r < c.out_rows; ++r)
      for (size_t ob = 0; ob < c.out_blocks; ++ob)
        for (size_t t = 0, px = 0; t < tiles; ++t) {
          const size_t n = (c.out_w - px) / (tiles - t) + ((c.out_w - px) % (tiles - t) != 0);
          nchwc_depthwise_tile_of<L, Pixels>(n, c, taps, ob, r, px);
          px += n;
        }
    return;
  }
  for (size_t r = 0; r < c.out_rows; ++r)
    for (size_t ob = 0; ob < c.out_blocks; ob += 2)
      for (size_t t = 0, px = 0; t < tiles; ++t) {
        const size_t n = (c.out_w - px) / (tiles - t) + ((c.out_w - px) % (tiles - t) != 0);
        if (ob + 1 < c.out_blocks) nchwc_tile_of<L, 2, Pixels>(n, c, taps, ob, r, px);
        else nchwc_tile_of<L, 1, Pixels>(n, c, taps, ob, r, px);
        px += n;
      }
}

template <int Pixels8, int Pixels16>
void conv_nchwc_impl(const ConvNchwcCall& c) {
  if (c.block == 16) return conv_nchwc_lanes<16, Pixels16>(c);
  conv_nchwc_lanes<8, Pixels8>(c);
}

}  // namespace
}  // namespace grove::kernels
