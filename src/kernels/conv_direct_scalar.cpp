// The direct few-channel conv of conv_direct_impl.h, 4 floats per vector, 2 vectors per register
// tile (SSE2, the baseline).
#include "kernels/conv_direct_impl.h"

namespace grove::kernels {

void f32_conv_direct_scalar(const ConvDirectCall& call) { conv_direct_impl<4, 2>(call); }

}  // namespace grove::kernels
