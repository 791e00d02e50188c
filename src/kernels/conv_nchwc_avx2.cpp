// The blocked direct conv of conv_nchwc_impl.h: 6 pixels per register tile for 8-channel
// blocks, 3 for 16-channel ones (avx2 flags from kernels.cmake).
#include "kernels/conv_nchwc_impl.h"

namespace grove::kernels {

void f32_conv_nchwc_avx2(const ConvNchwcCall& call) { conv_nchwc_impl<6, 3>(call); }

}  // namespace grove::kernels
