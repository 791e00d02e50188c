#pragma once
// qadd.h's float32 steps on 16 lanes, shared by qadd_avx512.cpp and by the requantizing
// epilogue of qgemm_avx512vnni.cpp (a residual QLinearAdd fused after a conv). Internal
// linkage: each including file compiles it for its own ISA flags, and the linker must not
// pick one file's copy for the other.
#include <immintrin.h>

#include "kernels/qadd.h"

namespace grove::kernels {
namespace {

// a and b: the operands' bytes as floats. Returns the result's value as an integral float in
// [lo, hi]. kMayBeNan: map a NaN sum to 0 as the scalar loop does (needed only where a scale
// can make one); round half to even is one vrndscaleps (the scalar loop's bound and
// 1.5 * 2^23 trick give the same integers), the Relu one max with 0 (-0 becomes +0 either way).
template <bool kMayBeNan>
inline __m512 qadd_lanes(__m512 a, __m512 b, const QAddParams& p) {
  const __m512 fa = _mm512_mul_ps(_mm512_sub_ps(a, _mm512_set1_ps(p.a_zero)), _mm512_set1_ps(p.a_scale));
  const __m512 fb = _mm512_mul_ps(_mm512_sub_ps(b, _mm512_set1_ps(p.b_zero)), _mm512_set1_ps(p.b_scale));
  __m512 v = _mm512_add_ps(fa, fb);
  if (p.relu) v = _mm512_max_ps(v, _mm512_setzero_ps());
  v = _mm512_div_ps(v, _mm512_set1_ps(p.y_scale));
  if constexpr (kMayBeNan) v = _mm512_maskz_mov_ps(_mm512_cmp_ps_mask(v, v, _CMP_ORD_Q), v);
  v = _mm512_roundscale_ps(v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  return _mm512_max_ps(_mm512_min_ps(_mm512_add_ps(v, _mm512_set1_ps(p.y_zero)), _mm512_set1_ps(p.hi)),
                       _mm512_set1_ps(p.lo));
}

// 16 bytes (fewer under `mask`, the rest read as 0) as floats.
inline __m512 bytes_as_floats(const void* p, bool is_signed, __mmask16 mask = 0xFFFF) {
  // 16 plain bytes where all are wanted: a masked 64-byte load is slower on some cores.
  const __m128i bytes = mask == 0xFFFF ? _mm_loadu_si128(static_cast<const __m128i*>(p))
                                       : _mm512_castsi512_si128(_mm512_maskz_loadu_epi8(__mmask64{mask}, p));
  return _mm512_cvtepi32_ps(is_signed ? _mm512_cvtepi8_epi32(bytes) : _mm512_cvtepu8_epi32(bytes));
}

}  // namespace
}  // namespace grove::kernels
