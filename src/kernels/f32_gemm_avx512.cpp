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
// f32_gemm_28x16_avx512 is the same loop for a B of at most 16 columns (a conv of 16 output
// channels or fewer), A in place only: 28 rows x 1 vector keep all 28 accumulators busy where
// the 14 x 32 tile would spend half its FMAs on empty lanes.
//
// Compiled with -mavx512f/dq/bw/vl -mfma (kernels.cmake). Everything but the entry point
// has internal linkage so no AVX-512 code can leak into generic inline functions.
#include <immintrin.h>

#include "kernels/gemm_epilogue_avx512.h"

namespace grove::kernels {

namespace {

constexpr int kMR = 14;

// Where row r of A is at the current k step; next() moves every row one step on. Packed: one
// group of kMR floats per step. In place (a_stride set): groups of 7 rows (0..6, 7..13, ...),
// each from its own base, at 0, s, 2s, 3s, 4s, 5s, 6s floats on: base + index * scale with the
// index registers s, 2s, 3s and 5s, so the loop keeps a pointer per group and four strides.
// The empty asm in next() hides from the compiler that the bases step in lockstep with p;
// otherwise it makes each row address an induction variable of its own, and 14 of them do
// not fit the 15 general registers and spilled inside the loop (docs/kernels.md).
struct PackedRows {
  const float* a;
  const float* at(int r) const { return a + r; }
  void next() { a += kMR; }
  PackedRows shifted(ptrdiff_t) const { return *this; }  // packed A has one run of k
};

// Groups of 7 rows in place, each from its own base.
template <int Groups>
struct RowsInPlace {
  const float* base[Groups];
  ptrdiff_t s1, s2, s3, s5;
  explicit RowsInPlace(const GemmTileArgs& t)
      : s1(ptrdiff_t(t.a_stride)), s2(2 * s1), s3(3 * s1), s5(5 * s1) {
    const ptrdiff_t group = t.a_group_stride ? t.a_group_stride : 7 * s1;
    for (int g = 0; g < Groups; ++g) base[g] = t.a + g * group;
  }
  RowsInPlace shifted(ptrdiff_t offset) const {
    RowsInPlace r = *this;
    for (int g = 0; g < Groups; ++g) r.base[g] += offset;
    return r;
  }
  void next() {
    for (int g = 0; g < Groups; ++g) {
      ++base[g];
      __asm__("" : "+r"(base[g]));
    }
  }
  const float* at(int r) const {
    const float* b = base[r / 7];
    switch (r % 7) {
      case 0: return b;
      case 1: return b + s1;
      case 2: return b + 2 * s1;
      case 3: return b + s3;
      case 4: return b + 2 * s2;
      case 5: return b + s5;
      default: return b + 2 * s3;
    }
  }
};

// kc steps of k from A rows `rows` and B at b; returns B past them. With kPrefetch, one step
// of the next panel (2 lines of 64 bytes) is asked for per step of this one; the two loops are
// separate so the common one carries no branch.
template <bool kPrefetch, int R, int NV, class Rows>
[[gnu::always_inline]] inline const float* steps_of(__m512 (&acc)[R][NV], const float* b, const char* next,
                                                    Rows rows, size_t kc) {
  for (size_t p = 0; p < kc; ++p) {
    if constexpr (kPrefetch) {
      _mm_prefetch(next + p * 128, _MM_HINT_T1);
      _mm_prefetch(next + p * 128 + 64, _MM_HINT_T1);
    }
    __m512 bv[NV];
#pragma GCC unroll 4
    for (int v = 0; v < NV; ++v) bv[v] = _mm512_load_ps(b + 16 * v);
#pragma GCC unroll 32
    for (int r = 0; r < R; ++r) {
      const __m512 av = _mm512_set1_ps(*rows.at(r));
#pragma GCC unroll 4
      for (int v = 0; v < NV; ++v) acc[r][v] = _mm512_fmadd_ps(av, bv[v], acc[r][v]);
    }
    rows.next();
    b += 16 * kNV;  // panels are 32 floats wide whatever NV uses of them
  }
  return b;
}

template <int R, int NV, class Rows>
[[gnu::always_inline]] inline const float* add_steps(__m512 (&acc)[R][NV], const float* b, const char* next,
                                                     const Rows& rows, size_t kc) {
  return next ? steps_of<true>(acc, b, next, rows, kc) : steps_of<false>(acc, b, next, rows, kc);
}

// An R x 16 NV tile of a 32-column panel (NV = 1: its first 16 columns).
template <int R, int NV, class Rows>
void tile(const GemmTileArgs& t, const Rows& rows) {
  __m512 acc[R][NV];
  start_tile(acc, t);

  const char* next = reinterpret_cast<const char*>(t.b_next);
  if (!t.tap_offsets) {
    add_steps(acc, t.b, next, rows, t.kc);
  } else {
    const float* b = t.b;
    for (size_t tap = 0; tap < t.taps; ++tap) {
      b = add_steps(acc, b, next, rows.shifted(t.tap_offsets[tap]), t.kc);
      if (next) next += t.kc * 128;
    }
  }

  store_tile(acc, t);
}

}  // namespace

void f32_gemm_14x32_avx512(const GemmTileArgs& t) {
  if (t.a_stride) with_rows<kMR>(t.m, [&](auto rows) { tile<rows(), kNV>(t, RowsInPlace<2>(t)); });
  else with_rows<kMR>(t.m, [&](auto rows) { tile<rows(), kNV>(t, PackedRows{t.a}); });
}

void f32_gemm_28x16_avx512(const GemmTileArgs& t) {
  with_rows<2 * kMR>(t.m, [&](auto rows) { tile<rows(), 1>(t, RowsInPlace<4>(t)); });
}

}  // namespace grove::kernels
