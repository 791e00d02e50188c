// AVX512-BF16 microkernel, 14 x 32, and the packing into its operand layout (kernels/bf16.h).
// The f32 kernel's register plan with vdpbf16ps in place of vfmadd: per k pair, 2 vector
// loads of B (32 columns x 2 k), 14 broadcast words of A and 28 dot products, each adding
// two products into a float lane. Twice the multiplies per instruction of the f32 kernel;
// accumulation, epilogue and C stay float.
//
// With a_stride set, A is read where it lies as rows of bf16 pairs (a_stride, a_group_stride
// and tap offsets in pair words): rows of a bf16 activation, or float rows just rounded into a
// row buffer, which costs a fraction of packing them into groups of 14.
//
// Compiled with -mavx512bf16 on top of the AVX-512 flags (kernels.cmake); called only where
// isa_supports_bf16().
#include <immintrin.h>

#include <algorithm>

#include "kernels/bf16.h"
#include "kernels/gemm.h"
#include "kernels/gemm_epilogue_avx512.h"
#include "kernels/gemm_few_rows_avx512.h"
#include "kernels/gemm_rows_avx512.h"

namespace grove::kernels {

namespace {

constexpr int kMR = kRowsMR;

using Packed = PackedRows<uint32_t>;
using InPlace = RowsInPlace<uint32_t, 2>;

// `pairs` pair steps of k from A rows `rows` and B at b; returns B past them. With kPrefetch,
// the next panel's slice into L2, a step per step, as the f32 kernel does.
template <bool kPrefetch, int R, class Rows>
[[gnu::always_inline]] inline const uint32_t* pairs_of(__m512 (&acc)[R][kNV], const uint32_t* b, const char* next,
                                                       Rows rows, size_t pairs) {
  for (size_t p = 0; p < pairs; ++p) {
    if constexpr (kPrefetch) {
      _mm_prefetch(next + p * 128, _MM_HINT_T1);
      _mm_prefetch(next + p * 128 + 64, _MM_HINT_T1);
    }
    __m512bh bv[kNV];
#pragma GCC unroll 4
    for (int v = 0; v < kNV; ++v) bv[v] = (__m512bh)_mm512_load_si512(b + 16 * v);
#pragma GCC unroll 16
    for (int r = 0; r < R; ++r) {
      const __m512bh av = (__m512bh)_mm512_set1_epi32(static_cast<int>(*rows.at(r)));
#pragma GCC unroll 4
      for (int v = 0; v < kNV; ++v) acc[r][v] = _mm512_dpbf16_ps(acc[r][v], av, bv[v]);
    }
    rows.next();
    b += 16 * kNV;
  }
  return b;
}

template <int R, class Rows>
void tile(const GemmTileArgs& t, const Rows& rows) {
  __m512 acc[R][kNV];
  start_tile<R>(acc, t);

  const size_t pairs = (t.kc + 1) / 2;
  const char* next = reinterpret_cast<const char*>(t.b_next);
  const auto* b = reinterpret_cast<const uint32_t*>(t.b);
  if (!t.tap_offsets) {
    if (next) pairs_of<true>(acc, b, next, rows, pairs);
    else pairs_of<false>(acc, b, next, rows, pairs);
  } else {
    for (size_t tap = 0; tap < t.taps; ++tap) {
      const Rows shifted = rows.shifted(t.tap_offsets[tap]);
      b = next ? pairs_of<true>(acc, b, next, shifted, pairs) : pairs_of<false>(acc, b, next, shifted, pairs);
      if (next) next += pairs * 128;
    }
  }

  store_tile<R>(acc, t);
}

// A few-rows product's panel (GemmCall::few_rows, as f32_gemv_avx512.cpp): the whole k in
// one pass, pair step q into chain q mod C, chains summed in a fixed order at the end.
template <int R>
void few_rows_panel(const uint32_t* a, size_t a_stride, const uint32_t* b, size_t pairs, const GemmTileArgs& t) {
  constexpr int C = kFewRowsChains<R>;
  __m512 acc[C][R][kNV];
  zero_chains(acc);
  auto step = [&](int c, size_t q) {
    const uint32_t* row = b + q * 32;
    const __m512bh b0 = (__m512bh)_mm512_load_si512(row), b1 = (__m512bh)_mm512_load_si512(row + 16);
#pragma GCC unroll 4
    for (int r = 0; r < R; ++r) {
      const __m512bh av = (__m512bh)_mm512_set1_epi32(static_cast<int>(a[static_cast<size_t>(r) * a_stride + q]));
      acc[c][r][0] = _mm512_dpbf16_ps(acc[c][r][0], av, b0);
      acc[c][r][1] = _mm512_dpbf16_ps(acc[c][r][1], av, b1);
    }
  };
  size_t q = 0;
  for (; q + C <= pairs; q += C)
#pragma GCC unroll 4
    for (int c = 0; c < C; ++c) step(c, q + static_cast<size_t>(c));
  for (int c = 0; q < pairs; ++q, ++c) step(c, q);
  __m512 sum[R][kNV];
  sum_chains(acc, sum);
  store_tile<R>(sum, t);
}

__m128 bf16_of_8(const float* src) { return _mm_castsi128_ps((__m128i)_mm256_cvtneps_pbh(_mm256_loadu_ps(src))); }

}  // namespace

void bf16_gemm_14x32_avx512bf16(const GemmTileArgs& t) {
  if (t.a_stride) with_rows<kMR>(t.m, [&](auto rows) { tile<rows()>(t, InPlace(t)); });
  else with_rows<kMR>(t.m, [&](auto rows) { tile<rows()>(t, Packed{reinterpret_cast<const uint32_t*>(t.a)}); });
}

void bf16_gemv_avx512bf16(const GemmCall& call, const PackedB& b, const uint32_t* a, size_t a_stride) {
  GemmTileArgs t = few_rows_args(call);
  const size_t pairs = (b.k + 1) / 2;
  for (size_t jr = 0; jr < call.n; jr += b.nr) {
    few_rows_panel_args(call, jr, b.nr, t);
    const auto* panel_b = reinterpret_cast<const uint32_t*>(b.panel((call.n0 + jr) / b.nr));
    with_rows<int(kFewRows)>(call.m, [&](auto rows) { few_rows_panel<rows()>(a, a_stride, panel_b, pairs, t); });
  }
}

// Groups of 4 rows: 8 floats of each row become 4 pair words, and a 4 x 4 transpose of
// those words puts each pair step's 4 rows side by side, as pack_a_block does for f32.
void bf16_pack_a_tile_avx512bf16(const float* a, size_t stride, size_t rows, size_t kc, size_t mr, uint32_t* out) {
  const size_t pairs = (kc + 1) / 2;
  size_t r = 0;
  for (; r + 4 <= rows; r += 4) {
    const float* s0 = a + r * stride;
    const float* s1 = s0 + stride;
    const float* s2 = s1 + stride;
    const float* s3 = s2 + stride;
    size_t p = 0;
    for (; p + 8 <= kc; p += 8) {
      __m128 x0 = bf16_of_8(s0 + p), x1 = bf16_of_8(s1 + p), x2 = bf16_of_8(s2 + p), x3 = bf16_of_8(s3 + p);
      _MM_TRANSPOSE4_PS(x0, x1, x2, x3);
      auto* dst = reinterpret_cast<float*>(out + p / 2 * mr + r);
      _mm_storeu_ps(dst, x0);
      _mm_storeu_ps(dst + mr, x1);
      _mm_storeu_ps(dst + 2 * mr, x2);
      _mm_storeu_ps(dst + 3 * mr, x3);
    }
    for (; p < kc; p += 2) {
      const bool odd = p + 1 == kc;
      uint32_t* dst = out + p / 2 * mr + r;
      dst[0] = bf16_pair(s0[p], odd ? 0.0f : s0[p + 1]);
      dst[1] = bf16_pair(s1[p], odd ? 0.0f : s1[p + 1]);
      dst[2] = bf16_pair(s2[p], odd ? 0.0f : s2[p + 1]);
      dst[3] = bf16_pair(s3[p], odd ? 0.0f : s3[p + 1]);
    }
  }
  for (; r < rows; ++r) {
    const float* src = a + r * stride;
    for (size_t p = 0; p < kc; p += 2) out[p / 2 * mr + r] = bf16_pair(src[p], p + 1 == kc ? 0.0f : src[p + 1]);
  }
  for (; r < mr; ++r)
    for (size_t q = 0; q < pairs; ++q) out[q * mr + r] = 0;
}

void bf16_round_rows_avx512bf16(const float* a, size_t stride, size_t rows, size_t kc, uint32_t* out, size_t out_stride) {
  const size_t pairs = (kc + 1) / 2;
  for (size_t r = 0; r < rows; ++r) {
    const float* src = a + r * stride;
    auto* dst = reinterpret_cast<uint16_t*>(out + r * out_stride);
    size_t p = 0;
    for (; p + 32 <= kc; p += 32)
      _mm512_storeu_si512(dst + p, (__m512i)_mm512_cvtne2ps_pbh(_mm512_loadu_ps(src + p + 16), _mm512_loadu_ps(src + p)));
    if (p < 2 * pairs) {  // the last run, and an odd k's zero high half
      const size_t left = kc - p;
      const __mmask16 lo = left >= 16 ? __mmask16(0xFFFF) : __mmask16((1u << left) - 1);
      const __mmask16 hi = left >= 32 ? __mmask16(0xFFFF) : left <= 16 ? __mmask16(0) : __mmask16((1u << (left - 16)) - 1);
      const __m512i v = (__m512i)_mm512_cvtne2ps_pbh(_mm512_maskz_loadu_ps(hi, src + p + 16), _mm512_maskz_loadu_ps(lo, src + p));
      const size_t words = pairs - p / 2;
      _mm512_mask_storeu_epi32(out + r * out_stride + p / 2, __mmask16((1u << words) - 1), v);
    }
  }
}

void bf16_interleave_rows_avx512bf16(const float* row0, const float* row1, size_t count, uint32_t* out) {
  for (size_t i = 0; i < count; i += 16) {
    const size_t left = std::min<size_t>(16, count - i);
    const __mmask16 mask = left == 16 ? __mmask16(0xFFFF) : __mmask16((1u << left) - 1);
    const __m512 x0 = _mm512_maskz_loadu_ps(mask, row0 + i);
    const __m512 x1 = row1 ? _mm512_maskz_loadu_ps(mask, row1 + i) : _mm512_setzero_ps();
    const __m512i low = _mm512_cvtepu16_epi32((__m256i)_mm512_cvtneps_pbh(x0));
    const __m512i high = _mm512_slli_epi32(_mm512_cvtepu16_epi32((__m256i)_mm512_cvtneps_pbh(x1)), 16);
    _mm512_mask_storeu_epi32(out + i, mask, _mm512_or_si512(low, high));
  }
}

}  // namespace grove::kernels
