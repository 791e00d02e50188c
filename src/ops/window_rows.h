#pragma once
// The windows of a channels-last conv laid out as GEMM rows (tile_conv_nhwc.cpp for floats,
// tile_quant_conv_nhwc.cpp for bytes): output pixel i's row holds its window's taps in
// (kernel row, kernel column, channel) order, each tap a run of the input pixel's channels,
// so a window row that lies inside the input is one copied run of kw x C elements.
#include <algorithm>
#include <cstring>
#include <vector>

#include "ops/conv_geometry.h"

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
  for (size_t i = 0; i + 16 < bytes; i += 16) std::memcpy(d + i, s + i, 16);
  std::memcpy(d + bytes - 16, s + bytes - 16, 16);
}

// Output pixels [first, first + count) of image `n` of x [N, H, W, channels] (pixel = oy * OW +
// ox), one row of `stride` elements each: the k = kh x kw x channels taps (taps in the padding
// read `pad`), then zeros up to `stride`.
template <class T>
void lay_out_windows(const T* x, int64_t n, const WindowGeometry& g, int64_t channels, int64_t first, int64_t count,
                     T pad, size_t stride, std::vector<T>& out) {
  const int64_t ih = g.input[0], iw = g.input[1], ow = g.output[1], kh = g.kernel[0], kw = g.kernel[1];
  const auto run = static_cast<size_t>(channels), k = static_cast<size_t>(kh * kw * channels);
  out.resize(static_cast<size_t>(count) * stride);
  // Pixel by pixel within one kernel row: the pixels of an output row read the same input
  // line, and the loop over them is only the copies.
  for (int64_t i = 0; i < count;) {
    const int64_t oy = (first + i) / ow, ox0 = (first + i) % ow, pixels = std::min(count - i, ow - ox0);
    T* first_row = out.data() + static_cast<size_t>(i) * stride;
    for (int64_t ki = 0; ki < kh; ++ki) {
      const int64_t iy = oy * g.strides[0] - g.pads_begin[0] + ki * g.dilations[0];
      const T* line = x + (n * ih + iy) * iw * channels;
      for (int64_t p = 0; p < pixels; ++p) {
        T* taps = first_row + static_cast<size_t>(p) * stride + static_cast<size_t>(ki * kw) * run;
        if (iy < 0 || iy >= ih) {
          std::fill(taps, taps + static_cast<size_t>(kw) * run, pad);
          continue;
        }
        const int64_t ix0 = (ox0 + p) * g.strides[1] - g.pads_begin[1];
        if (g.dilations[1] == 1 && ix0 >= 0 && ix0 + kw <= iw) {  // the window row is one run
          copy_run(taps, line + ix0 * channels, static_cast<size_t>(kw) * run * sizeof(T));
          continue;
        }
        for (int64_t kj = 0; kj < kw; ++kj) {
          const int64_t ix = ix0 + kj * g.dilations[1];
          if (ix < 0 || ix >= iw) std::fill(taps + kj * channels, taps + kj * channels + channels, pad);
          else std::memcpy(taps + kj * channels, line + ix * channels, run * sizeof(T));
        }
      }
    }
    if (k < stride)
      for (int64_t p = 0; p < pixels; ++p) std::fill(first_row + p * stride + k, first_row + (p + 1) * stride, T(0));
    i += pixels;
  }
}

}  // namespace grove::tiling
