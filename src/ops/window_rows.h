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

// Output pixels [first, first + count) of image `n` of x [N, H, W, channels] (pixel = oy * OW +
// ox), one row of `stride` elements each: the k = kh x kw x channels taps (taps in the padding
// read `pad`), then zeros up to `stride`.
template <class T>
void lay_out_windows(const T* x, int64_t n, const WindowGeometry& g, int64_t channels, int64_t first, int64_t count,
                     T pad, size_t stride, std::vector<T>& out) {
  const int64_t ih = g.input[0], iw = g.input[1], ow = g.output[1], kh = g.kernel[0], kw = g.kernel[1];
  const auto run = static_cast<size_t>(channels), k = static_cast<size_t>(kh * kw * channels);
  out.resize(static_cast<size_t>(count) * stride);
  for (int64_t i = 0; i < count; ++i) {
    const int64_t oy = (first + i) / ow, ox = (first + i) % ow;
    T* dst = out.data() + static_cast<size_t>(i) * stride;
    const int64_t ix0 = ox * g.strides[1] - g.pads_begin[1];
    for (int64_t ki = 0; ki < kh; ++ki) {
      T* taps = dst + static_cast<size_t>(ki * kw) * run;
      const int64_t iy = oy * g.strides[0] - g.pads_begin[0] + ki * g.dilations[0];
      if (iy < 0 || iy >= ih) {
        std::fill(taps, taps + static_cast<size_t>(kw) * run, pad);
        continue;
      }
      const T* line = x + (n * ih + iy) * iw * channels;
      if (g.dilations[1] == 1 && ix0 >= 0 && ix0 + kw <= iw) {  // the window row is one run
        std::memcpy(taps, line + ix0 * channels, static_cast<size_t>(kw) * run * sizeof(T));
        continue;
      }
      for (int64_t kj = 0; kj < kw; ++kj) {
        const int64_t ix = ix0 + kj * g.dilations[1];
        if (ix < 0 || ix >= iw) std::fill(taps + kj * channels, taps + kj * channels + channels, pad);
        else std::memcpy(taps + kj * channels, line + ix * channels, run * sizeof(T));
      }
    }
    std::fill(dst + k, dst + stride, T(0));
  }
}

}  // namespace grove::tiling
