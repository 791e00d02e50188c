#pragma once
// The loop of conv_direct.h, included by conv_direct_{scalar,avx2,avx512}.cpp with their own
// ISA flags (internal linkage: the linker never merges the copies). `Vectors` pixel vectors
// per register tile: as many as the ISA's registers hold next to kConvDirectChannels of
// accumulators each, the vectors of one tap and its weight.
#include <algorithm>
#include <array>
#include <cstring>

#include "kernels/conv_direct.h"
#include "kernels/epilogue_vec.h"

namespace grove::kernels {
namespace {

struct DirectTaps {
  std::array<size_t, kConvDirectMaxKernelW> column{};  // kernel column kx: its phase's offset plus kx / stride
};

// Output channels [0, count) (count <= kConvDirectChannels) of output row r, pixel vectors
// [px, px + Vectors * Lanes); lanes past out_w are computed from the zero padding and dropped.
template <int Lanes, int Vectors>
inline void direct_tile(const ConvDirectCall& c, const DirectTaps& taps, const float* w, const float* bias, size_t count,
                        float* y, const float* residual, size_t r, size_t px) {
  using V = FloatVec<Lanes>;
  constexpr int C = int(kConvDirectChannels);
  V acc[C][Vectors];
#pragma GCC unroll 4
  for (int o = 0; o < C; ++o) {
    const V b = splat_floats<V>(bias && size_t(o) < count ? bias[o] : 0.0f);
#pragma GCC unroll 8
    for (int v = 0; v < Vectors; ++v) acc[o][v] = b;
  }
  const size_t row_step = c.x.stride_w * c.x.row_floats;
  for (size_t ic = 0; ic < c.x.in_channels; ++ic)
    for (size_t ky = 0; ky < c.kernel_h; ++ky) {
      const float* row = c.x.data + (ic * c.x.rows + r * c.stride_h + ky) * row_step + px;
      for (size_t kx = 0; kx < c.kernel_w; ++kx, w += C) {
        const float* p = row + taps.column[kx];
        V xv[Vectors];
#pragma GCC unroll 8
        for (int v = 0; v < Vectors; ++v) xv[v] = load_floats<V>(p + v * Lanes);
#pragma GCC unroll 4
        for (int o = 0; o < C; ++o) {
          const V wv = splat_floats<V>(w[o]);
#pragma GCC unroll 8
          for (int v = 0; v < Vectors; ++v) acc[o][v] += wv * xv[v];
        }
      }
    }
  // Unrolled with constant indices, so that the accumulators stay in registers.
#pragma GCC unroll 4
  for (int o = 0; o < C; ++o) {
    if (size_t(o) >= count) break;
#pragma GCC unroll 8
    for (int v = 0; v < Vectors; ++v) {
      const size_t at = size_t(o) * c.y_plane + r * c.out_w + px + size_t(v) * Lanes;
      const size_t valid = std::min<size_t>(Lanes, c.out_w - std::min(c.out_w, px + size_t(v) * Lanes));
      const float* res = residual ? residual + at : nullptr;
      if (valid == Lanes) {
        finish_floats(y + at, acc[o][v], res, c.activation);
      } else if (valid > 0) {  // the row's last vector: through a whole-vector buffer
        float in[Lanes] = {}, out[Lanes];
        if (res) std::memcpy(in, res, valid * sizeof(float));
        finish_floats(out, acc[o][v], res ? in : nullptr, c.activation);
        std::memcpy(y + at, out, valid * sizeof(float));
      }
    }
  }
}

// Pixel vectors [px, px + n * Lanes) with n <= Vectors, as one tile of n vectors.
template <int Lanes, int Vectors>
inline void direct_tile_of(size_t n, const ConvDirectCall& c, const DirectTaps& taps, const float* w, const float* bias,
                           size_t count, float* y, const float* residual, size_t r, size_t px) {
  if constexpr (Vectors > 1) {
    if (n < size_t(Vectors)) return direct_tile_of<Lanes, Vectors - 1>(n, c, taps, w, bias, count, y, residual, r, px);
  }
  direct_tile<Lanes, Vectors>(c, taps, w, bias, count, y, residual, r, px);
}

template <int Lanes, int Vectors>
void conv_direct_impl(const ConvDirectCall& c) {
  DirectTaps taps;
  for (size_t kx = 0; kx < std::min(c.kernel_w, kConvDirectMaxKernelW); ++kx)
    taps.column[kx] = (kx % c.x.stride_w) * c.x.row_floats + kx / c.x.stride_w;
  const size_t tap_count = c.x.in_channels * c.kernel_h * c.kernel_w;
  const size_t vectors = (c.out_w + Lanes - 1) / Lanes;
  for (size_t r = 0; r < c.out_rows; ++r)
    for (size_t oc = 0; oc < c.channels; oc += kConvDirectChannels) {
      const size_t count = std::min(kConvDirectChannels, c.channels - oc);
      const float* w = c.w + oc * tap_count;  // block oc / kConvDirectChannels
      const float* bias = c.bias ? c.bias + oc : nullptr;
      float* y = c.y + oc * c.y_plane;
      const float* residual = c.residual ? c.residual + oc * c.y_plane : nullptr;
      // The row's vectors in tiles as even as can be (7 as 4 + 3, not 6 + 1): a tile of one
      // vector has too few accumulators to hide the FMA latency.
      const size_t tiles = (vectors + Vectors - 1) / Vectors;
      for (size_t t = 0, v = 0; t < tiles; ++t) {
        const size_t n = (vectors - v) / (tiles - t) + ((vectors - v) % (tiles - t) != 0);
        direct_tile_of<Lanes, Vectors>(n, c, taps, w, bias, count, y, residual, r, v * Lanes);
        v += n;
      }
    }
}

}  // namespace
}  // namespace grove::kernels
