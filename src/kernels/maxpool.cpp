#include "kernels/maxpool.h"

namespace grove::kernels {

void max_pool2d_rows(const MaxPool2dRowsCall& call, Isa isa) {
  switch (isa) {
    case Isa::avx512: return f32_max_pool2d_rows_avx512(call);
    case Isa::avx2: return f32_max_pool2d_rows_avx2(call);
    case Isa::scalar: break;
  }
  f32_max_pool2d_rows_scalar(call);
}

void max_pool_nhwc_pixel(const float* const* taps, size_t tap_count, size_t channels, float* out, Isa isa) {
  switch (isa) {
    case Isa::avx512: return f32_max_pool_nhwc_pixel_avx512(taps, tap_count, channels, out);
    case Isa::avx2: return f32_max_pool_nhwc_pixel_avx2(taps, tap_count, channels, out);
    case Isa::scalar: break;
  }
  f32_max_pool_nhwc_pixel_scalar(taps, tap_count, channels, out);
}

}  // namespace grove::kernels
