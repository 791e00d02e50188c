// AVX-512 microkernel, 14 x 32: 28 zmm accumulators + 2 for the B row + broadcasts folded
// into the FMAs' memory operand, i.e. all 32 registers. Per k step it issues 28 FMAs for
// 2 vector loads and 14 scalar broadcasts, so it is bound by FMA throughput, not loads.
// Rows are a template parameter (1..14) so a short last tile does only the work it needs;
// columns past n are handled with masks.
//
// Compiled with -mavx512f/dq/bw/vl -mfma (kernels.cmake). Everything but the entry point
// has internal linkage so no AVX-512 code can leak into generic inline functions.
#include <immintrin.h>

#include "kernels/gemm_epilogue_avx512.h"

namespace grove::kernels {

namespace {

constexpr int kMR = 14;

template <int R>
void tile(const GemmTileArgs& t) {
  __m512 acc[R][kNV];
  start_tile<R>(acc, t);

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

  store_tile<R>(acc, t);
}

}  // namespace

void f32_gemm_14x32_avx512(const GemmTileArgs& t) {
  static_assert(kMR == 14, "with_rows_1_to_14 covers every tile height");
  with_rows_1_to_14(t.m, [&](auto rows) { tile<rows()>(t); });
}

}  // namespace grove::kernels
