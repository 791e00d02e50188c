#include "kernels/dwconv_nhwc.h"

namespace grove::kernels {

void dwconv2d_nhwc(const DwConvNhwcCall& call, Isa isa) {
  switch (isa) {
    case Isa::avx512: return f32_dwconv2d_nhwc_avx512(call);
    case Isa::avx2: return f32_dwconv2d_nhwc_avx2(call);
    case Isa::scalar: break;
  }
  f32_dwconv2d_nhwc_scalar(call);
}

void pack_dwconv_nhwc_weights(const float* w, size_t channels, size_t taps, float* out) {
  for (size_t c = 0; c < channels; ++c)
    for (size_t t = 0; t < taps; ++t) out[t * channels + c] = w[c * taps + t];
}

}  // namespace grove::kernels
