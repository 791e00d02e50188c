#pragma once
// The depthwise loop, included by dwconv_scalar.cpp, dwconv_avx2.cpp and dwconv_avx512.cpp,
// each compiled with its own ISA flags. Internal linkage (anonymous namespace) so the linker
// never merges the copies built for different ISAs.
#include <algorithm>
#include <cstdint>

#include "kernels/dwconv.h"

namespace grove::kernels {
namespace {

// At most this many output columns per strip (the accumulator lives on the stack).
constexpr int64_t kStrip = 512;

inline void dwconv2d_impl(const DwConv2dCall& c) {
  const Conv2dShape& s = c.shape;
  const int64_t H = static_cast<int64_t>(s.in_h), W = static_cast<int64_t>(s.in_w);
  const int64_t OW = static_cast<int64_t>(s.out_w), KH = static_cast<int64_t>(s.kernel_h);
  const int64_t KW = static_cast<int64_t>(s.kernel_w), sw = static_cast<int64_t>(s.stride_w);
  float acc[kStrip];
  for (size_t oh = c.row_begin; oh < c.row_end; ++oh)
    for (int64_t c0 = 0; c0 < OW; c0 += kStrip) {
      const int64_t c1 = std::min(OW, c0 + kStrip), cols = c1 - c0;
      for (int64_t j = 0; j < cols; ++j) acc[j] = c.bias;
      for (int64_t kh = 0; kh < KH; ++kh) {
        const int64_t ih = static_cast<int64_t>(oh * s.stride_h + kh * s.dilation_h) - static_cast<int64_t>(s.pad_top);
        if (ih < 0 || ih >= H) continue;
        const float* row = c.x + ih * W;
        for (int64_t kw = 0; kw < KW; ++kw) {
          const float wv = c.w[kh * KW + kw];
          const int64_t shift = kw * static_cast<int64_t>(s.dilation_w) - static_cast<int64_t>(s.pad_left);
          // Output columns whose tap lands inside the row: ow * sw + shift in [0, W).
          const int64_t first = shift >= 0 ? 0 : (-shift + sw - 1) / sw;
          const int64_t last = W - 1 - shift < 0 ? -1 : (W - 1 - shift) / sw;
          const int64_t a = std::max(c0, first), b = std::min(c1, last + 1);
          // Indexed from acc and row themselves: a pointer moved before an array's start is
          // undefined behaviour even when only valid elements are read through it (UBSan).
          if (sw == 1) {
            for (int64_t ow = a; ow < b; ++ow) acc[ow - c0] += wv * row[ow + shift];
          } else {
            for (int64_t ow = a; ow < b; ++ow) acc[ow - c0] += wv * row[ow * sw + shift];
          }
        }
      }
      if (c.residual) {
        const float* res = c.residual + oh * s.out_w + c0;
        for (int64_t j = 0; j < cols; ++j) acc[j] += res[j];
      }
      // Relu and Clip (MobileNet's ReLU6) inline so they vectorise; the rest per element.
      switch (c.activation.kind) {
        case Activation::identity: break;
        case Activation::relu:
          for (int64_t j = 0; j < cols; ++j) acc[j] = std::max(acc[j], 0.0f);
          break;
        case Activation::clip:
          for (int64_t j = 0; j < cols; ++j) acc[j] = std::min(std::max(acc[j], c.activation.alpha), c.activation.beta);
          break;
        default:
          for (int64_t j = 0; j < cols; ++j) acc[j] = apply_activation(acc[j], c.activation);
      }
      std::copy_n(acc, cols, c.y + oh * s.out_w + c0);
    }
}

}  // namespace
}  // namespace grove::kernels
