// The channels-last depthwise loop of dwconv_nhwc_impl.h, 8 floats per vector (avx2 flags from
// kernels.cmake).
#include "kernels/dwconv_nhwc_impl.h"

namespace grove::kernels {

void f32_dwconv2d_nhwc_avx2(const DwConvNhwcCall& call) { dwconv2d_nhwc_impl<8>(call); }

}  // namespace grove::kernels
