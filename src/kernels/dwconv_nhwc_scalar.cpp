// The channels-last depthwise loop of dwconv_nhwc_impl.h, 4 floats per vector (SSE2, the
// x86-64 baseline).
#include "kernels/dwconv_nhwc_impl.h"

namespace grove::kernels {

void f32_dwconv2d_nhwc_scalar(const DwConvNhwcCall& call) { dwconv2d_nhwc_impl<4>(call); }

}  // namespace grove::kernels
