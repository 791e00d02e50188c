// The depthwise loop of dwconv_impl.h built for scalar (flags from kernels.cmake).
#include "kernels/dwconv_impl.h"

namespace grove::kernels {

void f32_dwconv2d_scalar(const DwConv2dCall& call) { dwconv2d_impl(call); }

}  // namespace grove::kernels
