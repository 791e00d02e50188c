// AMX-BF16 microkernel, 32 x 32, and the packing of A into its operand layout (kernels/amx.h).
// The tile unit multiplies a 16 x 32 bf16 block of A by a 32 x 16 bf16 block of B (k in
// pairs) into a 16 x 16 float block of C per instruction. Four C tiles hold a 32 x 32 block;
// per 32 k steps the kernel loads two A tiles and two B tiles and issues four tile products,
// so each loaded tile feeds two products.
//
// B is the bf16 panel layout of kernels/bf16.h with the pair rows padded to a multiple of 16:
// a B tile is 16 pair rows of 16 columns, read with the panel's row stride (32 words).
// C leaves the tiles through a 4 KiB block on the stack and goes through the same AVX-512
// epilogue as the other kernels, one row at a time.
//
// Compiled with -mamx-tile -mamx-bf16 on top of the AVX-512 flags (kernels.cmake); called
// only where isa_supports_amx().
#include <immintrin.h>

#include <algorithm>
#include <cstdint>
#include <cstring>

#include "kernels/amx.h"
#include "kernels/bf16.h"
#include "kernels/gemm_epilogue_avx512.h"

namespace grove::kernels {

namespace {

constexpr int kRows = 16;           // rows of every tile
constexpr int kRowBytes = 64;       // bytes of every tile row
constexpr size_t kStepK = 32;       // k per tile product
constexpr size_t kBPanelBytes = 128;  // a pair row of a 32-column B panel
constexpr size_t kBPrefetchSteps = 2;  // how far ahead B is fetched, in 32-step blocks

// ldtilecfg's 64-byte operand: palette 1, then bytes per row and rows of each tile.
struct alignas(64) TileConfig {
  uint8_t palette = 1;
  uint8_t start_row = 0;
  uint8_t reserved[14] = {};
  uint16_t colsb[16] = {};
  uint8_t rows[16] = {};
};

// Rows [0, rows) of a 32 x 32 float block through the epilogue into C.
void finish_rows(const float (&block)[32][32], const GemmTileArgs& t) {
  for (size_t r = 0; r < t.m; ++r) {
    GemmTileArgs row = t;
    row.m = 1;
    row.c = t.c + r * t.c_stride;
    row.row_bias = t.row_bias ? t.row_bias + r : nullptr;
    row.residual = t.residual ? t.residual + r * t.residual_stride : nullptr;
    __m512 acc[1][kNV] = {{_mm512_load_ps(block[r]), _mm512_load_ps(block[r] + 16)}};
    store_tile<1>(acc, row);
  }
}

// 32 bf16 of a row as floats, masked past n.
inline void load_bf16_row(const uint16_t* src, const __mmask16 (&mask)[2], __m512 (&out)[2]) {
  for (int v = 0; v < 2; ++v) {
    const __m256i h = _mm256_maskz_loadu_epi16(mask[v], src + 16 * v);
    out[v] = _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16));
  }
}

// The epilogue of finish_rows for bf16 storage (a bf16 C, a bf16 residual, or both), in the
// same order: earlier k blocks' sums, bias, row bias, residual, activation; then one rounding
// into C's element type.
void finish_rows_bf16(const float (*block)[32], const GemmTileArgs& t) {
  __mmask16 mask[2];
  for (int v = 0; v < 2; ++v) {
    const long left = static_cast<long>(t.n) - 16 * v;
    mask[v] = left >= 16 ? __mmask16(0xFFFF) : left <= 0 ? __mmask16(0) : __mmask16((1u << left) - 1);
  }
  const __mmask32 mask32 = t.n >= 32 ? ~__mmask32(0) : (__mmask32(1) << t.n) - 1;
  __m512 bias[2] = {_mm512_setzero_ps(), _mm512_setzero_ps()};
  if (t.bias)
    for (int v = 0; v < 2; ++v) bias[v] = _mm512_maskz_loadu_ps(mask[v], t.bias + 16 * v);
  for (size_t r = 0; r < t.m; ++r) {
    __m512 acc[1][kNV] = {{_mm512_load_ps(block[r]), _mm512_load_ps(block[r] + 16)}};
    if (t.accumulate)
      for (int v = 0; v < 2; ++v)
        acc[0][v] = _mm512_add_ps(acc[0][v], _mm512_maskz_loadu_ps(mask[v], t.c + r * t.c_stride + 16 * v));
    for (int v = 0; v < 2; ++v) acc[0][v] = _mm512_add_ps(acc[0][v], bias[v]);
    if (t.row_bias)
      for (int v = 0; v < 2; ++v) acc[0][v] = _mm512_add_ps(acc[0][v], _mm512_set1_ps(t.row_bias[r]));
    if (t.residual_bf16) {
      __m512 res[2];
      load_bf16_row(t.residual_bf16 + r * t.residual_stride, mask, res);
      for (int v = 0; v < 2; ++v) acc[0][v] = _mm512_add_ps(acc[0][v], res[v]);
    } else if (t.residual) {
      for (int v = 0; v < 2; ++v)
        acc[0][v] = _mm512_add_ps(acc[0][v], _mm512_maskz_loadu_ps(mask[v], t.residual + r * t.residual_stride + 16 * v));
    }
    activate<1>(acc, t.activation);
    if (t.c_bf16) {
      const __m512bh out = _mm512_cvtne2ps_pbh(acc[0][1], acc[0][0]);
      _mm512_mask_storeu_epi16(t.c_bf16 + r * t.c_bf16_stride, mask32, (__m512i)out);
    } else {
      for (int v = 0; v < 2; ++v) _mm512_mask_storeu_ps(t.c + r * t.c_stride + 16 * v, mask[v], acc[0][v]);
    }
  }
}

}  // namespace

void amx_begin() {
  TileConfig config;
  for (int t = 0; t < 8; ++t) {
    config.colsb[t] = kRowBytes;
    config.rows[t] = kRows;
  }
  // Inline asm with a memory operand: GCC 12 drops the stores to `config` ahead of its
  // _tile_loadconfig builtin, as if the instruction did not read them.
  asm volatile("ldtilecfg %0" : : "m"(config));
}

void amx_end() { _tile_release(); }

void bf16_gemm_32x32_amx(const GemmTileArgs& t) {
  const size_t steps = (t.kc + kStepK - 1) / kStepK;
  const auto* a = reinterpret_cast<const char*>(t.a);
  const auto* b = reinterpret_cast<const char*>(t.b);
  _tile_zero(0);
  _tile_zero(1);
  _tile_zero(2);
  _tile_zero(3);
  for (size_t s = 0; s < steps; ++s) {
    const char* as = a + s * kAmxAStepBytes;
    const char* bs = b + s * kRows * kBPanelBytes;
    // B streams from memory in weight-bound layers (few rows, many weights): fetch the steps
    // a few ahead while the tile unit works on this one.
    const char* ahead = bs + kBPrefetchSteps * kRows * kBPanelBytes;
    for (size_t line = 0; line < kRows * kBPanelBytes; line += 64) _mm_prefetch(ahead + line, _MM_HINT_T0);
    _tile_loadd(4, as, kRowBytes);
    _tile_loadd(6, bs, kBPanelBytes);
    _tile_loadd(7, bs + kRowBytes, kBPanelBytes);
    _tile_dpbf16ps(0, 4, 6);
    _tile_dpbf16ps(1, 4, 7);
    _tile_loadd(5, as + kRows * kRowBytes, kRowBytes);
    _tile_dpbf16ps(2, 5, 6);
    _tile_dpbf16ps(3, 5, 7);
  }
  alignas(64) float block[32][32];
  _tile_stored(0, &block[0][0], sizeof block[0]);
  _tile_stored(1, &block[0][16], sizeof block[0]);
  _tile_stored(2, &block[16][0], sizeof block[0]);
  _tile_stored(3, &block[16][16], sizeof block[0]);
  if (t.finish && (t.c_bf16 || t.residual_bf16)) finish_rows_bf16(&block[0], t);
  else finish_rows(block, t);
}

// Each row: 32 floats (masked at the end of k) become 32 bf16 in one conversion, which
// puts element 2p in the low half of word p, the pair layout.
void amx_finish_rows(const float* block, const GemmTileArgs& t) {
  finish_rows_bf16(reinterpret_cast<const float (*)[32]>(block), t);
}

void bf16_round_run(const float* src, size_t count, uint16_t* dst) {
  size_t i = 0;
  for (; i + 32 <= count; i += 32)
    _mm512_storeu_si512(dst + i, (__m512i)_mm512_cvtne2ps_pbh(_mm512_loadu_ps(src + i + 16), _mm512_loadu_ps(src + i)));
  for (; i < count; ++i) dst[i] = bf16_bits(src[i]);
}

void bf16_pack_a_amx(const float* a, size_t stride, size_t rows, size_t kc, uint32_t* out) {
  const size_t steps = (kc + kStepK - 1) / kStepK;
  for (size_t s = 0; s < steps; ++s) {
    uint32_t* dst = out + s * kAmxAStepWords;
    const size_t p = s * kStepK, left = std::min(kStepK, kc - p);
    const __mmask16 lo = left >= 16 ? __mmask16(0xFFFF) : __mmask16((1u << left) - 1);
    const __mmask16 hi = left >= 32 ? __mmask16(0xFFFF) : left <= 16 ? __mmask16(0) : __mmask16((1u << (left - 16)) - 1);
    for (size_t r = 0; r < rows; ++r) {
      const float* src = a + r * stride + p;
      const __m512bh v = _mm512_cvtne2ps_pbh(_mm512_maskz_loadu_ps(hi, src + 16), _mm512_maskz_loadu_ps(lo, src));
      _mm512_store_si512(dst + r * 16, (__m512i)v);
    }
    std::memset(dst + rows * 16, 0, (32 - rows) * 16 * sizeof(uint32_t));
  }
}

void bf16_pack_a_amx_row(const float* row, size_t kc, size_t r, uint32_t* tile) {
  const size_t full = kc / kStepK, left = kc - full * kStepK;
  uint32_t* dst = tile + r * 16;
  for (size_t s = 0; s < full; ++s) {
    const __m512bh v = _mm512_cvtne2ps_pbh(_mm512_loadu_ps(row + s * kStepK + 16), _mm512_loadu_ps(row + s * kStepK));
    _mm512_store_si512(dst + s * kAmxAStepWords, (__m512i)v);
  }
  if (left > 0) {
    const __mmask16 lo = left >= 16 ? __mmask16(0xFFFF) : __mmask16((1u << left) - 1);
    const __mmask16 hi = left <= 16 ? __mmask16(0) : __mmask16((1u << (left - 16)) - 1);
    const float* tail = row + full * kStepK;
    const __m512bh v = _mm512_cvtne2ps_pbh(_mm512_maskz_loadu_ps(hi, tail + 16), _mm512_maskz_loadu_ps(lo, tail));
    _mm512_store_si512(dst + full * kAmxAStepWords, (__m512i)v);
  }
}

void bf16_pack_a_amx_from_bf16(const uint16_t* a, size_t stride, size_t rows, size_t kc, uint32_t* out) {
  const size_t steps = (kc + kStepK - 1) / kStepK;
  for (size_t s = 0; s < steps; ++s) {
    uint32_t* dst = out + s * kAmxAStepWords;
    const size_t p = s * kStepK, left = std::min(kStepK, kc - p);
    const __mmask32 mask = left >= 32 ? ~__mmask32(0) : (__mmask32(1) << left) - 1;
    for (size_t r = 0; r < rows; ++r)
      _mm512_store_si512(dst + r * 16, _mm512_maskz_loadu_epi16(mask, a + r * stride + p));
    std::memset(dst + rows * 16, 0, (32 - rows) * 16 * sizeof(uint32_t));
  }
}

void bf16_pack_a_amx_row_from_bf16(const uint16_t* row, size_t kc, size_t r, uint32_t* tile) {
  const size_t steps = (kc + kStepK - 1) / kStepK;
  uint32_t* dst = tile + r * 16;
  for (size_t s = 0; s < steps; ++s) {
    const size_t p = s * kStepK, left = std::min(kStepK, kc - p);
    const __mmask32 mask = left >= 32 ? ~__mmask32(0) : (__mmask32(1) << left) - 1;
    _mm512_store_si512(dst + s * kAmxAStepWords, _mm512_maskz_loadu_epi16(mask, row + p));
  }
}

void bf16_chunks_to_amx_a(const float* src, size_t chunks, uint32_t* dst) {
  for (size_t c = 0; c < chunks; ++c, dst += kAmxAStepWords) {
    if (!src) {
      _mm512_store_si512(dst, _mm512_setzero_si512());
      continue;
    }
    const float* from = src + c * kStepK;
    _mm512_store_si512(dst, (__m512i)_mm512_cvtne2ps_pbh(_mm512_loadu_ps(from + 16), _mm512_loadu_ps(from)));
  }
}

void bf16_chunks_to_amx_a(const uint16_t* src, size_t chunks, uint32_t* dst) {
  for (size_t c = 0; c < chunks; ++c, dst += kAmxAStepWords)
    _mm512_store_si512(dst, src ? _mm512_loadu_si512(src + c * kStepK) : _mm512_setzero_si512());
}

// A stored transposed: k rows of m floats. Pairs of k rows are interleaved into words, then
// scattered to their rows; this path serves callers that hold A^T, not the hot loops.
void bf16_pack_a_amx_transposed(const float* a_t, size_t stride, size_t rows, size_t kc, uint32_t* out) {
  const size_t steps = (kc + kStepK - 1) / kStepK;
  std::memset(out, 0, steps * kAmxAStepWords * sizeof(uint32_t));
  uint32_t pairs[32];
  for (size_t p = 0; p < kc; p += 2) {
    const float* row0 = a_t + p * stride;
    bf16_interleave_rows_avx512bf16(row0, p + 1 < kc ? row0 + stride : nullptr, rows, pairs);
    uint32_t* dst = out + p / kStepK * kAmxAStepWords + p % kStepK / 2;
    for (size_t r = 0; r < rows; ++r) dst[r * 16] = pairs[r];
  }
}

}  // namespace grove::kernels
