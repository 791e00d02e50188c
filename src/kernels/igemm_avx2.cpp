// The avx2 integer GEMM (igemm.h): operands widened to int16 minus their zero points, then
// vpmaddwd multiplies a broadcast pair of A's k steps with 8 columns' pairs of B and adds
// the two products into int32 lanes. Tiles of up to 6 rows x 16 columns keep 12 accumulators
// in registers; B is in panels of 16 columns (IntPanels), the panel's k pairs back to back,
// so a tile streams one panel while it stays in cache.
#include <immintrin.h>

#include <algorithm>
#include <cstring>

#include "kernels/igemm.h"

namespace grove::kernels {
namespace {

constexpr size_t kNr = IntPanels::kWidth;  // two vectors of 8 int32
constexpr size_t kMr = 6;                  // rows per tile

template <size_t R>
void tile(const int16_t* a, size_t pairs, const int16_t* panel, int32_t* c, size_t c_stride, size_t cols) {
  __m256i acc[R][2];
  for (size_t r = 0; r < R; ++r) acc[r][0] = acc[r][1] = _mm256_setzero_si256();
  for (size_t p = 0; p < pairs; ++p) {
    __m256i b0 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(panel + p * kNr * 2));
    __m256i b1 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(panel + p * kNr * 2 + 16));
    for (size_t r = 0; r < R; ++r) {
      int32_t pair_bits;
      std::memcpy(&pair_bits, a + r * pairs * 2 + p * 2, sizeof pair_bits);
      __m256i av = _mm256_set1_epi32(pair_bits);
      acc[r][0] = _mm256_add_epi32(acc[r][0], _mm256_madd_epi16(av, b0));
      acc[r][1] = _mm256_add_epi32(acc[r][1], _mm256_madd_epi16(av, b1));
    }
  }
  for (size_t r = 0; r < R; ++r) {
    int32_t* row = c + r * c_stride;
    if (cols == kNr) {
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(row), acc[r][0]);
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(row + 8), acc[r][1]);
    } else {
      alignas(32) int32_t tmp[kNr];
      _mm256_store_si256(reinterpret_cast<__m256i*>(tmp), acc[r][0]);
      _mm256_store_si256(reinterpret_cast<__m256i*>(tmp + 8), acc[r][1]);
      std::copy(tmp, tmp + cols, row);
    }
  }
}

constexpr IntTileFn kTiles[kMr + 1] = {nullptr, tile<1>, tile<2>, tile<3>, tile<4>, tile<5>, tile<6>};

}  // namespace

void int_gemm_panels_avx2(const IntGemmCall& call, const IntPanels& b, IntGemmScratch& scratch) {
  run_int_tiles(call, b, scratch, kMr, kTiles);
}

}  // namespace grove::kernels
