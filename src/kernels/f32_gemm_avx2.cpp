// AVX2 + FMA microkernel, 6 x 16: 12 ymm accumulators + 2 for the B row + 1 broadcast,
// 15 of the 16 registers. Same structure as the AVX-512 kernel: rows are a template
// parameter (1..6), columns past n are masked (maskload/maskstore). The first row tile of a
// panel asks for the next panel's slice into L2 as the AVX-512 kernel does.
//
// Compiled with -mavx2 -mfma (kernels.cmake); everything but the entry point has internal
// linkage.
#include <immintrin.h>

#include "kernels/gemm_microkernel.h"

namespace grove::kernels {

namespace {

constexpr int kMR = 6;
constexpr int kNV = 2;  // 8-float vectors per row: NR = 16

// e^x as in the AVX-512 kernel, but 2^n is built in the exponent bits, so x is clamped to
// where n stays a normal exponent: e^-87.3 ~ 1.2e-38 and e^88 ~ 1.7e38.
inline __m256 exp_ps(__m256 x) {
  x = _mm256_min_ps(_mm256_max_ps(x, _mm256_set1_ps(-87.33f)), _mm256_set1_ps(88.0f));
  const __m256 n = _mm256_round_ps(_mm256_mul_ps(x, _mm256_set1_ps(1.44269504088896341f)),
                                   _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  __m256 r = _mm256_fnmadd_ps(n, _mm256_set1_ps(0.693359375f), x);
  r = _mm256_fnmadd_ps(n, _mm256_set1_ps(-2.12194440e-4f), r);
  __m256 p = _mm256_set1_ps(1.0f / 5040.0f);
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f / 720.0f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f / 120.0f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f / 24.0f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f / 6.0f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(0.5f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f));
  const __m256i bits = _mm256_slli_epi32(_mm256_add_epi32(_mm256_cvtps_epi32(n), _mm256_set1_epi32(127)), 23);
  return _mm256_mul_ps(p, _mm256_castsi256_ps(bits));
}

inline __m256 sigmoid_ps(__m256 x) {
  const __m256 one = _mm256_set1_ps(1.0f);
  return _mm256_div_ps(one, _mm256_add_ps(one, exp_ps(_mm256_sub_ps(_mm256_setzero_ps(), x))));
}

// See gelu_erf_ps in f32_gemm_avx512.cpp for the method.
inline __m256 gelu_erf_ps(__m256 x) {
  const __m256 abs_x = _mm256_andnot_ps(_mm256_set1_ps(-0.0f), x);
  const __m256 z = _mm256_mul_ps(abs_x, _mm256_set1_ps(0.70710678118654752f));
  const __m256 one = _mm256_set1_ps(1.0f);
  const __m256 t = _mm256_div_ps(one, _mm256_fmadd_ps(z, _mm256_set1_ps(0.3275911f), one));
  __m256 poly = _mm256_set1_ps(1.061405429f);
  poly = _mm256_fmadd_ps(poly, t, _mm256_set1_ps(-1.453152027f));
  poly = _mm256_fmadd_ps(poly, t, _mm256_set1_ps(1.421413741f));
  poly = _mm256_fmadd_ps(poly, t, _mm256_set1_ps(-0.284496736f));
  poly = _mm256_fmadd_ps(poly, t, _mm256_set1_ps(0.254829592f));
  poly = _mm256_mul_ps(poly, t);
  const __m256 erfc = _mm256_mul_ps(poly, exp_ps(_mm256_mul_ps(_mm256_sub_ps(_mm256_setzero_ps(), z), z)));
  const __m256 negative = _mm256_cmp_ps(x, _mm256_setzero_ps(), _CMP_LT_OQ);
  const __m256 one_plus_erf = _mm256_blendv_ps(_mm256_sub_ps(_mm256_set1_ps(2.0f), erfc), erfc, negative);
  return _mm256_mul_ps(_mm256_mul_ps(x, _mm256_set1_ps(0.5f)), one_plus_erf);
}

inline __m256 gelu_tanh_ps(__m256 x) {
  const __m256 x2 = _mm256_mul_ps(x, x);
  const __m256 inner = _mm256_fmadd_ps(x2, _mm256_set1_ps(0.044715f), _mm256_set1_ps(1.0f));
  const __m256 two_u = _mm256_mul_ps(_mm256_mul_ps(x, inner), _mm256_set1_ps(2.0f * 0.79788456080286536f));
  return _mm256_mul_ps(x, sigmoid_ps(two_u));
}

template <int R>
inline void activate(__m256 (&acc)[R][kNV], const ActivationParams& p) {
  const __m256 zero = _mm256_setzero_ps(), one = _mm256_set1_ps(1.0f);
  const __m256 alpha = _mm256_set1_ps(p.alpha), beta = _mm256_set1_ps(p.beta);
#define GROVE_EACH(expr)                                \
  _Pragma("GCC unroll 8") for (int r = 0; r < R; ++r) \
    _Pragma("GCC unroll 4") for (int v = 0; v < kNV; ++v) { __m256 x = acc[r][v]; acc[r][v] = (expr); }
  switch (p.kind) {
    case Activation::identity: break;
    case Activation::relu: GROVE_EACH(_mm256_max_ps(x, zero)); break;
    case Activation::clip: GROVE_EACH(_mm256_min_ps(_mm256_max_ps(x, alpha), beta)); break;
    case Activation::leaky_relu:
      GROVE_EACH(_mm256_blendv_ps(x, _mm256_mul_ps(x, alpha), _mm256_cmp_ps(x, zero, _CMP_LT_OQ)));
      break;
    case Activation::sigmoid: GROVE_EACH(sigmoid_ps(x)); break;
    case Activation::hard_sigmoid:
      GROVE_EACH(_mm256_min_ps(_mm256_max_ps(_mm256_fmadd_ps(x, alpha, beta), zero), one));
      break;
    case Activation::hard_swish: {
      const __m256 sixth = _mm256_set1_ps(1.0f / 6.0f), half = _mm256_set1_ps(0.5f);
      GROVE_EACH(_mm256_mul_ps(x, _mm256_min_ps(_mm256_max_ps(_mm256_fmadd_ps(x, sixth, half), zero), one)));
      break;
    }
    case Activation::gelu_erf: GROVE_EACH(gelu_erf_ps(x)); break;
    case Activation::gelu_tanh: GROVE_EACH(gelu_tanh_ps(x)); break;
    case Activation::swish: GROVE_EACH(_mm256_mul_ps(x, sigmoid_ps(_mm256_mul_ps(alpha, x)))); break;
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
