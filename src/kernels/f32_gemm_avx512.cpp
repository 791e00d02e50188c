// AVX-512 microkernel, 14 x 32: 28 zmm accumulators + 2 for the B row + broadcasts folded
// into the FMAs' memory operand, i.e. all 32 registers. Per k step it issues 28 FMAs for
// 2 vector loads and 14 scalar broadcasts, so it is bound by FMA throughput, not loads.
// Rows are a template parameter (1..14) so a short last tile does only the work it needs;
// columns past n are handled with masks.
//
// Compiled with -mavx512f/dq/bw/vl -mfma (kernels.cmake). Everything but the entry point
// has internal linkage so no AVX-512 code can leak into generic inline functions.
#include <immintrin.h>

#include "kernels/gemm_microkernel.h"

namespace grove::kernels {

namespace {

constexpr int kMR = 14;
constexpr int kNV = 2;  // 16-float vectors per row: NR = 32

// e^x: x = n ln2 + r with |r| <= ln2/2, e^r by its degree-7 Taylor polynomial (error
// ~5e-9 there, below float rounding), then scaled by 2^n with scalef, which also gives
// 0 and inf cleanly at the ends of the range.
inline __m512 exp_ps(__m512 x) {
  x = _mm512_min_ps(_mm512_max_ps(x, _mm512_set1_ps(-104.0f)), _mm512_set1_ps(89.0f));
  const __m512 n = _mm512_roundscale_ps(_mm512_mul_ps(x, _mm512_set1_ps(1.44269504088896341f)),
                                        _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  __m512 r = _mm512_fnmadd_ps(n, _mm512_set1_ps(0.693359375f), x);  // ln2 split: exact high part
  r = _mm512_fnmadd_ps(n, _mm512_set1_ps(-2.12194440e-4f), r);
  __m512 p = _mm512_set1_ps(1.0f / 5040.0f);
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f / 720.0f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f / 120.0f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f / 24.0f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f / 6.0f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(0.5f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f));
  return _mm512_scalef_ps(p, n);
}

inline __m512 sigmoid_ps(__m512 x) {
  const __m512 one = _mm512_set1_ps(1.0f);
  return _mm512_div_ps(one, _mm512_add_ps(one, exp_ps(_mm512_sub_ps(_mm512_setzero_ps(), x))));
}

// 0.5 x (1 + erf(x / sqrt 2)). erfc(z), z = |x|/sqrt 2, by Abramowitz & Stegun 7.1.26
// (absolute error <= 1.5e-7); for x < 0, 1 + erf = erfc(z) directly, so the negative tail
// never suffers the cancellation of 1 - erf.
inline __m512 gelu_erf_ps(__m512 x) {
  const __m512 z = _mm512_mul_ps(_mm512_abs_ps(x), _mm512_set1_ps(0.70710678118654752f));
  const __m512 one = _mm512_set1_ps(1.0f);
  const __m512 t = _mm512_div_ps(one, _mm512_fmadd_ps(z, _mm512_set1_ps(0.3275911f), one));
  __m512 poly = _mm512_set1_ps(1.061405429f);
  poly = _mm512_fmadd_ps(poly, t, _mm512_set1_ps(-1.453152027f));
  poly = _mm512_fmadd_ps(poly, t, _mm512_set1_ps(1.421413741f));
  poly = _mm512_fmadd_ps(poly, t, _mm512_set1_ps(-0.284496736f));
  poly = _mm512_fmadd_ps(poly, t, _mm512_set1_ps(0.254829592f));
  poly = _mm512_mul_ps(poly, t);
  const __m512 erfc = _mm512_mul_ps(poly, exp_ps(_mm512_mul_ps(_mm512_sub_ps(_mm512_setzero_ps(), z), z)));
  const __mmask16 negative = _mm512_cmp_ps_mask(x, _mm512_setzero_ps(), _CMP_LT_OQ);
  const __m512 one_plus_erf = _mm512_mask_blend_ps(negative, _mm512_sub_ps(_mm512_set1_ps(2.0f), erfc), erfc);
  return _mm512_mul_ps(_mm512_mul_ps(x, _mm512_set1_ps(0.5f)), one_plus_erf);
}

// 0.5 x (1 + tanh u) = x * sigmoid(2u), u = sqrt(2/pi) (x + 0.044715 x^3).
inline __m512 gelu_tanh_ps(__m512 x) {
  const __m512 x2 = _mm512_mul_ps(x, x);
  const __m512 inner = _mm512_fmadd_ps(x2, _mm512_set1_ps(0.044715f), _mm512_set1_ps(1.0f));
  const __m512 two_u = _mm512_mul_ps(_mm512_mul_ps(x, inner), _mm512_set1_ps(2.0f * 0.79788456080286536f));
  return _mm512_mul_ps(x, sigmoid_ps(two_u));
}

template <int R>
inline void activate(__m512 (&acc)[R][kNV], const ActivationParams& p) {
  const __m512 zero = _mm512_setzero_ps(), one = _mm512_set1_ps(1.0f);
  const __m512 alpha = _mm512_set1_ps(p.alpha), beta = _mm512_set1_ps(p.beta);
#define GROVE_EACH(expr)                 \
  _Pragma("GCC unroll 16") for (int r = 0; r < R; ++r) \
    _Pragma("GCC unroll 4") for (int v = 0; v < kNV; ++v) { __m512 x = acc[r][v]; acc[r][v] = (expr); }
  switch (p.kind) {
    case Activation::identity: break;
    case Activation::relu: GROVE_EACH(_mm512_max_ps(x, zero)); break;
    case Activation::clip: GROVE_EACH(_mm512_min_ps(_mm512_max_ps(x, alpha), beta)); break;
    case Activation::leaky_relu:
      GROVE_EACH(_mm512_mask_mul_ps(x, _mm512_cmp_ps_mask(x, zero, _CMP_LT_OQ), x, alpha));
      break;
    case Activation::sigmoid: GROVE_EACH(sigmoid_ps(x)); break;
    case Activation::hard_sigmoid:
      GROVE_EACH(_mm512_min_ps(_mm512_max_ps(_mm512_fmadd_ps(x, alpha, beta), zero), one));
      break;
    case Activation::hard_swish: {
      const __m512 sixth = _mm512_set1_ps(1.0f / 6.0f), half = _mm512_set1_ps(0.5f);
      GROVE_EACH(_mm512_mul_ps(x, _mm512_min_ps(_mm512_max_ps(_mm512_fmadd_ps(x, sixth, half), zero), one)));
      break;
    }
    case Activation::gelu_erf: GROVE_EACH(gelu_erf_ps(x)); break;
    case Activation::gelu_tanh: GROVE_EACH(gelu_tanh_ps(x)); break;
    case Activation::swish: GROVE_EACH(_mm512_mul_ps(x, sigmoid_ps(_mm512_mul_ps(alpha, x)))); break;
  }
#undef GROVE_EACH
}

template <int R>
void tile(const GemmTileArgs& t) {
  __m512 acc[R][kNV];
#pragma GCC unroll 16
  for (int r = 0; r < R; ++r)
#pragma GCC unroll 4
    for (int v = 0; v < kNV; ++v) acc[r][v] = _mm512_setzero_ps();

  // The C tile is read (accumulate) or written only after the k loop: start pulling its
  // lines in now so the epilogue does not wait on scattered rows.
#pragma GCC unroll 16
  for (int r = 0; r < R; ++r) {
    _mm_prefetch(reinterpret_cast<const char*>(t.c + r * t.c_stride), _MM_HINT_T0);
    _mm_prefetch(reinterpret_cast<const char*>(t.c + r * t.c_stride + 16 * kNV - 1), _MM_HINT_T0);
  }

  const float* a = t.a;
  const float* b = t.b;
  for (size_t p = 0; p < t.kc; ++p) {
    __m512 bv[kNV];
#pragma GCC unroll 4
    for (int v = 0; v < kNV; ++v) bv[v] = _mm512_load_ps(b + 16 * v);
#pragma GCC unroll 16
    for (int r = 0; r < R; ++r) {
      const __m512 av = _mm512_set1_ps(a[r]);
#pragma GCC unroll 4
      for (int v = 0; v < kNV; ++v) acc[r][v] = _mm512_fmadd_ps(av, bv[v], acc[r][v]);
    }
    a += kMR;
    b += 16 * kNV;
  }

  __mmask16 mask[kNV];
  for (int v = 0; v < kNV; ++v) {
    const long left = static_cast<long>(t.n) - 16 * v;
    mask[v] = left >= 16 ? __mmask16(0xFFFF) : left <= 0 ? __mmask16(0) : __mmask16((1u << left) - 1);
  }
  if (t.accumulate) {
#pragma GCC unroll 16
    for (int r = 0; r < R; ++r)
#pragma GCC unroll 4
      for (int v = 0; v < kNV; ++v)
        acc[r][v] = _mm512_add_ps(acc[r][v], _mm512_maskz_loadu_ps(mask[v], t.c + r * t.c_stride + 16 * v));
  }
  if (t.finish) {
    if (t.bias) {
#pragma GCC unroll 4
      for (int v = 0; v < kNV; ++v) {
        const __m512 bias = _mm512_maskz_loadu_ps(mask[v], t.bias + 16 * v);
#pragma GCC unroll 16
        for (int r = 0; r < R; ++r) acc[r][v] = _mm512_add_ps(acc[r][v], bias);
      }
    }
    if (t.row_bias) {
#pragma GCC unroll 16
      for (int r = 0; r < R; ++r) {
        const __m512 bias = _mm512_set1_ps(t.row_bias[r]);
#pragma GCC unroll 4
        for (int v = 0; v < kNV; ++v) acc[r][v] = _mm512_add_ps(acc[r][v], bias);
      }
    }
    if (t.residual) {
#pragma GCC unroll 16
      for (int r = 0; r < R; ++r)
#pragma GCC unroll 4
        for (int v = 0; v < kNV; ++v)
          acc[r][v] = _mm512_add_ps(
              acc[r][v], _mm512_maskz_loadu_ps(mask[v], t.residual + r * t.residual_stride + 16 * v));
    }
    activate<R>(acc, t.activation);
  }
#pragma GCC unroll 16
  for (int r = 0; r < R; ++r)
#pragma GCC unroll 4
    for (int v = 0; v < kNV; ++v) _mm512_mask_storeu_ps(t.c + r * t.c_stride + 16 * v, mask[v], acc[r][v]);
}

}  // namespace

void f32_gemm_14x32_avx512(const GemmTileArgs& t) {
  static_assert(kMR == 14, "the switch below covers 1..14 rows");
  switch (t.m) {
    case 14: tile<14>(t); break;
    case 13: tile<13>(t); break;
    case 12: tile<12>(t); break;
    case 11: tile<11>(t); break;
    case 10: tile<10>(t); break;
    case 9: tile<9>(t); break;
    case 8: tile<8>(t); break;
    case 7: tile<7>(t); break;
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
