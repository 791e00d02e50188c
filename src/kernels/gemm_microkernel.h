#pragma once
// The contract between the GEMM driver (gemm.cpp) and its microkernels. Types only, for
// the same reason as epilogue.h.
//
// A microkernel computes one MR x NR tile of C over kc steps of k:
//   a: packed A, kc groups of MR floats (row r of step p at a[p * MR + r]); rows >= m are 0;
//      or, where a_stride is set (f32_gemm_14x32_avx512 only), A as it lies: row r of step p
//      at a[r * a_stride + p], rows >= m not read; with tap_offsets, step p of run i at
//      a[tap_offsets[i] + r * a_stride + p].
//   b: packed B, kc groups of NR floats (column j of step p at b[p * NR + j]); cols >= n are 0.
// Only the valid m x n corner of C is read or written.
#include <cstddef>
#include <cstdint>

#include "kernels/epilogue.h"

namespace grove::kernels {

struct GemmTileArgs {
  size_t kc = 0;
  const float* a = nullptr;
  size_t a_stride = 0;  // 0: packed A; else unpacked A's row stride in floats
  // A in place only: floats from row 0 to row 7, 14 to 21, ... (each group of 7 rows has its own
  // base); 0: 7 * a_stride, one even stride. Two output rows of a 7-wide plane fill one 14-row
  // tile (kernels/conv_rows.cpp).
  ptrdiff_t a_group_stride = 0;
  // With a_group_stride: groups per stride, each 7 * a_stride floats after the one before (four
  // 14-wide output rows' groups in a 28-row tile: 2). 1: one group per stride.
  size_t a_groups_per_stride = 1;
  // A in place only: k runs as `taps` runs of kc steps, run i reading A from a + tap_offsets[i]
  // (floats) while B goes on from one run to the next. A conv's taps so add up in registers
  // instead of in C (kernels/conv_rows.h). Null: one run from a.
  size_t taps = 1;
  const ptrdiff_t* tap_offsets = nullptr;
  // A in place, f32 only: each run takes only these of its kc steps (increasing, each < kc),
  // A at the step's index from the run's base and B at that row of the run's kc rows; B then
  // goes on after the run's kc rows. A conv of an activation with channels pruned so skips
  // them without copying the weights of the kept ones (kernels/conv_rows.h). Null: every step.
  const uint32_t* k_steps = nullptr;
  size_t k_step_count = 0;
  // A by row, f32_gemm_14x32_avx512 only: row r of step p at a_rows[r][p] (with tap_offsets and
  // k_steps as for A in place), a_stride and a unused. The rows of a conv's outputs that are not
  // next to each other (a pruned conv's computed outputs, kernels/conv_rows.h) are read where
  // they lie, no window laid out. Null: A packed or in place.
  const float* const* a_rows = nullptr;
  const float* b = nullptr;
  // The next B panel's kc x NR slice, or null: a kernel that streams its own slice from memory
  // (the first row tile of a panel) asks for this one into L2 meanwhile (the f32 AVX-512 one).
  const float* b_next = nullptr;
  float* c = nullptr;
  size_t c_stride = 0;
  // Float C by row, f32_gemm_14x32_avx512 with a_rows only: row r at c_rows[r], c and c_stride
  // unused. A conv
  // that adds up one tap at a time for scattered outputs (kernels/conv_rows.cpp) adds to their
  // rows where they lie. Null: C at c.
  float* const* c_rows = nullptr;
  size_t m = 0;             // valid rows, 1..MR
  size_t n = 0;             // valid columns, 1..NR
  bool accumulate = false;  // add the products to C instead of overwriting it
  bool finish = false;      // last k block: apply bias, residual and activation
  const float* bias = nullptr;      // already offset to this tile's first column
  const float* row_bias = nullptr;  // already offset to this tile's first row
  const float* residual = nullptr;  // already offset to this tile's first element
  size_t residual_stride = 0;
  ActivationParams activation;
  // bfloat16 storage (the AMX and AVX512-BF16 kernels; residual_bf16 AMX only): on the last k block the finished tile goes to
  // c_bf16 (row stride c_bf16_stride) instead of c, and the residual is read from
  // residual_bf16 (row stride residual_stride). c then holds only the float partial sums of
  // the earlier k blocks (read when accumulate is set).
  uint16_t* c_bf16 = nullptr;
  size_t c_bf16_stride = 0;
  const uint16_t* residual_bf16 = nullptr;
};

using GemmMicrokernel = void (*)(const GemmTileArgs& args);

// XNNPACK-style names: f32_gemm_<MR>x<NR>_<isa>.
void f32_gemm_scalar(const GemmTileArgs& args);            // 4 x 8
void f32_gemm_6x16_avx2(const GemmTileArgs& args);
void f32_gemm_14x32_avx512(const GemmTileArgs& args);
// The first 16 columns of a 32-column panel (n <= 16), A in place only (a_stride set), m up to 28.
void f32_gemm_28x16_avx512(const GemmTileArgs& args);
// A whole product of at most kFewRows rows (GemmCall::few_rows), panel by panel.
struct GemmCall;
struct PackedB;
void f32_gemv_avx512(const GemmCall& call, const PackedB& b);
// The same on int8 weights (Precision::int8_weights): each column's sum scaled once at the end.
void i8w_gemv_avx512(const GemmCall& call, const PackedB& b);
// The same on B packed bf16, A as rows of bf16 pair words (a_stride words apart).
void bf16_gemv_avx512bf16(const GemmCall& call, const PackedB& b, const uint32_t* a, size_t a_stride);
// bf16 operands (kernels/bf16.h): a and b point at pair words, kc still counts k steps.
void bf16_gemm_14x32_avx512bf16(const GemmTileArgs& args);
// AMX tiles (kernels/amx.h gives the operand layouts); needs amx_begin() on the thread first.
void bf16_gemm_32x32_amx(const GemmTileArgs& args);

}  // namespace grove::kernels
