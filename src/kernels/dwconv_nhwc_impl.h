#pragma once
// The channels-last depthwise loop, included by dwconv_nhwc_{scalar,avx2,avx512}.cpp, each
// compiled with its own ISA flags (internal linkage, so the linker never merges the copies).
// Vectors are GCC vector extensions of `Lanes` floats: the same source becomes 16-float zmm,
// 8-float ymm or 4-float xmm code; channels past the last whole vector take the one-float form.
//
// Per output row, channel vector by channel vector, kPixels output pixels are summed at once:
// each tap's weight vector is loaded once and feeds every pixel's accumulator, which also
// hides the FMA latency one accumulator chain would wait on. Pixels whose taps all fall inside
// the row run without checks; the few at the row's ends check each tap. A kernel row in the
// padding is skipped, which adds the same zero the reference adds.
#include <algorithm>
#include <cstdint>
#include <cstring>

#include "kernels/dwconv_nhwc.h"
#include "kernels/epilogue_vec.h"

namespace grove::kernels {
namespace {

// y = act(sum + residual) for one pixel's vector of channels at `at` (an offset into y).
template <class V>
inline void finish(const DwConvNhwcCall& c, size_t at, V sum) {
  finish_floats(c.y + at, sum, c.residual ? c.residual + at : nullptr, c.activation);
}

constexpr int kPixels = 8;

// Output pixels [ox0, ox0 + Count) of one row for the channel vector at `ch`, every tap inside
// the row. rows[ki] is input row ki's first pixel (channel ch), or null in the padding.
template <class V, int Count>
inline void inside_pixels(const DwConvNhwcCall& c, const float* const* rows, int64_t ox0, size_t ch, size_t y_row) {
  const Conv2dShape& s = c.shape;
  const auto C = static_cast<int64_t>(c.channels), KH = int64_t(s.kernel_h), KW = int64_t(s.kernel_w);
  const int64_t step = int64_t(s.stride_w) * C, ix0 = ox0 * int64_t(s.stride_w) - int64_t(s.pad_left);
  V acc[Count];
  const V bias = c.bias ? load_floats<V>(c.bias + ch) : splat_floats<V>(0.0f);
#pragma GCC unroll 8
  for (int q = 0; q < Count; ++q) acc[q] = bias;
  for (int64_t ki = 0; ki < KH; ++ki) {
    if (!rows[ki]) continue;
    for (int64_t kj = 0; kj < KW; ++kj) {
      const V w = load_floats<V>(c.w + (ki * KW + kj) * C + int64_t(ch));
      const float* p = rows[ki] + (ix0 + kj * int64_t(s.dilation_w)) * C;
#pragma GCC unroll 8
      for (int q = 0; q < Count; ++q) acc[q] += w * load_floats<V>(p + q * step);
    }
  }
#pragma GCC unroll 8
  for (int q = 0; q < Count; ++q) finish(c, y_row + size_t(ox0 + q) * c.channels + ch, acc[q]);
}

// A K x K kernel's weights for one channel vector, held in registers over a row's pixels.
template <class V, int K>
struct SquareTaps {
  V w[K * K];
};

// inside_pixels for a K x K kernel of stride S (no dilation) whose weights are in registers.
// At stride 1 each kernel row's input pixels are loaded once into registers and feed every
// output pixel and tap that reads them; at stride 2 a group's pixels would not fit beside the
// taps and sums, so each FMA loads its own. The same sums in the same order as inside_pixels.
template <class V, int K, int S, int Count>
inline void inside_pixels_square(const DwConvNhwcCall& c, const SquareTaps<V, K>& taps, V bias,
                                 const float* const* rows, int64_t ox0, size_t ch, size_t y_row) {
  const auto C = static_cast<int64_t>(c.channels);
  const int64_t ix0 = ox0 * S - int64_t(c.shape.pad_left);
  constexpr int kSpan = (Count - 1) * S + K;  // input pixels a kernel row of the group reads
  V acc[Count];
#pragma GCC unroll 8
  for (int q = 0; q < Count; ++q) acc[q] = bias;
#pragma GCC unroll 8
  for (int ki = 0; ki < K; ++ki) {
    if (!rows[ki]) continue;
    const float* p = rows[ki] + ix0 * C;
    if constexpr (S == 1) {
      V x[kSpan];
#pragma GCC unroll 16
      for (int j = 0; j < kSpan; ++j) x[j] = load_floats<V>(p + j * C);
#pragma GCC unroll 8
      for (int kj = 0; kj < K; ++kj)
#pragma GCC unroll 8
        for (int q = 0; q < Count; ++q) acc[q] += taps.w[ki * K + kj] * x[q + kj];
    } else {
#pragma GCC unroll 8
      for (int kj = 0; kj < K; ++kj)
#pragma GCC unroll 8
        for (int q = 0; q < Count; ++q) acc[q] += taps.w[ki * K + kj] * load_floats<V>(p + (q * S + kj) * C);
    }
  }
#pragma GCC unroll 8
  for (int q = 0; q < Count; ++q) finish(c, y_row + size_t(ox0 + q) * c.channels + ch, acc[q]);
}

// edge_pixel for a K x K kernel of stride S whose weights are in registers: the taps outside
// the row are skipped, the rest summed in the same order.
template <class V, int K, int S>
inline void edge_pixel_square(const DwConvNhwcCall& c, const SquareTaps<V, K>& taps, V bias, const float* const* rows,
                              int64_t ox, size_t ch, size_t y_row) {
  const auto C = static_cast<int64_t>(c.channels);
  const int64_t W = int64_t(c.shape.in_w), ix0 = ox * S - int64_t(c.shape.pad_left);
  V acc = bias;
#pragma GCC unroll 8
  for (int ki = 0; ki < K; ++ki) {
    if (!rows[ki]) continue;
#pragma GCC unroll 8
    for (int kj = 0; kj < K; ++kj)
      if (ix0 + kj >= 0 && ix0 + kj < W) acc += taps.w[ki * K + kj] * load_floats<V>(rows[ki] + (ix0 + kj) * C);
  }
  finish(c, y_row + size_t(ox) * c.channels + ch, acc);
}

// Pixels per group with the weights in registers: 8 independent sums keep both FMA pipes
// busy through the FMA latency where 32 vector registers hold them beside the taps; with 16
// (AVX2, SSE2) they would spill, so 4 (docs/kernels.md).
template <class V>
constexpr int square_pixels() {
  return sizeof(V) == 64 ? 8 : 4;
}

// One output pixel whose taps may leave the row: each tap checked.
template <class V>
inline void edge_pixel(const DwConvNhwcCall& c, const float* const* rows, int64_t ox, size_t ch, size_t y_row) {
  const Conv2dShape& s = c.shape;
  const auto C = static_cast<int64_t>(c.channels), KH = int64_t(s.kernel_h), KW = int64_t(s.kernel_w);
  const int64_t W = int64_t(s.in_w), ix0 = ox * int64_t(s.stride_w) - int64_t(s.pad_left);
  V acc = c.bias ? load_floats<V>(c.bias + ch) : splat_floats<V>(0.0f);
  for (int64_t ki = 0; ki < KH; ++ki) {
    if (!rows[ki]) continue;
    for (int64_t kj = 0; kj < KW; ++kj) {
      const int64_t ix = ix0 + kj * int64_t(s.dilation_w);
      if (ix < 0 || ix >= W) continue;
      acc += load_floats<V>(c.w + (ki * KW + kj) * C + int64_t(ch)) * load_floats<V>(rows[ki] + ix * C);
    }
  }
  finish(c, y_row + size_t(ox) * c.channels + ch, acc);
}

// Channels [ch, ch + lanes of V) of output row oy.
template <class V>
inline void row_of_vectors(const DwConvNhwcCall& c, const float* const* rows, size_t ch, size_t y_row, int64_t first,
                           int64_t last) {
  const int64_t OW = int64_t(c.shape.out_w);
  for (int64_t ox = 0; ox < std::min(first, OW); ++ox) edge_pixel<V>(c, rows, ox, ch, y_row);
  int64_t ox = first;
  for (; ox + kPixels <= last; ox += kPixels) inside_pixels<V, kPixels>(c, rows, ox, ch, y_row);
  for (; ox < last; ++ox) inside_pixels<V, 1>(c, rows, ox, ch, y_row);
  for (ox = std::max(last, first); ox < OW; ++ox) edge_pixel<V>(c, rows, ox, ch, y_row);
}

// The inside pixels [ox, last) left after the whole groups, fewer than Max + 1, as one group.
template <class V, int K, int S, int Max>
inline void remainder_square(const DwConvNhwcCall& c, const SquareTaps<V, K>& taps, V bias, const float* const* rows,
                             int64_t ox, int64_t last, size_t ch, size_t y_row) {
  if constexpr (Max > 0) {
    if (last - ox == Max) return inside_pixels_square<V, K, S, Max>(c, taps, bias, rows, ox, ch, y_row);
    remainder_square<V, K, S, Max - 1>(c, taps, bias, rows, ox, last, ch, y_row);
  }
}

// row_of_vectors for a K x K kernel of stride S, its weights loaded once for the row.
template <class V, int K, int S>
inline void row_of_vectors_square(const DwConvNhwcCall& c, const float* const* rows, size_t ch, size_t y_row,
                                  int64_t first, int64_t last) {
  const int64_t OW = int64_t(c.shape.out_w);
  SquareTaps<V, K> taps;
#pragma GCC unroll 32
  for (int t = 0; t < K * K; ++t) taps.w[t] = load_floats<V>(c.w + size_t(t) * c.channels + ch);
  const V bias = c.bias ? load_floats<V>(c.bias + ch) : splat_floats<V>(0.0f);
  constexpr int kGroup = square_pixels<V>();
  for (int64_t ox = 0; ox < std::min(first, OW); ++ox) edge_pixel_square<V, K, S>(c, taps, bias, rows, ox, ch, y_row);
  int64_t ox = first;
  for (; ox + kGroup <= last; ox += kGroup) inside_pixels_square<V, K, S, kGroup>(c, taps, bias, rows, ox, ch, y_row);
  remainder_square<V, K, S, kGroup - 1>(c, taps, bias, rows, ox, last, ch, y_row);
  for (ox = std::max(last, first); ox < OW; ++ox) edge_pixel_square<V, K, S>(c, taps, bias, rows, ox, ch, y_row);
}

// The 3x3 and 5x5 kernels of MobileNets and EfficientNets at stride 1 or 2 keep their weights
// and input pixels in registers.
template <class V>
inline void row_of(const DwConvNhwcCall& c, const float* const* rows, size_t ch, size_t y_row, int64_t first,
                   int64_t last) {
  const Conv2dShape& s = c.shape;
  const size_t k = s.kernel_h;
  if (s.kernel_w == k && (k == 3 || k == 5) && s.dilation_w == 1 && (s.stride_w == 1 || s.stride_w == 2)) {
    if (k == 3) {
      if (s.stride_w == 1) return row_of_vectors_square<V, 3, 1>(c, rows, ch, y_row, first, last);
      return row_of_vectors_square<V, 3, 2>(c, rows, ch, y_row, first, last);
    }
    if (s.stride_w == 1) return row_of_vectors_square<V, 5, 1>(c, rows, ch, y_row, first, last);
    return row_of_vectors_square<V, 5, 2>(c, rows, ch, y_row, first, last);
  }
  row_of_vectors<V>(c, rows, ch, y_row, first, last);
}

template <int Lanes>
void dwconv2d_nhwc_impl(const DwConvNhwcCall& c) {
  using V = FloatVec<Lanes>;
  const Conv2dShape& s = c.shape;
  const int64_t H = int64_t(s.in_h), W = int64_t(s.in_w), OW = int64_t(s.out_w), KH = int64_t(s.kernel_h);
  const int64_t KW = int64_t(s.kernel_w), sw = int64_t(s.stride_w), left = int64_t(s.pad_left);
  const int64_t reach = (KW - 1) * int64_t(s.dilation_w);
  // Output columns [first, last) read only columns inside the row: ox * sw - left >= 0 and
  // ox * sw - left + reach < W.
  const int64_t first = std::min(OW, (left + sw - 1) / sw);
  const int64_t last = W - 1 - reach + left < 0 ? first : std::max(first, std::min(OW, (W - 1 - reach + left) / sw + 1));
  constexpr auto kMaxKernel = int64_t(kDwConvNhwcMaxKernelRows);
  const float* rows[kMaxKernel];
  const float* rows_at[kMaxKernel];
  for (size_t oy = c.row_begin; oy < c.row_end; ++oy) {
    for (int64_t ki = 0; ki < KH && ki < kMaxKernel; ++ki) {
      const int64_t iy = int64_t(oy * s.stride_h + size_t(ki) * s.dilation_h) - int64_t(s.pad_top);
      rows[ki] = iy >= 0 && iy < H ? c.x + size_t(iy * W) * c.channels : nullptr;
    }
    const size_t y_row = oy * size_t(OW) * c.channels;
    size_t ch = c.c_begin;
    auto at_channel = [&](size_t offset) {
      for (int64_t ki = 0; ki < KH && ki < kMaxKernel; ++ki) rows_at[ki] = rows[ki] ? rows[ki] + offset : nullptr;
    };
    for (; ch + Lanes <= c.c_end; ch += Lanes) {
      at_channel(ch);
      row_of<V>(c, rows_at, ch, y_row, first, last);
    }
    for (; ch < c.c_end; ++ch) {  // channels past the last whole vector
      at_channel(ch);
      row_of<float>(c, rows_at, ch, y_row, first, last);
    }
  }
}

}  // namespace
}  // namespace grove::kernels
