#pragma once
// Integer GEMM behind MatMulInteger (and the 8-bit ops built on it):
//   C[i][j] = sum_p (A[i][p] - a_zero[i]) * (B[p][j] - b_zero[j])   in int32,
// A and B uint8 or int8, row-major with row strides, zero points one value or one per row of
// A / column of B. Exact: operands minus zero points are 9-bit, so products and pairwise sums
// fit int32; only the final sum wraps, as ONNX's int32 output does, past K ~ 33000.
//
// The avx2 kernel widens both operands to int16 with the zero points subtracted (B packed in
// panels of 16 columns holding pairs of k steps, A rows as k pairs) and multiplies pairs with
// vpmaddwd into int32: bit-identical to the scalar loops, which tests/kernels/test_igemm.cpp
// checks over odd sizes. The avx512 kernel does the same with vpdpwssd (AVX-512 VNNI) on the
// same panels, 16 columns per instruction.
#include <cstddef>
#include <cstdint>
#include <vector>

#include "kernels/isa.h"

namespace grove::kernels {

struct IntGemmCall {
  size_t m = 0, n = 0, k = 0;
  const void* a = nullptr;  // m rows of k bytes, row i at a + i * a_stride
  size_t a_stride = 0;
  bool a_signed = false;    // int8, else uint8
  const void* b = nullptr;  // k rows of n bytes, row p at b + p * b_stride
  size_t b_stride = 0;
  bool b_signed = false;
  const int32_t* a_zero = nullptr;  // nullptr: 0; else 1 value, or m when a_zero_per_row
  bool a_zero_per_row = false;
  // A - a_zero already packed by pack_a_pairs (a weight matrix packed once at plan time):
  // row i at a_pairs + i * 2 * ((k + 1) / 2). When set, a, a_stride, a_signed and a_zero are unused.
  const int16_t* a_pairs = nullptr;
  const int32_t* b_zero = nullptr;  // nullptr: 0; else 1 value, or n when b_zero_per_column
  bool b_zero_per_column = false;
  int32_t* c = nullptr;  // m rows of n, row i at c + i * c_stride
  size_t c_stride = 0;
};

// B already minus its zero points, as int16 in the kernel's panel order, for a caller that
// can write it directly (ConvInteger's im2col) instead of having a byte matrix packed:
// panels of 16 columns; in panel q, k steps 2t and 2t + 1 of column c are the two values at
// ((q * pairs + t) * 16 + c) * 2. Steps past k and columns past n hold 0.
struct IntPanels {
  static constexpr size_t kWidth = 16;
  size_t k = 0, n = 0, pairs = 0;
  std::vector<int16_t> values;

  // Sizes for k x n and zero-fills (reusing the buffer).
  void reset(size_t k_, size_t n_) {
    k = k_, n = n_, pairs = (k_ + 1) / 2;
    values.assign((n_ + kWidth - 1) / kWidth * pairs * kWidth * 2, 0);
  }
  size_t index(size_t p, size_t j) const { return ((j / kWidth * pairs + p / 2) * kWidth + j % kWidth) * 2 + p % 2; }
};

// A - a_zero as int16, each row k steps padded to whole pairs with 0 (the layout of a_pairs).
void pack_a_pairs(const IntGemmCall& call, std::vector<int16_t>& out);

// B - b_zero (call.b, b_stride, b_signed, b_zero, k, n) into panels: a constant weight
// matrix packed once at plan time, then used with int_gemm_panels.
void pack_b_panels(const IntGemmCall& call, IntPanels& out);

// Per-thread working memory (packed int16 operands), reused across calls.
struct IntGemmScratch {
  std::vector<int16_t> a_pairs;
  IntPanels b;
};

// Throws grove::Error if `isa` is not supported on this CPU. avx512 runs the AVX-512 VNNI
// kernel where the CPU has VNNI (isa_supports_avx512_vnni), else the avx2 kernel.
void int_gemm(const IntGemmCall& call, IntGemmScratch& scratch, Isa isa = active_isa());

// C = (A - a_zero) . panels, with call.b / b_stride / b_zero unused: every ISA (the scalar one
// loops over the panels), bit-identical to int_gemm on the same values.
void int_gemm_panels(const IntGemmCall& call, const IntPanels& b, IntGemmScratch& scratch, Isa isa = active_isa());

// One tile of a vector kernel: `rows` (the tile function's own count) rows of A pairs against
// one 16-column panel into C, of which `cols` columns are valid.
using IntTileFn = void (*)(const int16_t* a, size_t pairs, const int16_t* panel, int32_t* c, size_t c_stride,
                           size_t cols);
// The loops the vector kernels share: A packed unless call.a_pairs is given, then for every
// panel every block of up to `mr` rows, tiles[rows] computing each.
void run_int_tiles(const IntGemmCall& call, const IntPanels& b, IntGemmScratch& scratch, size_t mr,
                   const IntTileFn* tiles);

// The per-ISA kernels (igemm_scalar.cpp, igemm_avx2.cpp, igemm_avx512vnni.cpp).
void int_gemm_scalar(const IntGemmCall& call);
void int_gemm_panels_scalar(const IntGemmCall& call, const IntPanels& b);
void int_gemm_panels_avx2(const IntGemmCall& call, const IntPanels& b, IntGemmScratch& scratch);
void int_gemm_panels_avx512vnni(const IntGemmCall& call, const IntPanels& b, IntGemmScratch& scratch);

}  // namespace grove::kernels
