#pragma once
// The windows of a channels-last conv laid out as GEMM rows (tile_conv_nhwc.cpp for floats,
// tile_quant_conv_nhwc.cpp for bytes): output pixel i's row holds its window's taps in
// (kernel row, kernel column, channel) order, each tap a run of the input pixel's channels,
// so a window row that lies inside the input is one copied run of kw x C elements.
#include <algorithm>
#include <cstring>
#include <vector>

#include "ops/conv/conv_geometry.h"

namespace grove::tiling {

// One window row's run of `bytes` bytes. A stem's runs are a few dozen bytes (7 taps of 3
// channels), where a call to memcpy per run costs more than the copy: up to 64 bytes go as
// 16-byte copies the compiler inlines, the last one overlapping.
inline void copy_run(void* dst, const void* src, size_t bytes) {
  auto* d = static_cast<unsigned char*>(dst);
  const auto* s = static_cast<const unsigned char*>(src);
  if (bytes < 16 || bytes > 64) {
    std::memcpy(d, s, bytes);
    return;
  }
  std::memcpy(d, s, 16);
  if (bytes > 32) {
    std::memcpy(d + 16, s + 16, 16);
    if (bytes > 48) std::memcpy(d + 32, s + 32, 16);
  }
  std::memcpy(d + bytes - 16, s + bytes - 16, 16);
}

// Output pixels [first, first + count) of image `n` of x [N, H, W, channels] (pixel = oy * OW +
// ox), one row of `stride` elements each: the k = kh x kw x channels taps (taps in the padding
// read `pad`), then zeros up to `stride`.
template <class T>
void lay_out_windows(const T* x, int64_t n, const WindowGeometry& g, int64_t channels, int64_t first, int64_t count,
                     T pad, size_t stride, std::vector<T>& out) {
  // The geometry in locals: stores through T* (bytes) may alias anything, and the compiler
  // would read each vector entry again after every copy.
  const int64_t ih = g.input[0], iw = g.input[1], ow = g.output[1], kh = g.kernel[0], kw = g.kernel[1];
  const int64_t sy = g.strides[0], sx = g.strides[1], py = g.pads_begin[0], px = g.pads_begin[1];
  const int64_t dy = g.dilations[0], dx = g.dilations[1];
  const auto run = static_cast<size_t>(channels), k = static_cast<size_t>(kh * kw * channels);
  const size_t row_bytes = static_cast<size_t>(kw) * run * sizeof(T);
  out.resize(static_cast<size_t>(count) * stride);
  // Pixel by pixel within one kernel row: the pixels of an output row read the same input
  // line, and the loop over them is only the copies.
  for (int64_t i = 0; i < count;) {
    const int64_t oy = (first + i) / ow, ox0 = (first + i) % ow, pixels = std::min(count - i, ow - ox0);
    T* first_row = out.data() + static_cast<size_t>(i) * stride;
    for (int64_t ki = 0; ki < kh; ++ki) {
      const int64_t iy = oy * sy - py + ki * dy;
      T* taps = first_row + static_cast<size_t>(ki * kw) * run;
      if (iy < 0 || iy >= ih) {
        for (int64_t p = 0; p < pixels; ++p)
          std::fill(taps + static_cast<size_t>(p) * stride, taps + static_cast<size_t>(p) * stride + kw * run, pad);
        continue;
      }
      const T* line = x + (n * ih + iy) * iw * channels;
      auto tap_by_tap = [&](int64_t p) {  // a window row that reaches into the padding
        const int64_t ix0 = (ox0 + p) * sx - px;
        T* t = taps + static_cast<size_t>(p) * stride;
        for (int64_t kj = 0; kj < kw; ++kj) {
          const int64_t ix = ix0 + kj * dx;
          if (ix < 0 || ix >= iw) std::fill(t + kj * channels, t + kj * channels + channels, pad);
          else std::memcpy(t + kj * channels, line + ix * channels, run * sizeof(T));
        }
      };
      if (dx != 1) {
        for (int64_t p = 0; p < pixels; ++p) tap_by_tap(p);
        continue;
      }
      // The pixels whose window row lies inside the line, [p0, p1): one run each.
      int64_t p0 = 0, p1 = pixels;
      while (p0 < p1 && (ox0 + p0) * sx - px < 0) tap_by_tap(p0++);
      while (p1 > p0 && (ox0 + p1 - 1) * sx - px + kw > iw) tap_by_tap(--p1);
      const T* src = line + ((ox0 + p0) * sx - px) * channels;
      const size_t src_step = static_cast<size_t>(sx) * run;
      T* dst = taps + static_cast<size_t>(p0) * stride;
      if (row_bytes >= 16 && row_bytes <= 32) {  // a stem's few channels: two 16-byte copies
        for (int64_t p = p0; p < p1; ++p, src += src_step, dst += stride) {
          std::memcpy(dst, src, 16);
          std::memcpy(reinterpret_cast<char*>(dst) + row_bytes - 16, reinterpret_cast<const char*>(src) + row_bytes - 16, 16);
        }
      } else {
        for (int64_t p = p0; p < p1; ++p, src += src_step, dst += stride) copy_run(dst, src, row_bytes);
      }
    }
    if (k < stride)
      for (int64_t p = 0; p < pixels; ++p) std::fill(first_row + p * stride + k, first_row + (p + 1) * stride, T(0));
    i += pixels;
  }
}

}  // namespace grove::tiling
