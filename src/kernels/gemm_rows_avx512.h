#pragma once
// Where row r of A is at the current k step, for the AVX-512 GEMM microkernels (f32: one float
// per step; bf16: one pair word per two steps). next() moves every row one step on.
//
// Packed: one group of kMR elements per step. In place (a_stride set): groups of 7 rows (0..6,
// 7..13, ...), each from its own base, at 0, s, 2s, 3s, 4s, 5s, 6s elements on: base + index *
// scale with the index registers s, 2s, 3s and 5s, so the loop keeps a pointer per group and
// four strides. The empty asm in next() hides from the compiler that the bases step in
// lockstep; otherwise it makes each row address an induction variable of its own, and 14 of
// them do not fit the 15 general registers and spilled inside the loop (docs/kernels.md).
//
// Included only by *_avx512*.cpp files; anonymous namespace for the same reason as
// gemm_epilogue_avx512.h.
#include <cstddef>

#include "kernels/gemm_microkernel.h"

namespace grove::kernels {
namespace {

constexpr int kRowsMR = 14;

template <class T>
struct PackedRows {
  const T* a;
  const T* at(int r) const { return a + r; }
  void next() { a += kRowsMR; }
  PackedRows shifted(ptrdiff_t) const { return *this; }  // packed A has one run of k
};

// Groups of 7 rows in place, each from its own base. a_stride, a_group_stride and the tap
// offsets count elements of T.
template <class T, int Groups>
struct RowsInPlace {
  const T* base[Groups];
  ptrdiff_t s1, s2, s3, s5;
  explicit RowsInPlace(const GemmTileArgs& t)
      : s1(ptrdiff_t(t.a_stride)), s2(2 * s1), s3(3 * s1), s5(5 * s1) {
    const ptrdiff_t group = t.a_group_stride ? t.a_group_stride : 7 * s1;
    const int per = t.a_group_stride && t.a_groups_per_stride > 1 ? int(t.a_groups_per_stride) : 1;
    for (int g = 0; g < Groups; ++g) base[g] = reinterpret_cast<const T*>(t.a) + (g / per) * group + (g % per) * 7 * s1;
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
  const T* at(int r) const {
    const T* b = base[r / 7];
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

// Each row from its own base (GemmTileArgs::a_rows): one load of the row's base per broadcast,
// which the load ports take beside the FMAs (28 FMAs and 16 loads a step before it).
template <class T>
struct RowsByPointer {
  const T* const* row;
  ptrdiff_t step = 0;
  const T* at(int r) const { return row[r] + step; }
  void next() { ++step; }
  RowsByPointer shifted(ptrdiff_t offset) const {
    RowsByPointer r = *this;
    r.step += offset;
    return r;
  }
};

}  // namespace
}  // namespace grove::kernels
