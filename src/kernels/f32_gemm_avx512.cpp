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

#include <type_traits>

#include "kernels/gemm_epilogue_avx512.h"
#include "kernels/gemm_rows_avx512.h"

namespace grove::kernels {

namespace {

constexpr int kMR = kRowsMR;

using Packed = PackedRows<float>;
template <int Groups>
using InPlace = RowsInPlace<float, Groups>;
using ByPointer = RowsByPointer<float>;

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

// The same over only the steps `steps` names (GemmTileArgs::k_steps) of a run of kc; returns B
// past the whole run.
template <int R, int NV, class Rows>
[[gnu::always_inline]] inline const float* chosen_steps(__m512 (&acc)[R][NV], const float* b, const char* next,
                                                        const Rows& rows, const uint32_t* steps, size_t count, size_t kc) {
  for (size_t p = 0; p < count; ++p) {
    const size_t j = steps[p];
    if (next) {
      _mm_prefetch(next + j * 128, _MM_HINT_T1);
      _mm_prefetch(next + j * 128 + 64, _MM_HINT_T1);
    }
    __m512 bv[NV];
#pragma GCC unroll 4
    for (int v = 0; v < NV; ++v) bv[v] = _mm512_load_ps(b + j * 16 * kNV + 16 * v);
    // The rows moved to step j once, so each broadcast folds its row's offset into its address.
    const Rows at_step = rows.shifted(ptrdiff_t(j));
#pragma GCC unroll 32
    for (int r = 0; r < R; ++r) {
      const __m512 av = _mm512_set1_ps(*at_step.at(r));
#pragma GCC unroll 4
      for (int v = 0; v < NV; ++v) acc[r][v] = _mm512_fmadd_ps(av, bv[v], acc[r][v]);
    }
  }
  return b + kc * 16 * kNV;
}

template <int R, int NV, class Rows>
[[gnu::always_inline]] inline const float* add_steps(__m512 (&acc)[R][NV], const float* b, const char* next,
                                                     const Rows& rows, size_t kc) {
  return next ? steps_of<true>(acc, b, next, rows, kc) : steps_of<false>(acc, b, next, rows, kc);
}

// Every run (tap) of t into acc: all of each run's steps, or the ones t.k_steps names (A in
// place only).
template <int R, int NV, class Rows>
[[gnu::always_inline]] inline void add_runs(__m512 (&acc)[R][NV], const GemmTileArgs& t, const Rows& rows) {
  const char* next = reinterpret_cast<const char*>(t.b_next);
  if constexpr (!std::is_same_v<Rows, Packed>) {
    if (t.k_steps) {
      const float* b = t.b;
      for (size_t tap = 0; tap < t.taps; ++tap) {
        b = chosen_steps(acc, b, next, t.tap_offsets ? rows.shifted(t.tap_offsets[tap]) : rows, t.k_steps,
                         t.k_step_count, t.kc);
        if (next) next += t.kc * 128;
      }
      return;
    }
  }
  if (!t.tap_offsets) {
    add_steps(acc, t.b, next, rows, t.kc);
    return;
  }
  const float* b = t.b;
  for (size_t tap = 0; tap < t.taps; ++tap) {
    b = add_steps(acc, b, next, rows.shifted(t.tap_offsets[tap]), t.kc);
    if (next) next += t.kc * 128;
  }
}

// An R x 16 NV tile of a 32-column panel (NV = 1: its first 16 columns); with kCRows, C's rows
// at t.c_rows.
template <int R, int NV, class Rows, bool kCRows = false>
void tile(const GemmTileArgs& t, const Rows& rows) {
  __m512 acc[R][NV];
  start_tile<R, NV, kCRows>(acc, t);
  add_runs(acc, t, rows);
  store_tile<R, NV, kCRows>(acc, t);
}

}  // namespace

void f32_gemm_14x32_avx512(const GemmTileArgs& t) {
  if (t.a_rows && t.c_rows) with_rows<kMR>(t.m, [&](auto rows) { tile<rows(), kNV, ByPointer, true>(t, ByPointer{t.a_rows}); });
  else if (t.a_rows) with_rows<kMR>(t.m, [&](auto rows) { tile<rows(), kNV>(t, ByPointer{t.a_rows}); });
  else if (t.a_stride) with_rows<kMR>(t.m, [&](auto rows) { tile<rows(), kNV>(t, InPlace<2>(t)); });
  else with_rows<kMR>(t.m, [&](auto rows) { tile<rows(), kNV>(t, Packed{t.a}); });  // k_steps: A in place only
}

void f32_gemm_28x16_avx512(const GemmTileArgs& t) {
  with_rows<2 * kMR>(t.m, [&](auto rows) { tile<rows(), 1>(t, InPlace<4>(t)); });
}

}  // namespace grove::kernels
