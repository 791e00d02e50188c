// The depthwise loop of dwconv_impl.h built for avx512 (flags from kernels.cmake).
#include "kernels/dwconv_impl.h"

namespace grove::kernels {

void f32_dwconv2d_avx512(const DwConv2dCall& call) { dwconv2d_impl(call); }

}  // namespace grove::kernels
