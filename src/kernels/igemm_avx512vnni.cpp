// The AVX-512 VNNI integer GEMM (igemm.h): the avx2 kernel's operands and panels (int16
// minus zero points, k in pairs), multiplied with vpdpwssd, which adds the two products of
// each int16 pair into an int32 lane in one instruction (vpmaddwd then vpaddd on avx2; the
// same wrapping sums, so the results are bit-identical). A zmm holds one 16-column panel's
// k pair, so a tile is up to 14 rows x one panel: 14 accumulators. One panel at a time, not
// two: two panels' k pairs and 14 rows of A overflowed L1 and ran at half the speed
// (docs/quantization.md).
//
// Compiled with -mavx512f/bw/vnni (kernels.cmake); called only where isa_supports_avx512_vnni().
#include <immintrin.h>

#include <algorithm>
#include <array>
#include <cstring>
#include <utility>

#include "kernels/igemm.h"

namespace grove::kernels {
namespace {

constexpr size_t kWidth = IntPanels::kWidth;  // columns per panel: one zmm of int32
constexpr size_t kMr = 14;

template <size_t R>
void tile(const int16_t* a, size_t pairs, const int16_t* panel, int32_t* c, size_t c_stride, size_t cols) {
  __m512i acc[R];
  for (size_t r = 0; r < R; ++r) acc[r] = _mm512_setzero_si512();
  for (size_t p = 0; p < pairs; ++p) {
    const __m512i b = _mm512_loadu_si512(panel + p * kWidth * 2);
    for (size_t r = 0; r < R; ++r) {
      int32_t pair_bits;
      std::memcpy(&pair_bits, a + r * pairs * 2 + p * 2, sizeof pair_bits);
      acc[r] = _mm512_dpwssd_epi32(acc[r], _mm512_set1_epi32(pair_bits), b);
    }
  }
  const __mmask16 mask = cols == kWidth ? __mmask16(0xFFFF) : __mmask16((1u << cols) - 1);
  for (size_t r = 0; r < R; ++r) _mm512_mask_storeu_epi32(c + r * c_stride, mask, acc[r]);
}

template <size_t... R>
constexpr std::array<IntTileFn, kMr + 1> tiles_of(std::index_sequence<R...>) {
  return {nullptr, tile<R + 1>...};
}
constexpr std::array<IntTileFn, kMr + 1> kTiles = tiles_of(std::make_index_sequence<kMr>());

}  // namespace

void int_gemm_panels_avx512vnni(const IntGemmCall& call, const IntPanels& b, IntGemmScratch& scratch) {
  run_int_tiles(call, b, scratch, kMr, kTiles.data());
}

}  // namespace grove::kernels
