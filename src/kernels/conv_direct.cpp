#include "kernels/conv_direct.h"

#include <algorithm>
#include <cstring>

namespace grove::kernels {

namespace {
constexpr size_t kWidestLanes = 16;
}

size_t conv_direct_row_floats(size_t out_w, size_t kernel_w, size_t stride_w) {
  return (out_w + kWidestLanes - 1) / kWidestLanes * kWidestLanes + (kernel_w - 1) / stride_w;
}

void pack_conv_direct_rows(const float* x, size_t in_h, size_t in_w, long iy0, size_t pad_left, ConvDirectRows& rows) {
  const size_t s = rows.stride_w, width = rows.row_floats;
  for (size_t ic = 0; ic < rows.in_channels; ++ic)
    for (size_t r = 0; r < rows.rows; ++r) {
      float* out = rows.data + (ic * rows.rows + r) * s * width;
      const long iy = iy0 + long(r);
      if (iy < 0 || iy >= long(in_h)) {
        std::memset(out, 0, s * width * sizeof(float));
        continue;
      }
      const float* in = x + (ic * in_h + size_t(iy)) * in_w;
      for (size_t p = 0; p < s; ++p, out += width) {
        // Padded column j * s + p is input column j * s + p - pad_left: inside for j in [j0, j1).
        const long lead = long(pad_left) - long(p);
        const size_t j0 = std::min(width, size_t(std::max(0L, (lead + long(s) - 1) / long(s))));
        const size_t j1 = std::clamp<size_t>(size_t(std::max(0L, (long(in_w) + lead + long(s) - 1) / long(s))), j0, width);
        std::fill(out, out + j0, 0.0f);
        const float* from = in + (long(j0 * s) - lead);
        if (s == 1) std::memcpy(out + j0, from, (j1 - j0) * sizeof(float));
        else
          for (size_t j = j0; j < j1; ++j) out[j] = from[(j - j0) * s];
        std::fill(out + j1, out + width, 0.0f);
      }
    }
}

void pack_conv_direct_weights(const float* w, size_t out_channels, size_t taps, float* out) {
  const size_t blocks = (out_channels + kConvDirectChannels - 1) / kConvDirectChannels;
  for (size_t b = 0; b < blocks; ++b)
    for (size_t t = 0; t < taps; ++t)
      for (size_t o = 0; o < kConvDirectChannels; ++o) {
        const size_t oc = b * kConvDirectChannels + o;
        out[(b * taps + t) * kConvDirectChannels + o] = oc < out_channels ? w[oc * taps + t] : 0.0f;
      }
}

void conv_direct(const ConvDirectCall& call, Isa isa) {
  switch (isa) {
    case Isa::avx512: return f32_conv_direct_avx512(call);
    case Isa::avx2: return f32_conv_direct_avx2(call);
    case Isa::scalar: break;
  }
  f32_conv_direct_scalar(call);
}

}  // namespace grove::kernels
