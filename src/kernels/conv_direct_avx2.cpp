// The direct few-channel conv of conv_direct_impl.h, 8 floats per vector, 2 vectors per register
// tile (avx2 flags from kernels.cmake).
#include "kernels/conv_direct_impl.h"

namespace grove::kernels {

void f32_conv_direct_avx2(const ConvDirectCall& call) { conv_direct_impl<8, 2>(call); }

}  // namespace grove::kernels
