// The kernels of vmath_impl.h built for scalar: vectors of 4 floats (GCC lowers them to
// whatever the baseline target has, SSE2 on x86-64).
#define GROVE_VMATH_WIDTH 4
#include "kernels/vmath_impl.h"

namespace grove::kernels {

const VMathKernels f32_vmath_scalar = {vmath_binary, vmath_unary, vmath_softmax, vmath_softmax_tail, vmath_layernorm, vmath_fill_unkept, "f32_vmath_scalar"};

}  // namespace grove::kernels
