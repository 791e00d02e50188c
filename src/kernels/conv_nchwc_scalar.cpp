// The blocked direct conv of conv_nchwc_impl.h: 2 pixels per register tile for 8-channel
// blocks, 2 for 16-channel ones (SSE2, the baseline).
#include "kernels/conv_nchwc_impl.h"

namespace grove::kernels {

void f32_conv_nchwc_scalar(const ConvNchwcCall& call) { conv_nchwc_impl<2, 2>(call); }

}  // namespace grove::kernels
