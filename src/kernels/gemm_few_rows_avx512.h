#pragma once
// What the few-rows kernels (GemmCall::few_rows: f32_gemv_avx512.cpp, the bf16 one in
// bf16_gemm_avx512bf16.cpp) share: how many interleaved chains per row count, their sum in a
// fixed order, and the tile arguments of a call. Included only by *_avx512*.cpp files after
// gemm_epilogue_avx512.h; internal linkage, as that header.
#include <immintrin.h>

#include "kernels/gemm.h"
#include "kernels/gemm_epilogue_avx512.h"

namespace grove::kernels {
namespace {

// Chains per row count: 4 x 2 vectors at m = 1, 2 x 2 x 2 at m = 2, 2 x m at m >= 3.
template <int R>
constexpr int kFewRowsChains = R == 1 ? 4 : R == 2 ? 2 : 1;

// The chains' sum, (c0 + c1) + (c2 + c3): the order depends only on the chain count.
template <int C, int R>
[[gnu::always_inline]] inline void sum_chains(__m512 (&acc)[C][R][kNV], __m512 (&sum)[R][kNV]) {
#pragma GCC unroll 4
  for (int r = 0; r < R; ++r)
#pragma GCC unroll 2
    for (int v = 0; v < kNV; ++v) {
      if constexpr (C == 4)
        sum[r][v] = _mm512_add_ps(_mm512_add_ps(acc[0][r][v], acc[1][r][v]), _mm512_add_ps(acc[2][r][v], acc[3][r][v]));
      else if constexpr (C == 2)
        sum[r][v] = _mm512_add_ps(acc[0][r][v], acc[1][r][v]);
      else
        sum[r][v] = acc[0][r][v];
    }
}

template <int C, int R>
[[gnu::always_inline]] inline void zero_chains(__m512 (&acc)[C][R][kNV]) {
#pragma GCC unroll 4
  for (int c = 0; c < C; ++c)
#pragma GCC unroll 4
    for (int r = 0; r < R; ++r)
#pragma GCC unroll 2
      for (int v = 0; v < kNV; ++v) acc[c][r][v] = _mm512_setzero_ps();
}

// The tile arguments every panel of a few-rows call shares (the whole k in one pass: the
// epilogue runs on it).
inline GemmTileArgs few_rows_args(const GemmCall& call) {
  GemmTileArgs t;
  t.c_stride = call.c_stride;
  t.c_bf16_stride = call.c_stride;
  t.m = call.m;
  t.accumulate = call.accumulate;
  t.finish = true;
  t.row_bias = call.epilogue.row_bias;
  t.residual_stride = call.epilogue.residual_stride;
  t.activation = call.epilogue.activation;
  return t;
}

// Points `t` at panel column jr of the call: its columns, C, bias and residual.
inline void few_rows_panel_args(const GemmCall& call, size_t jr, size_t nr, GemmTileArgs& t) {
  t.n = std::min(nr, call.n - jr);
  t.c = call.c ? call.c + jr : nullptr;
  t.c_bf16 = call.c_bf16 ? call.c_bf16 + jr : nullptr;
  t.bias = call.epilogue.bias ? call.epilogue.bias + jr : nullptr;
  t.residual = call.epilogue.residual ? call.epilogue.residual + jr : nullptr;
}

}  // namespace
}  // namespace grove::kernels
