// The direct few-channel conv of conv_direct_impl.h, 16 floats per vector, 5 vectors per register
// tile (avx512 flags from kernels.cmake).
#include "kernels/conv_direct_impl.h"

namespace grove::kernels {

void f32_conv_direct_avx512(const ConvDirectCall& call) { conv_direct_impl<16, 5>(call); }

}  // namespace grove::kernels
