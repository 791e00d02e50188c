#pragma once
// The AVX-512 GEMM microkernels' common start and ending: zeroed accumulators and C
// prefetched before the k loop; once a tile's MR x 32 products are in zmm
// registers, add C (accumulate), bias, row bias and residual, apply the activation, and
// store the valid m x n corner with masks. Shared by the f32 and bf16 kernels so both apply
// the epilogue identically.
//
// Included only by *_avx512*.cpp files (compiled with AVX-512 flags). Everything is in an
// anonymous namespace so each such file gets its own copy, compiled with its own flags, and
// no AVX-512 code can be picked by the linker for a generic caller.
#include <immintrin.h>

#include <type_traits>

#include "kernels/gemm_microkernel.h"

#if defined(GROVE_VMATH_WIDTH) && GROVE_VMATH_WIDTH != 16
#error "gemm_epilogue_avx512.h needs vector_math.h on 16-float vectors"
#endif
#define GROVE_VMATH_WIDTH 16
#include "kernels/vector_math.h"

namespace grove::kernels {
namespace {

constexpr int kNV = 2;  // 16-float vectors per row: NR = 32

// The exp-based activations are vector_math.h's, on 16-float vectors: the Sigmoid, Gelu and
// Erf ops run the same code (vmath_avx512.cpp), so fusing one into a GEMM changes no bit.
inline __m512 sigmoid_ps(__m512 x) { return (__m512)vsigmoid((vf)x); }
inline __m512 gelu_erf_ps(__m512 x) { return (__m512)vgelu_erf((vf)x); }
inline __m512 gelu_tanh_ps(__m512 x) { return (__m512)vgelu_tanh((vf)x); }
inline __m512 swish_ps(__m512 x, float alpha) { return (__m512)vswish((vf)x, alpha); }

// The activations of many instructions per vector (the exp-based ones), out of line: inlined,
// their unrolled bodies made store_tile too large to inline, and a store_tile call took the
// accumulators' address, which kept them in memory around every k loop.
template <int R, int NV>
[[gnu::noinline]] void activate_rare(__m512 (&acc)[R][NV], const ActivationParams& p) {
#define GROVE_EACH(expr)                 \
  _Pragma("GCC unroll 32") for (int r = 0; r < R; ++r) \
    _Pragma("GCC unroll 4") for (int v = 0; v < NV; ++v) { __m512 x = acc[r][v]; acc[r][v] = (expr); }
  switch (p.kind) {
    case Activation::sigmoid: GROVE_EACH(sigmoid_ps(x)); break;
    case Activation::gelu_erf: GROVE_EACH(gelu_erf_ps(x)); break;
    case Activation::gelu_tanh: GROVE_EACH(gelu_tanh_ps(x)); break;
    case Activation::swish: GROVE_EACH(swish_ps(x, p.alpha)); break;
    default: break;
  }
#undef GROVE_EACH
}

// The few-instruction activations in place; the rest on a copy by activate_rare, so the
// accumulators themselves never have their address taken and stay in registers.
template <int R, int NV>
[[gnu::always_inline]] inline void activate(__m512 (&acc)[R][NV], const ActivationParams& p) {
  const __m512 zero = _mm512_setzero_ps(), one = _mm512_set1_ps(1.0f);
  const __m512 alpha = _mm512_set1_ps(p.alpha), beta = _mm512_set1_ps(p.beta);
#define GROVE_EACH(expr)                 \
  _Pragma("GCC unroll 32") for (int r = 0; r < R; ++r) \
    _Pragma("GCC unroll 4") for (int v = 0; v < NV; ++v) { __m512 x = acc[r][v]; acc[r][v] = (expr); }
  switch (p.kind) {
    case Activation::identity: break;
    // x goes second: vmaxps/vminps return the second operand when either is NaN, so NaN
    // propagates as in ONNX Runtime (docs/correctness.md) at no cost.
    case Activation::relu: GROVE_EACH(_mm512_max_ps(zero, x)); break;
    case Activation::clip: GROVE_EACH(_mm512_min_ps(beta, _mm512_max_ps(alpha, x))); break;
    case Activation::leaky_relu:
      GROVE_EACH(_mm512_mask_mul_ps(x, _mm512_cmp_ps_mask(x, zero, _CMP_LT_OQ), x, alpha));
      break;
    case Activation::hard_sigmoid:
      GROVE_EACH(_mm512_min_ps(one, _mm512_max_ps(zero, _mm512_fmadd_ps(x, alpha, beta))));
      break;
    case Activation::hard_swish: {
      const __m512 sixth = _mm512_set1_ps(1.0f / 6.0f), half = _mm512_set1_ps(0.5f);
      GROVE_EACH(_mm512_mul_ps(x, _mm512_min_ps(one, _mm512_max_ps(zero, _mm512_fmadd_ps(x, sixth, half)))));
      break;
    }
    case Activation::sigmoid:
    case Activation::gelu_erf:
    case Activation::gelu_tanh:
    case Activation::swish: {
      __m512 copy[R][NV];
#pragma GCC unroll 32
      for (int r = 0; r < R; ++r)
#pragma GCC unroll 4
        for (int v = 0; v < NV; ++v) copy[r][v] = acc[r][v];
      activate_rare(copy, p);
#pragma GCC unroll 32
      for (int r = 0; r < R; ++r)
#pragma GCC unroll 4
        for (int v = 0; v < NV; ++v) acc[r][v] = copy[r][v];
      break;
    }
  }
#undef GROVE_EACH
}

// Row r of the float C: at t.c_rows[r] for a kernel instantiated with kCRows (a tile whose C
// rows lie apart), else t.c + r * t.c_stride. A template argument, not a test of t.c_rows, so
// the common kernels' epilogue stays as it was.
template <bool kCRows>
[[gnu::always_inline]] inline float* c_row(const GemmTileArgs& t, int r) {
  if constexpr (kCRows) return t.c_rows[r];
  else return t.c + r * t.c_stride;
}

// Zeroes the accumulators and, since the C tile (and the residual of a last k block) is read
// or written only after the k loop, starts pulling its lines in now so the epilogue does not
// wait on scattered rows.
template <int R, int NV, bool kCRows = false>
[[gnu::always_inline]] inline void start_tile(__m512 (&acc)[R][NV], const GemmTileArgs& t) {
#pragma GCC unroll 32
  for (int r = 0; r < R; ++r)
#pragma GCC unroll 4
    for (int v = 0; v < NV; ++v) acc[r][v] = _mm512_setzero_ps();
  if (kCRows || t.c) {  // null where a bf16 C takes the whole k in one block
#pragma GCC unroll 32
    for (int r = 0; r < R; ++r) {
      _mm_prefetch(reinterpret_cast<const char*>(c_row<kCRows>(t, r)), _MM_HINT_T0);
      _mm_prefetch(reinterpret_cast<const char*>(c_row<kCRows>(t, r) + 16 * NV - 1), _MM_HINT_T0);
    }
  }
  if (t.residual && t.finish) {
#pragma GCC unroll 32
    for (int r = 0; r < R; ++r) {
      _mm_prefetch(reinterpret_cast<const char*>(t.residual + r * t.residual_stride), _MM_HINT_T0);
      _mm_prefetch(reinterpret_cast<const char*>(t.residual + r * t.residual_stride + 16 * NV - 1), _MM_HINT_T0);
    }
  }
}

// Finishes a tile whose products over this k block are in acc (see the header comment).
// Inlined into the kernel, so the accumulators stay in registers from the first k step to
// the store.
template <int R, int NV, bool kCRows = false>
[[gnu::always_inline]] inline void store_tile(__m512 (&acc)[R][NV], const GemmTileArgs& t) {
  __mmask16 mask[NV];
  for (int v = 0; v < NV; ++v) {
    const long left = static_cast<long>(t.n) - 16 * v;
    mask[v] = left >= 16 ? __mmask16(0xFFFF) : left <= 0 ? __mmask16(0) : __mmask16((1u << left) - 1);
  }
  if (t.accumulate) {
#pragma GCC unroll 32
    for (int r = 0; r < R; ++r)
#pragma GCC unroll 4
      for (int v = 0; v < NV; ++v)
        acc[r][v] = _mm512_add_ps(acc[r][v], _mm512_maskz_loadu_ps(mask[v], c_row<kCRows>(t, r) + 16 * v));
  }
  if (t.finish) {
    if (t.bias) {
#pragma GCC unroll 4
      for (int v = 0; v < NV; ++v) {
        const __m512 bias = _mm512_maskz_loadu_ps(mask[v], t.bias + 16 * v);
#pragma GCC unroll 32
        for (int r = 0; r < R; ++r) acc[r][v] = _mm512_add_ps(acc[r][v], bias);
      }
    }
    if (t.row_bias) {
#pragma GCC unroll 32
      for (int r = 0; r < R; ++r) {
        const __m512 bias = _mm512_set1_ps(t.row_bias[r]);
#pragma GCC unroll 4
        for (int v = 0; v < NV; ++v) acc[r][v] = _mm512_add_ps(acc[r][v], bias);
      }
    }
    if (t.residual) {
#pragma GCC unroll 32
      for (int r = 0; r < R; ++r)
#pragma GCC unroll 4
        for (int v = 0; v < NV; ++v)
          acc[r][v] = _mm512_add_ps(
              acc[r][v], _mm512_maskz_loadu_ps(mask[v], t.residual + r * t.residual_stride + 16 * v));
    }
    activate<R>(acc, t.activation);
#ifdef __AVX512BF16__
    if (t.c_bf16) {  // bfloat16 storage (the AVX512-BF16 kernel): the finished tile rounded once
#pragma GCC unroll 32
      for (int r = 0; r < R; ++r)
#pragma GCC unroll 4
        for (int v = 0; v < NV; ++v)
          _mm256_mask_storeu_epi16(t.c_bf16 + r * t.c_bf16_stride + 16 * v, mask[v],
                                   (__m256i)_mm512_cvtneps_pbh(acc[r][v]));
      return;
    }
#endif
  }
#pragma GCC unroll 32
  for (int r = 0; r < R; ++r)
#pragma GCC unroll 4
    for (int v = 0; v < NV; ++v) _mm512_mask_storeu_ps(c_row<kCRows>(t, r) + 16 * v, mask[v], acc[r][v]);
}

// Calls f(std::integral_constant<int, m>) for m in 1..Max (nothing for another m), so a kernel
// instantiates its tile for each row count and a short last tile does only the work it needs.
template <int Max, class F>
inline void with_rows(size_t m, F&& f) {
  if (m == size_t(Max)) return f(std::integral_constant<int, Max>{});
  if constexpr (Max > 1) with_rows<Max - 1>(m, f);
}

}  // namespace
}  // namespace grove::kernels
