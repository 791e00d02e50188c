// AVX2 + FMA microkernel, 6 x 16: 12 ymm accumulators + 2 for the B row + 1 broadcast,
// 15 of the 16 registers. Same structure as the AVX-512 kernel: rows are a template
// parameter (1..6), columns past n are masked (maskload/maskstore). The first row tile of a
// panel asks for the next panel's slice into L2 as the AVX-512 kernel does.
//
// Compiled with -mavx2 -mfma (kernels.cmake); everything but the entry point has internal
// linkage.
#include <immintrin.h>

#include "kernels/gemm_microkernel.h"

#define GROVE_VMATH_WIDTH 8
#include "kernels/vector_math.h"

namespace grove::kernels {

namespace {

constexpr int kMR = 6;
constexpr int kNV = 2;  // 8-float vectors per row: NR = 16

// The exp-based activations are vector_math.h's, on 8-float vectors, as the Sigmoid, Gelu
// and Erf ops run them (vmath_avx2.cpp): fusing one into a GEMM changes no bit.
inline __m256 sigmoid_ps(__m256 x) { return (__m256)vsigmoid((vf)x); }
inline __m256 gelu_erf_ps(__m256 x) { return (__m256)vgelu_erf((vf)x); }
inline __m256 gelu_tanh_ps(__m256 x) { return (__m256)vgelu_tanh((vf)x); }
inline __m256 swish_ps(__m256 x, float alpha) { return (__m256)vswish((vf)x, alpha); }

template <int R>
inline void activate(__m256 (&acc)[R][kNV], const ActivationParams& p) {
  const __m256 zero = _mm256_setzero_ps(), one = _mm256_set1_ps(1.0f);
  const __m256 alpha = _mm256_set1_ps(p.alpha), beta = _mm256_set1_ps(p.beta);
#define GROVE_EACH(expr)                                \
  _Pragma("GCC unroll 8") for (int r = 0; r < R; ++r) \
    _Pragma("GCC unroll 4") for (int v = 0; v < kNV; ++v) { __m256 x = acc[r][v]; acc[r][v] = (expr); }
  switch (p.kind) {
    case Activation::identity: break;
    // x goes second: vmaxps/vminps return the second operand when either is NaN, so NaN
    // propagates as in ONNX Runtime (docs/correctness.md) at no cost.
    case Activation::relu: GROVE_EACH(_mm256_max_ps(zero, x)); break;
    case Activation::clip: GROVE_EACH(_mm256_min_ps(beta, _mm256_max_ps(alpha, x))); break;
    case Activation::leaky_relu:
      GROVE_EACH(_mm256_blendv_ps(x, _mm256_mul_ps(x, alpha), _mm256_cmp_ps(x, zero, _CMP_LT_OQ)));
      break;
    case Activation::sigmoid: GROVE_EACH(sigmoid_ps(x)); break;
    case Activation::hard_sigmoid:
      GROVE_EACH(_mm256_min_ps(one, _mm256_max_ps(zero, _mm256_fmadd_ps(x, alpha, beta))));
      break;
    case Activation::hard_swish: {
      const __m256 sixth = _mm256_set1_ps(1.0f / 6.0f), half = _mm256_set1_ps(0.5f);
      GROVE_EACH(_mm256_mul_ps(x, _mm256_min_ps(one, _mm256_max_ps(zero, _mm256_fmadd_ps(x, sixth, half)))));
      break;
    }
    case Activation::gelu_erf: GROVE_EACH(gelu_erf_ps(x)); break;
    case Activation::gelu_tanh: GROVE_EACH(gelu_tanh_ps(x)); break;
    case Activation::swish: GROVE_EACH(swish_ps(x, p.alpha)); break;
  }
#undef GROVE_EACH
}

template <int R>
void tile(const GemmTileArgs& t) {
  __m256 acc[R][kNV];
#pragma GCC unroll 8
  for (int r = 0; r < R; ++r)
#pragma GCC unroll 4
    for (int v = 0; v < kNV; ++v) acc[r][v] = _mm256_setzero_ps();

  const float* a = t.a;
  const float* b = t.b;
  const char* next = reinterpret_cast<const char*>(t.b_next);
  for (size_t p = 0; p < t.kc; ++p) {
    if (next) _mm_prefetch(next + p * 64, _MM_HINT_T1);  // the next panel's step: one line
    __m256 bv[kNV];
#pragma GCC unroll 4
    for (int v = 0; v < kNV; ++v) bv[v] = _mm256_load_ps(b + 8 * v);
#pragma GCC unroll 8
    for (int r = 0; r < R; ++r) {
      const __m256 av = _mm256_broadcast_ss(a + r);
#pragma GCC unroll 4
      for (int v = 0; v < kNV; ++v) acc[r][v] = _mm256_fmadd_ps(av, bv[v], acc[r][v]);
    }
    a += kMR;
    b += 8 * kNV;
  }

  __m256i mask[kNV];
  const __m256i lane = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
  for (int v = 0; v < kNV; ++v)
    mask[v] = _mm256_cmpgt_epi32(_mm256_set1_epi32(static_cast<int>(t.n) - 8 * v), lane);
  if (t.accumulate) {
#pragma GCC unroll 8
    for (int r = 0; r < R; ++r)
#pragma GCC unroll 4
      for (int v = 0; v < kNV; ++v)
        acc[r][v] = _mm256_add_ps(acc[r][v], _mm256_maskload_ps(t.c + r * t.c_stride + 8 * v, mask[v]));
  }
  if (t.finish) {
    if (t.bias) {
#pragma GCC unroll 4
      for (int v = 0; v < kNV; ++v) {
        const __m256 bias = _mm256_maskload_ps(t.bias + 8 * v, mask[v]);
#pragma GCC unroll 8
        for (int r = 0; r < R; ++r) acc[r][v] = _mm256_add_ps(acc[r][v], bias);
      }
    }
    if (t.row_bias) {
#pragma GCC unroll 8
      for (int r = 0; r < R; ++r) {
        const __m256 bias = _mm256_set1_ps(t.row_bias[r]);
#pragma GCC unroll 4
        for (int v = 0; v < kNV; ++v) acc[r][v] = _mm256_add_ps(acc[r][v], bias);
      }
    }
    if (t.residual) {
#pragma GCC unroll 8
      for (int r = 0; r < R; ++r)
#pragma GCC unroll 4
        for (int v = 0; v < kNV; ++v)
          acc[r][v] = _mm256_add_ps(acc[r][v],
                                    _mm256_maskload_ps(t.residual + r * t.residual_stride + 8 * v, mask[v]));
    }
    activate<R>(acc, t.activation);
  }
#pragma GCC unroll 8
  for (int r = 0; r < R; ++r)
#pragma GCC unroll 4
    for (int v = 0; v < kNV; ++v) _mm256_maskstore_ps(t.c + r * t.c_stride + 8 * v, mask[v], acc[r][v]);
}

}  // namespace

void f32_gemm_6x16_avx2(const GemmTileArgs& t) {
  static_assert(kMR == 6, "the switch below covers 1..6 rows");
  switch (t.m) {
    case 6: tile<6>(t); break;
    case 5: tile<5>(t); break;
    case 4: tile<4>(t); break;
    case 3: tile<3>(t); break;
    case 2: tile<2>(t); break;
    case 1: tile<1>(t); break;
    default: break;
  }
}

}  // namespace grove::kernels
