// The kernels of vmath_impl.h built for avx2: vectors of 8 floats.
#define GROVE_VMATH_WIDTH 8
#include "kernels/vmath_impl.h"

namespace grove::kernels {

const VMathKernels f32_vmath_avx2 = {vmath_binary, vmath_unary, vmath_softmax, vmath_softmax_tail, vmath_layernorm, vmath_fill_unkept, "f32_vmath_avx2"};

}  // namespace grove::kernels
