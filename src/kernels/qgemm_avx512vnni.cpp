// The 8-bit GEMM (qgemm.h) with vpdpbusd: a zmm of B is one panel's quad of k steps for 16
// columns (64 uint8), each A row's 4 int8 of that quad are broadcast, and one instruction
// adds the 4 products into each column's int32. A tile is up to 14 rows x 2 panels: 28
// accumulators, 2 panel loads and 14 broadcasts per quad. A's rows are packed per block so
// the broadcasts read one contiguous stream.
//
// Compiled with -mavx512f/bw/vnni (kernels.cmake); called only where isa_supports_avx512_vnni().
#include <immintrin.h>

#include <algorithm>
#include <cmath>
#include <array>
#include <cstring>
#include <utility>

#include "kernels/qadd_avx512.h"
#include "kernels/qgemm.h"

namespace grove::kernels {
namespace {

constexpr size_t kWidth = U8Panels::kWidth;
constexpr size_t kRows = PackedS8::kRows;

struct TileArgs {
  const int8_t* a;  // the row block
  size_t quads;
  const uint8_t* panel;
  size_t panel_bytes;
  size_t cols;  // valid columns in the last panel
  int32_t* c;   // int32 output: the tile's first row and column
  size_t c_stride;
  const S8Requantize* rq;  // requantized output instead
  size_t a_row;            // A's row of the tile's first row (rq's add and multiplier)
  uint8_t* y;              // rq: the tile's first row and column
};

using TileFn = void (*)(const TileArgs& t);

// requantize.h's arithmetic on 16 sums (intrinsics in the scalar loop's order; this file
// is compiled without FMA contraction): the values as integral floats in [lo, hi].
// may_be_nan: a multiplier is NaN or infinite (else an int32 times it is never NaN, and the
// NaN -> 0 step is skipped).
inline __m512 requantized_lanes(__m512i acc, __m512i add, __m512 multiplier, float zero_point, float lo, float hi,
                                bool may_be_nan = true) {
  __m512 v = _mm512_mul_ps(_mm512_cvtepi32_ps(_mm512_add_epi32(acc, add)), multiplier);
  if (may_be_nan) v = _mm512_maskz_mov_ps(_mm512_cmp_ps_mask(v, v, _CMP_ORD_Q), v);  // NaN -> 0
  // Round half to even in one instruction: the same integers as the scalar loop's bound and
  // 1.5 * 2^23 trick, and values past the bound clamp to lo or hi below either way.
  v = _mm512_roundscale_ps(v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  return _mm512_max_ps(_mm512_min_ps(_mm512_add_ps(v, _mm512_set1_ps(zero_point)), _mm512_set1_ps(hi)), _mm512_set1_ps(lo));
}

// Integral floats in the dtype's range, narrowed to bytes, stored under `mask`.
inline void store_lanes(__m512 v, bool is_signed, uint8_t* y, __mmask16 mask) {
  const __m512i q = _mm512_cvtps_epi32(v);  // integral already
  if (is_signed) _mm512_mask_cvtsepi32_storeu_epi8(y, mask, q);
  else _mm512_mask_cvtusepi32_storeu_epi8(y, mask, q);
}

inline void store_requantized(__m512i acc, __m512i add, __m512 multiplier, float zero_point, float lo, float hi,
                              bool is_signed, uint8_t* y, __mmask16 mask) {
  store_lanes(requantized_lanes(acc, add, multiplier, zero_point, lo, hi), is_signed, y, mask);
}

// One row's add and multiplier (S8Requantize: per row of A).
inline void store_requantized(__m512i acc, int32_t add, float multiplier, const S8Requantize& rq, uint8_t* y,
                              __mmask16 mask) {
  store_requantized(acc, _mm512_set1_epi32(add), _mm512_set1_ps(multiplier), rq.zero_point, rq.lo, rq.hi, rq.is_signed,
                    y, mask);
}

// R rows x P panels (P is 1 or 2). Two plain accumulator arrays, not one [R][P] array,
// which GCC 12 kept in memory. kRequant: the S8Requantize epilogue instead of int32 stores.
template <size_t R, size_t P, bool kMasked, bool kRequant>
void tile(const TileArgs& t) {
  static_assert(P == 1 || P == 2);
  __m512i acc0[R], acc1[R];
#pragma GCC unroll 16
  for (size_t r = 0; r < R; ++r) {
    acc0[r] = _mm512_setzero_si512();
    if constexpr (P == 2) acc1[r] = _mm512_setzero_si512();
  }
  const uint8_t* first = t.panel;
  const uint8_t* second = t.panel + (P == 2 ? t.panel_bytes : 0);
  for (size_t q = 0; q < t.quads; ++q) {
    const __m512i b0 = _mm512_loadu_si512(first + q * kWidth * 4);
    const __m512i b1 = P == 2 ? _mm512_loadu_si512(second + q * kWidth * 4) : b0;
    const int8_t* at = t.a + q * R * 4;
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
  const __mmask16 last = kMasked ? __mmask16((1u << t.cols) - 1) : __mmask16(0xFFFF);
  if constexpr (kRequant) {
    // Through an L1 buffer: requantizing straight from the accumulators made GCC 12 keep
    // shadow copies of them on the stack inside the loop, as masked stores did.
    alignas(64) int32_t sums[R][P * kWidth];
#pragma GCC unroll 16
    for (size_t r = 0; r < R; ++r) {
      _mm512_store_si512(sums[r], acc0[r]);
      if constexpr (P == 2) _mm512_store_si512(sums[r] + kWidth, acc1[r]);
    }
    const S8Requantize& rq = *t.rq;
    for (size_t r = 0; r < R; ++r) {
      const int32_t add = rq.add[t.a_row + r];
      const float multiplier = rq.multiplier[t.a_row + r];
      uint8_t* y = t.y + r * rq.y_stride;
      store_requantized(_mm512_load_si512(sums[r]), add, multiplier, rq, y, P == 2 ? __mmask16(0xFFFF) : last);
      if constexpr (P == 2) store_requantized(_mm512_load_si512(sums[r] + kWidth), add, multiplier, rq, y + kWidth, last);
    }
  } else if constexpr (kMasked) {
#pragma GCC unroll 16
    for (size_t r = 0; r < R; ++r) {
      if constexpr (P == 2) {
        _mm512_storeu_si512(t.c + r * t.c_stride, acc0[r]);
        _mm512_mask_storeu_epi32(t.c + r * t.c_stride + kWidth, last, acc1[r]);
      } else {
        _mm512_mask_storeu_epi32(t.c + r * t.c_stride, last, acc0[r]);
      }
    }
  } else {
#pragma GCC unroll 16
    for (size_t r = 0; r < R; ++r) {
      _mm512_storeu_si512(t.c + r * t.c_stride, acc0[r]);
      if constexpr (P == 2) _mm512_storeu_si512(t.c + r * t.c_stride + kWidth, acc1[r]);
    }
  }
}

template <size_t P, bool kMasked, bool kRequant, size_t... R>
constexpr std::array<TileFn, kRows + 1> tiles_of(std::index_sequence<R...>) {
  return {nullptr, tile<R + 1, P, kMasked, kRequant>...};
}
template <bool kRequant>
constexpr std::array<TileFn, kRows + 1> kTiles[2][2] = {
    {tiles_of<1, false, kRequant>(std::make_index_sequence<kRows>()),
     tiles_of<1, true, kRequant>(std::make_index_sequence<kRows>())},
    {tiles_of<2, false, kRequant>(std::make_index_sequence<kRows>()),
     tiles_of<2, true, kRequant>(std::make_index_sequence<kRows>())}};

// Every tile of A[range] . B: the larger operand is walked once in the outer loop and the
// smaller one re-read from cache in the inner loop (weights outer for late layers: many
// channels, few pixels; pixel panels outer for early ones).
template <bool kRequant>
void run_tiles(const PackedS8& a, RowRange range, const U8Panels& b, int32_t* c, size_t c_stride,
               const S8Requantize* rq) {
  const size_t panels = (b.n + kWidth - 1) / kWidth, bytes = b.panel_bytes();
  auto run = [&](size_t q0, size_t i0) {
    const size_t count = std::min<size_t>(2, panels - q0);
    TileArgs t{};
    t.a = a.block(i0 / kRows);
    t.quads = a.quads;
    t.panel = b.values.data() + q0 * bytes;
    t.panel_bytes = bytes;
    t.cols = std::min(kWidth, b.n - (q0 + count - 1) * kWidth);
    t.c = c ? c + (i0 - range.begin) * c_stride + q0 * kWidth : nullptr;
    t.c_stride = c_stride;
    t.rq = rq;
    t.a_row = i0;
    t.y = rq ? static_cast<uint8_t*>(rq->y) + (i0 - range.begin) * rq->y_stride + q0 * kWidth : nullptr;
    kTiles<kRequant>[count - 1][t.cols < kWidth][std::min(kRows, range.end - i0)](t);
  };
  if (range.end - range.begin > b.n) {
    for (size_t i0 = range.begin; i0 < range.end; i0 += kRows)
      for (size_t q0 = 0; q0 < panels; q0 += 2) run(q0, i0);
  } else {
    for (size_t q0 = 0; q0 < panels; q0 += 2)
      for (size_t i0 = range.begin; i0 < range.end; i0 += kRows) run(q0, i0);
  }
}

// ---- Y = X . W: rows of X broadcast, W's panels the vectors, per-column requantization ----

struct NanSteps {
  bool requantize, add;  // whether each step can make a NaN (then it maps NaN to 0)
};

// ColumnRequantize's scalars as vectors, made once per kernel call: y is written through
// uint8_t pointers, which may alias anything, so the compiler would load and broadcast them
// again for every row. The bounds come less the zero point: the kernel clamps before it
// rounds and adds the zero point after, in int32. Both bounds are integers, so that is the
// reference's round, add and clamp (rounding is monotonic and keeps integers), and the
// clamped value converts to int32 with round half to even in the conversion itself.
struct ColumnConstants {
  __m512 shifted_lo, shifted_hi;  // the requantization's bounds less its zero point
  __m512i zero_point;
  // The residual add: with the fused add the requantized value v only ever leaves as v - a_zero,
  // the clamped round plus `recentre` (zero point - a_zero, 0 in every QDQ model: the add reads
  // the conv's output), exactly (small integers in float).
  __m512 recentre, a_scale, b_zero, b_scale, y_scale, y_shifted_lo, y_shifted_hi;
  __m512i y_zero;
  NanSteps nan;
  bool relu, is_signed;
  bool recentred;  // recentre is not 0
};

ColumnConstants column_constants(const ColumnRequantize& rq, NanSteps nan) {
  ColumnConstants k;
  k.shifted_lo = _mm512_set1_ps(rq.lo - rq.zero_point), k.shifted_hi = _mm512_set1_ps(rq.hi - rq.zero_point);
  k.zero_point = _mm512_set1_epi32(static_cast<int32_t>(rq.zero_point));
  const QAddParams& p = rq.residual_add;
  k.recentre = _mm512_set1_ps(rq.zero_point - p.a_zero), k.a_scale = _mm512_set1_ps(p.a_scale);
  k.b_zero = _mm512_set1_ps(p.b_zero), k.b_scale = _mm512_set1_ps(p.b_scale);
  k.y_scale = _mm512_set1_ps(p.y_scale);
  k.y_shifted_lo = _mm512_set1_ps(p.lo - p.y_zero), k.y_shifted_hi = _mm512_set1_ps(p.hi - p.y_zero);
  k.y_zero = _mm512_set1_epi32(static_cast<int32_t>(p.y_zero));
  k.nan = nan;
  k.relu = p.relu, k.is_signed = rq.is_signed;
  k.recentred = rq.zero_point != p.a_zero;
  return k;
}

// An integral float clamped to the bounds less `zero`: rounded half to even into int32 (exact),
// plus the zero point, stored as bytes (the value fits the dtype, so truncation is the store).
inline void store_shifted(__m512 clamped, __m512i zero, uint8_t* y, __mmask16 mask) {
  const __m512i q = _mm512_add_epi32(_mm512_cvt_roundps_epi32(clamped, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC), zero);
  if (mask == 0xFFFF) _mm_storeu_si128(reinterpret_cast<__m128i*>(y), _mm512_cvtepi32_epi8(q));
  else _mm512_mask_cvtepi32_storeu_epi8(y, mask, q);
}

struct RowTileArgs {
  const uint8_t* x;
  size_t x_stride, quads;
  const uint8_t* panel;  // W's first panel of the tile
  size_t panel_bytes, cols;
  const ColumnRequantize* rq;
  size_t col;  // the tile's first column
  uint8_t* y;  // the tile's first row and column
  const uint8_t* residual;  // ColumnRequantize::residual at the tile's first row and column, or null
  const ColumnConstants* constants;
  const int32_t* add;  // u8s8_gemm_int32: per column of W
  int32_t* c;          // u8s8_gemm_int32: the tile's first row and column
  size_t c_stride;
};

using RowTileFn = void (*)(const RowTileArgs& t);

// 16 columns' sums (their adds included: the accumulators start from them) times their
// multipliers (ColumnRequantize: per column of W), then, with kResidual, the fused residual add
// of the same 16 positions of `residual`: the steps of requantized_lanes and qadd_lanes in their
// order, on the constants made once.
template <bool kResidual>
inline void store_column_requantized(__m512i acc, __m512 multiplier, const ColumnConstants& k, uint8_t* y,
                                     const uint8_t* residual, __mmask16 mask) {
  __m512 v = _mm512_mul_ps(_mm512_cvtepi32_ps(acc), multiplier);
  if (k.nan.requantize) v = _mm512_maskz_mov_ps(_mm512_cmp_ps_mask(v, v, _CMP_ORD_Q), v);
  v = _mm512_max_ps(_mm512_min_ps(v, k.shifted_hi), k.shifted_lo);
  if constexpr (!kResidual) {
    store_shifted(v, k.zero_point, y, mask);
  } else {
    __m512 centred = _mm512_roundscale_ps(v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    if (k.recentred) centred = _mm512_add_ps(centred, k.recentre);
    const __m512 fa = _mm512_mul_ps(centred, k.a_scale);
    const __m512 fb = _mm512_mul_ps(_mm512_sub_ps(bytes_as_floats(residual, k.is_signed, mask), k.b_zero), k.b_scale);
    __m512 sum = _mm512_add_ps(fa, fb);
    if (k.relu) sum = _mm512_max_ps(sum, _mm512_setzero_ps());
    sum = _mm512_div_ps(sum, k.y_scale);
    if (k.nan.add) sum = _mm512_maskz_mov_ps(_mm512_cmp_ps_mask(sum, sum, _CMP_ORD_Q), sum);
    store_shifted(_mm512_max_ps(_mm512_min_ps(sum, k.y_shifted_hi), k.y_shifted_lo), k.y_zero, y, mask);
  }
}

// The requantizing store of R rows x P panels of sums (row r at sums + r * P * kWidth). The
// strides and flags are copied into locals: the byte stores may alias anything, and the
// compiler would otherwise load them again after each one.
template <size_t R, size_t P, bool kResidual>
void store_rows(const int32_t* sums, const RowTileArgs& t, __mmask16 last) {
  const ColumnConstants& k = *t.constants;
  const size_t y_stride = t.rq->y_stride, residual_stride = t.rq->residual_stride;
  const __mmask16 first = P == 2 ? __mmask16(0xFFFF) : last;
  const __m512 m0 = _mm512_maskz_loadu_ps(first, t.rq->multiplier + t.col);
  const __m512 m1 = P == 2 ? _mm512_maskz_loadu_ps(last, t.rq->multiplier + t.col + kWidth) : m0;
  uint8_t* y = t.y;
  const uint8_t* res = t.residual;
  for (size_t r = 0; r < R; ++r, y += y_stride, res += kResidual ? residual_stride : 0) {
    store_column_requantized<kResidual>(_mm512_load_si512(sums + r * P * kWidth), m0, k, y, res, first);
    if constexpr (P == 2)
      store_column_requantized<kResidual>(_mm512_load_si512(sums + r * P * kWidth + kWidth), m1, k, y + kWidth,
                                          kResidual ? res + kWidth : nullptr, last);
  }
}

// The products of R rows of X and P panels of W, added to the accumulators' start (16
// columns' adds per panel, broadcast down the rows).
template <size_t R, size_t P>
inline void accumulate_rows(const RowTileArgs& t, __m512i add0, __m512i add1, __m512i (&acc0)[R], __m512i (&acc1)[R]) {
#pragma GCC unroll 16
  for (size_t r = 0; r < R; ++r) {
    acc0[r] = add0;
    if constexpr (P == 2) acc1[r] = add1;
  }
  for (size_t q = 0; q < t.quads; ++q) {
    const __m512i w0 = _mm512_loadu_si512(t.panel + q * kWidth * 4);
    const __m512i w1 = P == 2 ? _mm512_loadu_si512(t.panel + t.panel_bytes + q * kWidth * 4) : w0;
#pragma GCC unroll 16
    for (size_t r = 0; r < R; ++r) {
      int32_t quad;
      std::memcpy(&quad, t.x + r * t.x_stride + q * 4, sizeof quad);
      const __m512i xq = _mm512_set1_epi32(quad);
      acc0[r] = _mm512_dpbusd_epi32(acc0[r], xq, w0);
      if constexpr (P == 2) acc1[r] = _mm512_dpbusd_epi32(acc1[r], xq, w1);
    }
  }
}

// R rows of X x P panels of W; through an L1 buffer before requantizing, as in tile().
template <size_t R, size_t P>
void row_tile(const RowTileArgs& t) {
  const __mmask16 last = t.cols == kWidth ? __mmask16(0xFFFF) : __mmask16((1u << t.cols) - 1);
  const __m512i add0 = _mm512_maskz_loadu_epi32(P == 2 ? __mmask16(0xFFFF) : last, t.rq->add + t.col);
  const __m512i add1 = P == 2 ? _mm512_maskz_loadu_epi32(last, t.rq->add + t.col + kWidth) : add0;
  __m512i acc0[R], acc1[R];
  accumulate_rows<R, P>(t, add0, add1, acc0, acc1);
  alignas(64) int32_t sums[R][P * kWidth];
#pragma GCC unroll 16
  for (size_t r = 0; r < R; ++r) {
    _mm512_store_si512(sums[r], acc0[r]);
    if constexpr (P == 2) _mm512_store_si512(sums[r] + kWidth, acc1[r]);
  }
  if (t.residual) store_rows<R, P, true>(sums[0], t, last);
  else store_rows<R, P, false>(sums[0], t, last);
}

// The same products stored as int32 (u8s8_gemm_int32): t.add per column, t.c the tile's
// first row and column.
template <size_t R, size_t P>
void row_tile_int32(const RowTileArgs& t) {
  const __mmask16 last = t.cols == kWidth ? __mmask16(0xFFFF) : __mmask16((1u << t.cols) - 1);
  const __mmask16 first = P == 2 ? __mmask16(0xFFFF) : last;
  const __m512i add0 = _mm512_maskz_loadu_epi32(first, t.add + t.col);
  const __m512i add1 = P == 2 ? _mm512_maskz_loadu_epi32(last, t.add + t.col + kWidth) : add0;
  __m512i acc0[R], acc1[R];
  accumulate_rows<R, P>(t, add0, add1, acc0, acc1);
#pragma GCC unroll 16
  for (size_t r = 0; r < R; ++r) {
    _mm512_mask_storeu_epi32(t.c + r * t.c_stride, first, acc0[r]);
    if constexpr (P == 2) _mm512_mask_storeu_epi32(t.c + r * t.c_stride + kWidth, last, acc1[r]);
  }
}

template <size_t P, size_t... R>
constexpr std::array<RowTileFn, kRows + 1> int32_tiles_of(std::index_sequence<R...>) {
  return {nullptr, row_tile_int32<R + 1, P>...};
}
constexpr std::array<RowTileFn, kRows + 1> kInt32Tiles[2] = {int32_tiles_of<1>(std::make_index_sequence<kRows>()),
                                                             int32_tiles_of<2>(std::make_index_sequence<kRows>())};

template <size_t P, size_t... R>
constexpr std::array<RowTileFn, kRows + 1> row_tiles_of(std::index_sequence<R...>) {
  return {nullptr, row_tile<R + 1, P>...};
}
constexpr std::array<RowTileFn, kRows + 1> kRowTiles[2] = {row_tiles_of<1>(std::make_index_sequence<kRows>()),
                                                           row_tiles_of<2>(std::make_index_sequence<kRows>())};

// Every tile of X's rows against W's panels [first, panels), each a RowTileArgs with its
// operands set, passed to `tile` with the tile's panel count and rows. The larger operand is
// walked once in the outer loop, the smaller re-read from cache: W's panel pairs outer for
// few rows and many columns (a token block of a transformer, a late conv layer), X's row
// blocks outer for many rows (an early conv layer's pixels).
template <class Tile>
void for_each_row_tile(const uint8_t* x, size_t rows, size_t x_stride, const U8Panels& w, size_t first, size_t end,
                       Tile&& tile) {
  const size_t bytes = w.panel_bytes(), panels = (end + kWidth - 1) / kWidth;
  auto run = [&](size_t q0, size_t t0) {
    const size_t count = std::min<size_t>(2, panels - q0);
    RowTileArgs t{};
    t.x = x + t0 * x_stride;
    t.x_stride = x_stride;
    t.quads = w.quads;
    t.panel = w.values.data() + q0 * bytes;
    t.panel_bytes = bytes;
    t.cols = std::min(kWidth, end - (q0 + count - 1) * kWidth);
    t.col = q0 * kWidth;
    tile(t, q0 - first, t0, count, std::min(kRows, rows - t0));
  };
  if (rows > (panels - first) * kWidth) {
    for (size_t t0 = 0; t0 < rows; t0 += kRows)
      for (size_t q0 = first; q0 < panels; q0 += 2) run(q0, t0);
  } else {
    for (size_t q0 = first; q0 < panels; q0 += 2)
      for (size_t t0 = 0; t0 < rows; t0 += kRows) run(q0, t0);
  }
}

}  // namespace

void u8s8_gemm_requantize_avx512vnni(const uint8_t* x, size_t rows, size_t x_stride, const U8Panels& w,
                                     const ColumnRequantize& r) {
  const size_t first = r.col_begin / kWidth;
  NanSteps nan{false, r.residual && qadd_may_be_nan(r.residual_add)};
  for (size_t j = r.col_begin; j < std::min(r.col_end, w.n); ++j) nan.requantize |= !std::isfinite(r.multiplier[j]);
  const ColumnConstants constants = column_constants(r, nan);
  for_each_row_tile(x, rows, x_stride, w, first, std::min(r.col_end, w.n),
                    [&](RowTileArgs& t, size_t panel, size_t t0, size_t count, size_t tile_rows) {
                      t.rq = &r;
                      t.y = static_cast<uint8_t*>(r.y) + t0 * r.y_stride + panel * kWidth;
                      t.residual = r.residual ? static_cast<const uint8_t*>(r.residual) + t0 * r.residual_stride +
                                                    panel * kWidth
                                              : nullptr;
                      t.constants = &constants;
                      kRowTiles[count - 1][tile_rows](t);
                    });
}

void u8s8_gemm_int32_avx512vnni(const uint8_t* x, size_t rows, size_t x_stride, const U8Panels& w, const int32_t* add,
                                size_t col_begin, size_t col_end, int32_t* c, size_t c_stride) {
  for_each_row_tile(x, rows, x_stride, w, col_begin / kWidth, std::min(col_end, w.n),
                    [&](RowTileArgs& t, size_t panel, size_t t0, size_t count, size_t tile_rows) {
                      t.add = add;
                      t.c = c + t0 * c_stride + panel * kWidth;
                      t.c_stride = c_stride;
                      kInt32Tiles[count - 1][tile_rows](t);
                    });
}

void u8s8_requantize_block_avx512vnni(const int32_t* sums, size_t sums_stride, size_t rows, size_t count,
                                      size_t cols_last, const ColumnRequantize& r, size_t col, uint8_t* y,
                                      const uint8_t* residual, bool nan_requantize, bool nan_add) {
  const ColumnConstants k = column_constants(r, NanSteps{nan_requantize, nan_add});
  const __mmask16 last = cols_last == kWidth ? __mmask16(0xFFFF) : __mmask16((1u << cols_last) - 1);
  const __mmask16 first = count == 2 ? __mmask16(0xFFFF) : last;
  const __m512i add0 = _mm512_maskz_loadu_epi32(first, r.add + col);
  const __m512i add1 = count == 2 ? _mm512_maskz_loadu_epi32(last, r.add + col + kWidth) : add0;
  const __m512 m0 = _mm512_maskz_loadu_ps(first, r.multiplier + col);
  const __m512 m1 = count == 2 ? _mm512_maskz_loadu_ps(last, r.multiplier + col + kWidth) : m0;
  for (size_t t = 0; t < rows; ++t) {
    const int32_t* s = sums + t * sums_stride;
    uint8_t* yt = y + t * r.y_stride;
    const __m512i a0 = _mm512_add_epi32(_mm512_loadu_si512(s), add0);
    if (residual) {
      const uint8_t* res = residual + t * r.residual_stride;
      store_column_requantized<true>(a0, m0, k, yt, res, first);
      if (count == 2)
        store_column_requantized<true>(_mm512_add_epi32(_mm512_loadu_si512(s + kWidth), add1), m1, k, yt + kWidth,
                                       res + kWidth, last);
    } else {
      store_column_requantized<false>(a0, m0, k, yt, nullptr, first);
      if (count == 2)
        store_column_requantized<false>(_mm512_add_epi32(_mm512_loadu_si512(s + kWidth), add1), m1, k, yt + kWidth,
                                        nullptr, last);
    }
  }
}

void s8u8_gemm_avx512vnni(const PackedS8& a, RowRange range, const U8Panels& b, int32_t* c, size_t c_stride) {
  run_tiles<false>(a, range, b, c, c_stride, nullptr);
}

void s8u8_gemm_requantize_avx512vnni(const PackedS8& a, RowRange range, const U8Panels& b, const S8Requantize& r) {
  run_tiles<true>(a, range, b, nullptr, 0, &r);
}

}  // namespace grove::kernels
