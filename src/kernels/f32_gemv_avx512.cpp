// AVX-512 kernel for a product of few rows (GemmCall::few_rows, m <= kFewRows): a decode
// step's MatMul, one activation row against megabytes of weights read once. It is bound by
// memory, not FMAs, and what limits it is how many loads are in flight: the 14 x 32 tile kernel
// at m = 1 keeps two accumulator chains, each FMA waiting on the last, and with the panel's k
// cut into k blocks it streams about 28 GB/s from one core of an EPYC Zen 5 that reads 34-38.
// Here every panel runs its whole k in one pass with interleaved chains (step p adds into chain
// p mod kChains), 4 to 8 independent chains whatever m, and the chains are summed in a fixed
// order at the end: (c0 + c1) + (c2 + c3). The sum behind an element depends only on k, so
// every tile of an op gives the same bits.
//
// Compiled with -mavx512f/dq/bw/vl -mfma (kernels.cmake).
#include <immintrin.h>

#include "kernels/gemm.h"
#include "kernels/gemm_epilogue_avx512.h"
#include "kernels/gemm_few_rows_avx512.h"

namespace grove::kernels {

namespace {

template <int R>
[[gnu::always_inline]] inline float a_at(const GemmCall& call, int r, size_t p) {
  return call.a_transposed ? call.a[p * call.a_stride + static_cast<size_t>(r)]
                           : call.a[static_cast<size_t>(r) * call.a_stride + p];
}

// Row p of a panel as two vectors of 16 columns: floats, or int8 weights widened to floats.
template <bool kInt8>
[[gnu::always_inline]] inline void load_row(const void* b, size_t p, __m512& b0, __m512& b1) {
  if constexpr (kInt8) {
    const __m256i q = _mm256_load_si256(reinterpret_cast<const __m256i*>(static_cast<const int8_t*>(b) + p * 32));
    b0 = _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(_mm256_castsi256_si128(q)));
    b1 = _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(_mm256_extracti128_si256(q, 1)));
  } else {
    const float* row = static_cast<const float*>(b) + p * 32;
    b0 = _mm512_load_ps(row);
    b1 = _mm512_load_ps(row + 16);
  }
}

// `scales`: int8 weights' per-column scales (kInt8 only), applied to the finished sums.
template <int R, bool kInt8>
void panel(const GemmCall& call, const void* b, size_t k, const float* scales, const GemmTileArgs& t) {
  constexpr int C = kFewRowsChains<R>;
  __m512 acc[C][R][kNV];
  zero_chains(acc);
  size_t p = 0;
  for (; p + C <= k; p += C) {
#pragma GCC unroll 4
    for (int c = 0; c < C; ++c) {
      __m512 b0, b1;
      load_row<kInt8>(b, p + static_cast<size_t>(c), b0, b1);
#pragma GCC unroll 4
      for (int r = 0; r < R; ++r) {
        const __m512 av = _mm512_set1_ps(a_at<R>(call, r, p + static_cast<size_t>(c)));
        acc[c][r][0] = _mm512_fmadd_ps(av, b0, acc[c][r][0]);
        acc[c][r][1] = _mm512_fmadd_ps(av, b1, acc[c][r][1]);
      }
    }
  }
  for (int c = 0; p < k; ++p, ++c) {  // the last k % C steps, each into its own chain
    __m512 b0, b1;
    load_row<kInt8>(b, p, b0, b1);
#pragma GCC unroll 4
    for (int r = 0; r < R; ++r) {
      const __m512 av = _mm512_set1_ps(a_at<R>(call, r, p));
      acc[c][r][0] = _mm512_fmadd_ps(av, b0, acc[c][r][0]);
      acc[c][r][1] = _mm512_fmadd_ps(av, b1, acc[c][r][1]);
    }
  }
  __m512 sum[R][kNV];
  sum_chains(acc, sum);
  if constexpr (kInt8)
#pragma GCC unroll 4
    for (int r = 0; r < R; ++r)
#pragma GCC unroll 2
      for (int v = 0; v < kNV; ++v) sum[r][v] = _mm512_mul_ps(sum[r][v], _mm512_loadu_ps(scales + 16 * v));
  store_tile(sum, t);
}

template <bool kInt8>
void few_rows(const GemmCall& call, const PackedB& b) {
  GemmTileArgs t = few_rows_args(call);
  for (size_t jr = 0; jr < call.n; jr += b.nr) {
    few_rows_panel_args(call, jr, b.nr, t);
    const size_t index = (call.n0 + jr) / b.nr;
    const float* scales = kInt8 ? b.scales.data() + index * b.nr : nullptr;
    with_rows<int(kFewRows)>(call.m, [&](auto rows) { panel<rows(), kInt8>(call, b.panel(index), b.k, scales, t); });
  }
}

}  // namespace

void f32_gemv_avx512(const GemmCall& call, const PackedB& b) { few_rows<false>(call, b); }
void i8w_gemv_avx512(const GemmCall& call, const PackedB& b) { few_rows<true>(call, b); }

}  // namespace grove::kernels
