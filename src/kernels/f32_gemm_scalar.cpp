// Portable 4 x 8 microkernel: the fallback on CPUs without AVX2, and the simplest
// statement of the microkernel contract in gemm_microkernel.h.
#include "kernels/gemm_microkernel.h"

#define GROVE_VMATH_WIDTH 4
#include "kernels/vector_math.h"

namespace grove::kernels {
namespace {

// The exp-based activations as vector_math.h computes them for the portable Sigmoid, Gelu and
// Erf ops (vmath_scalar.cpp), one lane used: a lane's value never depends on the others, so
// fusing one of them into the GEMM changes no bit. The rest are exact either way.
float activate(float v, const ActivationParams& p) {
  switch (p.kind) {
    case Activation::sigmoid: return vsigmoid(splat(v))[0];
    case Activation::gelu_erf: return vgelu_erf(splat(v))[0];
    case Activation::gelu_tanh: return vgelu_tanh(splat(v))[0];
    case Activation::swish: return vswish(splat(v), p.alpha)[0];
    default: return apply_activation(v, p);
  }
}

}  // namespace

void f32_gemm_scalar(const GemmTileArgs& t) {
  constexpr size_t MR = 4, NR = 8;
  float acc[MR][NR] = {};
  const float* a = t.a;
  const float* b = t.b;
  for (size_t p = 0; p < t.kc; ++p, a += MR, b += NR)
    for (size_t r = 0; r < MR; ++r)
      for (size_t j = 0; j < NR; ++j) acc[r][j] += a[r] * b[j];

  for (size_t r = 0; r < t.m; ++r) {
    float* c = t.c + r * t.c_stride;
    for (size_t j = 0; j < t.n; ++j) {
      float v = acc[r][j];
      if (t.accumulate) v += c[j];
      if (t.finish) {
        if (t.bias) v += t.bias[j];
        if (t.row_bias) v += t.row_bias[r];
        if (t.residual) v += t.residual[r * t.residual_stride + j];
        v = activate(v, t.activation);
      }
      c[j] = v;
    }
  }
}

}  // namespace grove::kernels
