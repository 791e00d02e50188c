// AVX-512 microkernel, 14 x 32: 28 zmm accumulators + 2 for the B row + broadcasts folded
// into the FMAs' memory operand, i.e. all 32 registers. Per k step it issues 28 FMAs for
// 2 vector loads and 14 scalar broadcasts, so it is bound by FMA throughput, not loads.
// Rows are a template parameter (1..14) so a short last tile does only the work it needs;
// columns past n are handled with masks.
//
// With a_stride set, A is read where it lies (rows of a channels-last activation, or of a
// padded copy of its rows): the same broadcasts, from 14 rows instead of one packed group, so a
// 1x1 conv packs nothing and a conv adds its taps as calls that accumulate (ops/tile_conv_nhwc).
//
// The first row tile of a panel, whose B slice comes from memory when the weights are cold (a
// network's later layers: megabytes each, read once per run), asks for the next panel's slice
// into L2 as it goes, one step per step, so that the next panel's tiles find it there.
//
// Compiled with -mavx512f/dq/bw/vl -mfma (kernels.cmake). Everything but the entry point
// has internal linkage so no AVX-512 code can leak into generic inline functions.
#include <immintrin.h>

#include "kernels/gemm_epilogue_avx512.h"

namespace grove::kernels {

namespace {

constexpr int kMR = 14;

// Where row r of A is at the current k step; next() moves every row one step on. Packed: one
// group of kMR floats per step. In place (a_stride set): rows 0..6 from one base and 7..13
// from another, at 0, s, 2s, 3s, 4s, 5s, 6s floats on: base + index * scale with the index
// registers s, 2s, 3s and 5s, so the loop keeps two pointers and four loop-invariant strides.
// The empty asm in next() hides from the compiler that the bases step in lockstep with p;
// otherwise it makes each of the 14 row addresses an induction variable of its own, which
// does not fit the 15 general registers and spilled inside the loop (docs/kernels.md).
struct PackedRows {
  const float* a;
  const float* at(int r) const { return a + r; }
  void next() { a += kMR; }
  PackedRows shifted(ptrdiff_t) const { return *this; }  // packed A has one run of k
};

struct RowsInPlace {
  const float *a0, *a7;
  ptrdiff_t s1, s2, s3, s5;
  explicit RowsInPlace(const GemmTileArgs& t)
      : a0(t.a), a7(t.a + 7 * t.a_stride), s1(ptrdiff_t(t.a_stride)), s2(2 * s1), s3(3 * s1), s5(5 * s1) {}
  RowsInPlace shifted(ptrdiff_t offset) const {
    RowsInPlace r = *this;
    r.a0 += offset, r.a7 += offset;
    return r;
  }
  void next() {
    ++a0, ++a7;
    __asm__("" : "+r"(a0), "+r"(a7));
  }
  const float* at(int r) const {
    const float* base = r < 7 ? a0 : a7;
    switch (r % 7) {
      case 0: return base;
      case 1: return base + s1;
      case 2: return base + 2 * s1;
      case 3: return base + s3;
      case 4: return base + 2 * s2;
      case 5: return base + s5;
      default: return base + 2 * s3;
    }
  }
};

// kc steps of k from A rows `rows` and B at b; returns B past them. With kPrefetch, one step
// of the next panel (2 lines of 64 bytes) is asked for per step of this one; the two loops are
// separate so the common one carries no branch.
template <bool kPrefetch, int R, class Rows>
[[gnu::always_inline]] inline const float* steps_of(__m512 (&acc)[R][kNV], const float* b, const char* next,
                                                     Rows rows, size_t kc) {
  for (size_t p = 0; p < kc; ++p) {
    if constexpr (kPrefetch) {
      _mm_prefetch(next + p * 128, _MM_HINT_T1);
      _mm_prefetch(next + p * 128 + 64, _MM_HINT_T1);
    }
    __m512 bv[kNV];
#pragma GCC unroll 4
    for (int v = 0; v < kNV; ++v) bv[v] = _mm512_load_ps(b + 16 * v);
#pragma GCC unroll 16
    for (int r = 0; r < R; ++r) {
      const __m512 av = _mm512_set1_ps(*rows.at(r));
#pragma GCC unroll 4
      for (int v = 0; v < kNV; ++v) acc[r][v] = _mm512_fmadd_ps(av, bv[v], acc[r][v]);
    }
    rows.next();
    b += 16 * kNV;
  }
  return b;
}

template <int R, class Rows>
[[gnu::always_inline]] inline const float* add_steps(__m512 (&acc)[R][kNV], const float* b, const char* next,
                                                     const Rows& rows, size_t kc) {
  return next ? steps_of<true>(acc, b, next, rows, kc) : steps_of<false>(acc, b, next, rows, kc);
}

template <int R, class Rows>
void tile(const GemmTileArgs& t, const Rows& rows) {
  __m512 acc[R][kNV];
  start_tile<R>(acc, t);

  const char* next = reinterpret_cast<const char*>(t.b_next);
  if (!t.tap_offsets) {
    add_steps<R>(acc, t.b, next, rows, t.kc);
  } else {
    const float* b = t.b;
    for (size_t tap = 0; tap < t.taps; ++tap) {
      b = add_steps<R>(acc, b, next, rows.shifted(t.tap_offsets[tap]), t.kc);
      if (next) next += t.kc * 128;
    }
  }

  store_tile<R>(acc, t);
}

}  // namespace

void f32_gemm_14x32_avx512(const GemmTileArgs& t) {
  static_assert(kMR == 14, "with_rows_1_to_14 covers every tile height");
  if (t.a_stride) with_rows_1_to_14(t.m, [&](auto rows) { tile<rows()>(t, RowsInPlace(t)); });
  else with_rows_1_to_14(t.m, [&](auto rows) { tile<rows()>(t, PackedRows{t.a}); });
}

}  // namespace grove::kernels
