#include "kernels/conv_nchwc.h"

#include <algorithm>
#include <cstring>

namespace grove::kernels {

size_t conv_nchwc_block(Isa isa) { return isa == Isa::avx512 ? 16 : 8; }

size_t conv_nchwc_block_weights(size_t in_channels, size_t kernel_h, size_t kernel_w, size_t block) {
  return in_channels * kernel_h * kernel_w * block;
}

void pack_conv_nchwc_weights(const float* w, size_t out_channels, size_t in_channels, size_t kernel_h, size_t kernel_w,
                             size_t block, float* out) {
  const size_t taps = kernel_h * kernel_w;
  for (size_t ob = 0; ob < out_channels / block; ++ob)
    for (size_t ib = 0; ib < in_channels / block; ++ib)
      for (size_t t = 0; t < taps; ++t)
        for (size_t ci = 0; ci < block; ++ci)
          for (size_t co = 0; co < block; ++co)
            *out++ = w[((ob * block + co) * in_channels + ib * block + ci) * taps + t];
}

void pack_conv_nchwc_depthwise_weights(const float* w, size_t channels, size_t kernel_h, size_t kernel_w, size_t block,
                                       float* out) {
  const size_t taps = kernel_h * kernel_w;
  for (size_t b = 0; b < channels / block; ++b)
    for (size_t t = 0; t < taps; ++t)
      for (size_t c = 0; c < block; ++c) *out++ = w[(b * block + c) * taps + t];
}

size_t conv_nchwc_phase_pixels(size_t out_w, size_t kernel_w, size_t stride_w) {
  return out_w + (kernel_w - 1) / stride_w;
}

void pack_conv_nchwc_rows(const float* x, size_t in_blocks, size_t in_h, size_t in_w, size_t block, long iy0,
                          size_t rows, size_t pad_left, size_t stride_w, size_t phase_pixels, float* out) {
  const size_t s = stride_w, phase_floats = phase_pixels * block;
  for (size_t ib = 0; ib < in_blocks; ++ib)
    for (size_t r = 0; r < rows; ++r) {
      float* row = out + (ib * rows + r) * s * phase_floats;
      const long iy = iy0 + long(r);
      if (iy < 0 || iy >= long(in_h)) {
        std::memset(row, 0, s * phase_floats * sizeof(float));
        continue;
      }
      const float* in = x + (ib * in_h + size_t(iy)) * in_w * block;
      for (size_t p = 0; p < s; ++p, row += phase_floats) {
        // Pixel j of phase p is padded column j * s + p, input column j * s + p - pad_left:
        // inside the plane for j in [j0, j1).
        const long lead = long(pad_left) - long(p);
        const size_t j0 = std::min(phase_pixels, size_t(std::max(0L, (lead + long(s) - 1) / long(s))));
        const size_t j1 =
            std::clamp<size_t>(size_t(std::max(0L, (long(in_w) + lead + long(s) - 1) / long(s))), j0, phase_pixels);
        std::fill(row, row + j0 * block, 0.0f);
        const float* from = in + (long(j0 * s) - lead) * long(block);
        if (s == 1) std::memcpy(row + j0 * block, from, (j1 - j0) * block * sizeof(float));
        else
          for (size_t j = j0; j < j1; ++j) std::memcpy(row + j * block, from + (j - j0) * s * block, block * sizeof(float));
        std::fill(row + j1 * block, row + phase_floats, 0.0f);
      }
    }
}

void conv_nchwc(const ConvNchwcCall& call, Isa isa) {
  switch (isa) {
    case Isa::avx512: return f32_conv_nchwc_avx512(call);
    case Isa::avx2: return f32_conv_nchwc_avx2(call);
    case Isa::scalar: break;
  }
  f32_conv_nchwc_scalar(call);
}

}  // namespace grove::kernels
