// The channels-last depthwise loop of dwconv_nhwc_impl.h, 16 floats per vector (avx512 flags from
// kernels.cmake).
#include "kernels/dwconv_nhwc_impl.h"

namespace grove::kernels {

void f32_dwconv2d_nhwc_avx512(const DwConvNhwcCall& call) { dwconv2d_nhwc_impl<16>(call); }

}  // namespace grove::kernels
