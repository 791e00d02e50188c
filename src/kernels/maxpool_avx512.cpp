// The max pool rows of maxpool_impl.h, 16 floats per vector.
#include "kernels/maxpool_impl.h"

namespace grove::kernels {

void f32_max_pool2d_rows_avx512(const MaxPool2dRowsCall& call) { max_pool2d_rows_impl<16>(call); }
void f32_max_pool_nhwc_pixel_avx512(const float* const* taps, size_t tap_count, size_t channels, float* out) {
  max_pool_nhwc_pixel_impl<16>(taps, tap_count, channels, out);
}

}  // namespace grove::kernels
