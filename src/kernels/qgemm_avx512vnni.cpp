// The 8-bit GEMM (qgemm.h) with vpdpbusd: a zmm of B is one panel's quad of k steps for 16
// columns (64 uint8), each A row's 4 int8 of that quad are broadcast, and one instruction
// adds the 4 products into each column's int32. A tile is up to 14 rows x 2 panels: 28
// accumulators, 2 panel loads and 14 broadcasts per quad. A's rows are packed per block so
// the broadcasts read one contiguous stream.
//
// Compiled with -mavx512f/bw/vnni (kernels.cmake); called only where isa_supports_avx512_vnni().
#include <immintrin.h>

#include <algorithm>
#include <array>
#include <cstring>
#include <utility>

#include "kernels/qgemm.h"

namespace grove::kernels {
namespace {

constexpr size_t kWidth = U8Panels::kWidth;
constexpr size_t kRows = PackedS8::kRows;

using TileFn = void (*)(const int8_t* a, size_t quads, const uint8_t* panel, size_t panel_bytes, int32_t* c,
                        size_t c_stride, size_t cols);

// R rows x P panels (P is 1 or 2); `cols` valid columns in the last panel. Two plain
// accumulator arrays, not one [R][P] array, which GCC 12 kept in memory.
template <size_t R, size_t P, bool kMasked>
void tile(const int8_t* a, size_t quads, const uint8_t* panel, size_t panel_bytes, int32_t* c, size_t c_stride,
          size_t cols) {
  static_assert(P == 1 || P == 2);
  __m512i acc0[R], acc1[R];
#pragma GCC unroll 16
  for (size_t r = 0; r < R; ++r) {
    acc0[r] = _mm512_setzero_si512();
    if constexpr (P == 2) acc1[r] = _mm512_setzero_si512();
  }
  const uint8_t* second = panel + (P == 2 ? panel_bytes : 0);
  for (size_t t = 0; t < quads; ++t) {
    const __m512i b0 = _mm512_loadu_si512(panel + t * kWidth * 4);
    const __m512i b1 = P == 2 ? _mm512_loadu_si512(second + t * kWidth * 4) : b0;
    const int8_t* at = a + t * R * 4;
#pragma GCC unroll 16
    for (size_t r = 0; r < R; ++r) {
      int32_t quad;
      std::memcpy(&quad, at + r * 4, sizeof quad);
      const __m512i w = _mm512_set1_epi32(quad);
      acc0[r] = _mm512_dpbusd_epi32(acc0[r], b0, w);
      if constexpr (P == 2) acc1[r] = _mm512_dpbusd_epi32(acc1[r], b1, w);
    }
  }
  // Masked stores only in the instantiation for a partial last panel: with them in every
  // tile GCC 12 kept shadow copies of the accumulators on the stack inside the loop.
  if constexpr (kMasked) {
    const __mmask16 last = __mmask16((1u << cols) - 1);
#pragma GCC unroll 16
    for (size_t r = 0; r < R; ++r) {
      if constexpr (P == 2) {
        _mm512_storeu_si512(c + r * c_stride, acc0[r]);
        _mm512_mask_storeu_epi32(c + r * c_stride + kWidth, last, acc1[r]);
      } else {
        _mm512_mask_storeu_epi32(c + r * c_stride, last, acc0[r]);
      }
    }
  } else {
#pragma GCC unroll 16
    for (size_t r = 0; r < R; ++r) {
      _mm512_storeu_si512(c + r * c_stride, acc0[r]);
      if constexpr (P == 2) _mm512_storeu_si512(c + r * c_stride + kWidth, acc1[r]);
    }
  }
}

template <size_t P, bool kMasked, size_t... R>
constexpr std::array<TileFn, kRows + 1> tiles_of(std::index_sequence<R...>) {
  return {nullptr, tile<R + 1, P, kMasked>...};
}
// [panels - 1][masked]: tiles by row count.
constexpr std::array<TileFn, kRows + 1> kTiles[2][2] = {
    {tiles_of<1, false>(std::make_index_sequence<kRows>()), tiles_of<1, true>(std::make_index_sequence<kRows>())},
    {tiles_of<2, false>(std::make_index_sequence<kRows>()), tiles_of<2, true>(std::make_index_sequence<kRows>())}};

}  // namespace

void s8u8_gemm_avx512vnni(const PackedS8& a, RowRange range, const U8Panels& b, int32_t* c, size_t c_stride) {
  const size_t panels = (b.n + kWidth - 1) / kWidth, bytes = b.panel_bytes();
  auto run = [&](size_t q0, size_t i0) {
    const size_t count = std::min<size_t>(2, panels - q0);
    const size_t cols = std::min(kWidth, b.n - (q0 + count - 1) * kWidth);
    const size_t rows = std::min(kRows, range.end - i0);
    kTiles[count - 1][cols < kWidth][rows](a.block(i0 / kRows), a.quads, b.values.data() + q0 * bytes, bytes,
                                           c + (i0 - range.begin) * c_stride + q0 * kWidth, c_stride, cols);
  };
  // The larger operand is walked once in the outer loop and the smaller one re-read from
  // cache in the inner loop: weights outer for late layers (many channels, few pixels),
  // pixel panels outer for early ones.
  if (range.end - range.begin > b.n) {
    for (size_t i0 = range.begin; i0 < range.end; i0 += kRows)
      for (size_t q0 = 0; q0 < panels; q0 += 2) run(q0, i0);
  } else {
    for (size_t q0 = 0; q0 < panels; q0 += 2)
      for (size_t i0 = range.begin; i0 < range.end; i0 += kRows) run(q0, i0);
  }
}

}  // namespace grove::kernels
