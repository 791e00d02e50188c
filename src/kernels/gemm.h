#pragma once
// Tile-level single-precision GEMM: C[m x n] (+)= A[m x k] . B[k x n], then a fused
// epilogue (bias, residual add, activation) applied while C is in registers.
//
// - A is row-major with a row stride: a block of channels-last activations (pixels x
//   channels) read in place from a larger tensor.
// - B is a weight matrix packed once, at load, into the microkernel's panel order.
// - C has a row stride, so a tile writes straight into its place in the output tensor.
//
// Usage:
//   PackedB w = pack_b(weights, k, n, n, BLayout::k_by_n);   // once
//   GemmScratch scratch;                                      // one per worker thread
//   gemm({.m = rows, .a = x, .a_stride = k, .n0 = 0, .n = n, .c = y, .c_stride = n,
//         .epilogue = {.bias = b, .activation = {Activation::relu}}}, w, scratch);
#include <cstddef>
#include <cstdint>
#include <vector>

#include "kernels/aligned_buffer.h"
#include "kernels/epilogue.h"
#include "kernels/isa.h"

namespace grove::kernels {

// The element type of the packed operands and the unit that multiplies them. C, the
// epilogue and accumulation are float in all; bf16 rounds A and B to bfloat16 when packing
// (kernels/bf16.h gives the layout) and runs on AVX512-BF16 dot products, twice the
// multiplies per instruction; bf16_amx rounds the same way and runs on the AMX tile unit
// (kernels/amx.h), with its own operand padding. int8_weights stores B as int8 with one
// scale per column (symmetric, the column's largest magnitude maps to 127): a quarter of
// f32's bytes for a product bound by reading its weights (a decode step); A, C and the sums
// stay float. The few-rows kernel multiplies the int8 values as they stream and scales each
// column's sum once; other calls turn the panels back into floats and run the f32 kernel.
enum class Precision { f32, bf16, bf16_amx, int8_weights };

inline bool is_bf16(Precision p) { return p == Precision::bf16 || p == Precision::bf16_amx; }

// Packed rows for k steps, in float-sized slots per column: k for f32; k in pairs for bf16,
// padded to whole 16-pair tiles for AMX; k bytes (rounded up to whole slots) for int8 weights.
inline size_t packed_steps(Precision p, size_t k) {
  switch (p) {
    case Precision::f32: return k;
    case Precision::bf16: return (k + 1) / 2;
    case Precision::bf16_amx: return (k + 31) / 32 * 16;
    case Precision::int8_weights: return (k + 3) / 4;
  }
  return k;
}

// True when gemm() can run packed operands of `precision` for `isa` here.
bool precision_supported(Precision precision, Isa isa);

// How the unpacked B is stored: k rows of n (MatMul's B), or n rows of k (Gemm with
// transB, and Conv weights [Cout][Cin*kh*kw]).
enum class BLayout { k_by_n, n_by_k };

// B cut into panels of nr columns; panel j holds its k rows of nr floats back to back, the
// last panel zero-padded. A k-block [p, p + kc) of a panel is therefore contiguous.
// With bf16, a panel holds packed_steps() rows of nr pair words instead (kernels/bf16.h).
struct PackedB {
  size_t k = 0;
  size_t n = 0;
  size_t nr = 0;  // panel width: the microkernel's NR for `isa`
  Isa isa = Isa::scalar;
  Precision precision = Precision::f32;
  AlignedFloats panels;  // bf16: 32-bit pair words in float-sized slots; int8_weights: k rows of nr bytes
  AlignedFloats scales;  // int8_weights: one per column, nr per panel (0 past n)

  size_t bytes() const { return (panels.size() + scales.size()) * sizeof(float); }
  // Packed rows per panel: k, or k pairs for bf16.
  size_t steps() const { return packed_steps(precision, k); }
  const float* panel(size_t index) const { return panels.data() + index * steps() * nr; }
};

// Packs for `isa`'s microkernel. Throws grove::Error if `isa` is not supported here or
// the stride is smaller than a row.
PackedB pack_b(const float* b, size_t k, size_t n, size_t row_stride, BLayout layout,
               Isa isa = active_isa(), Precision precision = Precision::f32);

// Packs into `out`, reusing its buffer (no allocation once it is big enough): for a B that
// changes every call, e.g. an activation operand of a batched MatMul, packed per tile.
void pack_b_into(PackedB& out, const float* b, size_t k, size_t n, size_t row_stride, BLayout layout,
                 Isa isa = active_isa(), Precision precision = Precision::f32);

// The f32 panels of `in` (e.g. written by pack_im2col) rounded into bf16 panels in `out`
// for the kernel of `to` (bf16 or bf16_amx), reusing its buffer.
void convert_to_bf16(const PackedB& in, PackedB& out, Precision to = Precision::bf16);

// For a caller that builds bf16 B a block at a time (im2col.h pack_im2col_bf16): sizes `out`
// for a k x n B of precision `to` (bf16 or bf16_amx) on `isa`, reusing its buffer, and rounds
// `cols` <= out.nr columns of k f32 rows (row stride `row_stride`) into panel j of it, the
// panel's other columns and padding pair rows zero.
void shape_packed_b_bf16(PackedB& out, size_t k, size_t n, Isa isa, Precision to);
void round_panel_to_bf16(const float* rows, size_t row_stride, size_t cols, PackedB& out, size_t j);

// Sizes `out` for a k x n B on `isa` (reusing its buffer) for a caller that writes the
// panels itself (im2col.h); the padding columns of the last panel are set to 0.
void shape_packed_b(PackedB& out, size_t k, size_t n, Isa isa);

// A packed once, for a weight matrix used as A (NCHW Conv: W[Cout][Cin*kh*kw]): tiles of mr
// rows from row 0, tile t holding its k steps of mr floats back to back (rows past m are 0),
// so the slice [p, p + kc) of a tile is contiguous. A GEMM on prepacked A skips the per-call
// packing, which otherwise re-reads the weights for every output tile.
struct PackedA {
  size_t m = 0;
  size_t k = 0;
  size_t mr = 0;  // the microkernel's MR for `isa`
  Isa isa = Isa::scalar;
  Precision precision = Precision::f32;
  AlignedFloats tiles;

  size_t bytes() const { return tiles.size() * sizeof(float); }
  size_t steps() const { return packed_steps(precision, k); }
  const float* tile(size_t index) const { return tiles.data() + index * steps() * mr; }
};

PackedA pack_a(const float* a, size_t m, size_t k, size_t row_stride, Isa isa = active_isa(),
               Precision precision = Precision::f32);

// Per-thread working memory (the packed block of A). Reused across calls: keep one per
// worker so the hot path never allocates.
struct GemmScratch {
  AlignedFloats a_block;
  AlignedFloats c_block;  // float partial sums of a bf16 C whose k spans several blocks
  PackedB dequantized;     // int8 weights turned back into f32 panels for the tile kernel
  std::vector<uint32_t> k_steps_block;  // GemmCall::k_steps of one k block, counted from its first step
};

// The most rows a GemmCall::few_rows product may have.
inline constexpr size_t kFewRows = 4;

struct GemmCall {
  size_t m = 0;
  const float* a = nullptr;  // m rows of b.k floats (a_by_k) or b.k rows of m floats (k_by_m)
  size_t a_stride = 0;
  // A given transposed: a[p * a_stride + i] is A[i][p]. The packing then copies runs of
  // rows, and a caller holding A^T (NCHW activations as the m side) skips a transpose.
  bool a_transposed = false;
  size_t n0 = 0;  // first column of packed B to use; a multiple of b.nr
  size_t n = 0;   // columns to compute, n0 + n <= b.n
  float* c = nullptr;  // m rows of n floats
  size_t c_stride = 0;
  bool accumulate = false;  // C += A.B before the epilogue, instead of C = A.B
  Epilogue epilogue;        // bias[j] is for column n0 + j; residual is m x n like C
  // The whole product (not only this call) has at most kFewRows rows: a decode step's GEMV,
  // bound by memory. f32 on AVX-512 then runs each panel's whole k in interleaved chains
  // (f32_gemv_avx512.cpp) instead of k blocks on the tile kernel; a caller sets it from the
  // op's row count, never a tile's, so every grid sums each element the same way.
  bool few_rows = false;
  // bfloat16 activations (B packed bf16 or bf16_amx): A read from a_bf16 (row-major, a_stride
  // elements per row) instead of a, and C written to c_bf16 (c_stride) instead of c, rounded
  // once after the epilogue. The sums stay float: a k longer than one k block adds up in
  // GemmScratch::c_block. Not with accumulate or a_transposed; on AVX512-BF16 dot products
  // (bf16) a_bf16 needs an even k and a_stride, and the residual stays float.
  const uint16_t* a_bf16 = nullptr;
  uint16_t* c_bf16 = nullptr;
  // The product over only these steps of k (increasing, each < b.k): A's other columns are
  // never read and B's rows for them are skipped. Float32 where gemm_takes_k_steps says so
  // (the kernel reads A in place), not with a_transposed, bf16 or prepacked A. A conv of a map
  // whose channels are pruned so adds up the kept ones only (a pruned Winograd conv's GEMMs).
  // Null: every step.
  const uint32_t* k_steps = nullptr;
  size_t k_step_count = 0;
};

// Whether gemm() takes GemmCall::k_steps on weights packed for this ISA and precision.
bool gemm_takes_k_steps(Isa isa, Precision precision = Precision::f32);

// Runs on the ISA and precision B was packed for (A is rounded to bf16 as it is packed when
// B is bf16). Throws grove::Error on inconsistent arguments.
void gemm(const GemmCall& call, const PackedB& b, GemmScratch& scratch);

// The same product with A taken from `a` (call.a is ignored): rows [row0, row0 + call.m) of
// the packed matrix, row0 a multiple of a.mr. Each element of C is computed exactly as by
// gemm() (same k blocks, same kernel), so callers may mix the two freely: e.g. gemm() for the
// first rows of a range that does not start on a tile boundary.
// `scratch` holds the float partial sums when C is bf16 and k spans several k blocks; it may
// be null otherwise.
void gemm(const GemmCall& call, const PackedA& a, size_t row0, const PackedB& b, GemmScratch* scratch = nullptr);

// The blocking the driver uses for an ISA (documented in docs/kernels.md).
struct GemmBlocking {
  size_t mr, nr;  // microkernel tile
  size_t kc;      // k block: a B micro-panel (kc x nr) stays in L1 across a column of tiles
  size_t mc;      // m block: the packed A block (mc x kc) stays in L2
  const char* kernel_name;
};
GemmBlocking gemm_blocking(Isa isa, Precision precision = Precision::f32);

}  // namespace grove::kernels
