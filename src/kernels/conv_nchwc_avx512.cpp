// The blocked direct conv of conv_nchwc_impl.h: 12 pixels per register tile for 8-channel
// blocks, 12 for 16-channel ones (avx512 flags from kernels.cmake).
#include "kernels/conv_nchwc_impl.h"

namespace grove::kernels {

void f32_conv_nchwc_avx512(const ConvNchwcCall& call) { conv_nchwc_impl<12, 12>(call); }

}  // namespace grove::kernels
