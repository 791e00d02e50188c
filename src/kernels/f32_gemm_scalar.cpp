// Portable 4 x 8 microkernel: the fallback on CPUs without AVX2, and the simplest
// statement of the microkernel contract in gemm_microkernel.h.
#include "kernels/gemm_microkernel.h"

namespace grove::kernels {

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
        v = apply_activation(v, t.activation);
      }
      c[j] = v;
    }
  }
}

}  // namespace grove::kernels
