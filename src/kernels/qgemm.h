#pragma once
// The 8-bit GEMM of quantized convolutions on VNNI CPUs:
//   C[i][j] = sum_p A[i][p] * B[p][j]   in int32,
// A int8 (weights, packed once at plan time), B uint8 (activations laid out as panels).
// vpdpbusd multiplies 4 u8 x s8 pairs and adds them to an int32 lane in one instruction
// (no intermediate saturation), four times the products of vpdpwssd on int16 operands.
// Zero points are not applied here: with A symmetric (zero point 0) and B's zero point zb,
// sum_p A[i][p] * (B[p][j] - zb) = C[i][j] - zb * row_sum[i], which callers subtract. An
// int8 B is stored XOR 0x80 (B + 128 as uint8) with zb + 128, the same products.
#include <cstddef>
#include <cstdint>
#include <vector>

#include "kernels/aligned_buffer.h"
#include "kernels/isa.h"
#include "kernels/qadd.h"

namespace grove::kernels {

// B in panels of 16 columns: in panel q, k steps 4t..4t+3 of column c are the 4 bytes at
// ((q * quads + t) * 16 + c) * 4. Steps past k and columns past n hold 0.
struct U8Panels {
  static constexpr size_t kWidth = 16;
  size_t k = 0, n = 0, quads = 0;
  std::vector<uint8_t> values;

  size_t panel_bytes() const { return quads * kWidth * 4; }
};

// Packs a k x n byte matrix (row p at rows + p * row_stride) into panels, XOR-ing every
// byte with `flip` (0x80 turns int8 into the uint8 the kernel reads, 0 keeps uint8).
void pack_u8_panels(const uint8_t* rows, size_t row_stride, size_t k, size_t n, uint8_t flip, U8Panels& out);

// A in blocks of up to kRows rows: block b (rows b * kRows ...) holds, for each quad t, the
// 4 bytes of k steps 4t..4t+3 of each of its rows, row after row. Steps past k hold 0.
struct PackedS8 {
  static constexpr size_t kRows = 14;
  size_t m = 0, k = 0, quads = 0;
  std::vector<int8_t> values;
  std::vector<int32_t> row_sums;  // sum_p A[i][p]

  const int8_t* block(size_t b) const { return values.data() + b * kRows * quads * 4; }
};

// A is m rows of k int8 at a + i * a_stride.
void pack_s8(const int8_t* a, size_t m, size_t k, size_t a_stride, PackedS8& out);

// Rows [begin, end) of A; begin a multiple of PackedS8::kRows (a block's first row).
struct RowRange {
  size_t begin = 0, end = 0;
};

// C = A[rows] . B: C row i (at c + i * c_stride, b.n values) is A's row rows.begin + i.
// Throws Error where the CPU lacks AVX512_VNNI and isa is not scalar, or for a bad range.
void s8u8_gemm(const PackedS8& a, RowRange rows, const U8Panels& b, int32_t* c, size_t c_stride,
               Isa isa = active_isa());

// The same with requantization fused into the tile's store (QLinearConv's epilogue): the
// int32 sums never reach memory. For C row i (A row rows.begin + i), each value becomes
//   clamp(round_half_even(float(sum + add[a_row]) * multiplier[a_row]) + zero_point, lo, hi)
// as requantize.h computes it (a NaN product gives the zero point), stored as uint8 (int8 when
// is_signed) at y + i * y_stride. sum + add must not overflow int32 (callers check the bound).
struct S8Requantize {
  const int32_t* add = nullptr;       // per A row: bias minus the zero-point correction
  const float* multiplier = nullptr;  // per A row
  float zero_point = 0, lo = 0, hi = 255;
  bool is_signed = false;
  void* y = nullptr;
  size_t y_stride = 0;
};
void s8u8_gemm_requantize(const PackedS8& a, RowRange rows, const U8Panels& b, const S8Requantize& r,
                          Isa isa = active_isa());

// The other orientation, for QLinearMatMul: Y = X . W with X uint8 rows (activations,
// broadcast 4 bytes at a time) and W int8 in U8Panels' layout (pack_u8_panels on W's bytes
// with flip 0: panels of 16 columns x 4 k steps), requantized per column:
//   y[t][j] = clamp(round_half_even(float(sum + add[j]) * multiplier[j]) + zero_point, lo, hi)
// with add[j] = -x_zero * (column sum of W) typically. X's rows hold `w.quads * 4` bytes (k
// padded with anything: W's padded steps are 0) at x + t * x_stride. Only W's columns
// [col_begin, col_end) are computed (col_begin a multiple of kWidth; col_end past w.n means
// w.n): column j of y row t at y + t * y_stride + (j - col_begin). Same int32 bound.
// The AMX kernel's copies (X's short blocks padded, W's partial last groups), grown and
// reused by whoever owns it: a worker's scratch (ops/tile_scratch.h).
struct U8GemmScratch {
  AlignedFloats x, tails;
  std::vector<const uint8_t*> block_x;  // each 32-row block's first row: in place or copied
  std::vector<size_t> block_stride;
};

struct ColumnRequantize {
  const int32_t* add = nullptr;       // per column of W
  const float* multiplier = nullptr;  // per column of W
  float zero_point = 0, lo = 0, hi = 255;
  bool is_signed = false;
  void* y = nullptr;
  size_t y_stride = 0;
  size_t col_begin = 0, col_end = SIZE_MAX;
  // Optional: a residual QLinearAdd fused after the requantization (kernels/qadd.h). Each
  // requantized value v (as the byte it would be stored as) becomes qadd(v, r), where r is the
  // byte of the same row and column at residual + t * residual_stride + (j - col_begin);
  // `residual_add` has a = v and b = r, and its dtype is y's.
  const void* residual = nullptr;
  size_t residual_stride = 0;
  QAddParams residual_add;
  // Working memory of the AMX kernel; null: the call makes its own.
  U8GemmScratch* scratch = nullptr;
};
// isa avx512 runs on AMX tiles where isa_supports_amx_int8(), else on VNNI.
void u8s8_gemm_requantize(const uint8_t* x, size_t rows, size_t x_stride, const U8Panels& w, const ColumnRequantize& r,
                          Isa isa = active_isa());
void u8s8_gemm_requantize_scalar(const uint8_t* x, size_t rows, size_t x_stride, const U8Panels& w,
                                 const ColumnRequantize& r);
void u8s8_gemm_requantize_avx512vnni(const uint8_t* x, size_t rows, size_t x_stride, const U8Panels& w,
                                     const ColumnRequantize& r);
// The same on the AMX tile unit (tdpbusd, 32 rows x 32 columns per block); isa avx512 picks it
// where isa_supports_amx_int8(). Sums are exact int32 either way, so the bytes are the same.
void u8s8_gemm_requantize_amx(const uint8_t* x, size_t rows, size_t x_stride, const U8Panels& w,
                              const ColumnRequantize& r);
// The same products left as int32 (MatMulInteger on constant int8 weights): W's columns
// [col_begin, col_end) (col_begin a multiple of kWidth; col_end past w.n means w.n), column j
// of row t at c + t * c_stride + (j - col_begin) holding the sum plus add[j] (per column of W:
// -x_zero * its column sum gives sum_p (x - x_zero) * w). Exact while sum + add fits int32.
void u8s8_gemm_int32(const uint8_t* x, size_t rows, size_t x_stride, const U8Panels& w, const int32_t* add,
                     size_t col_begin, size_t col_end, int32_t* c, size_t c_stride, Isa isa = active_isa());
void u8s8_gemm_int32_scalar(const uint8_t* x, size_t rows, size_t x_stride, const U8Panels& w, const int32_t* add,
                            size_t col_begin, size_t col_end, int32_t* c, size_t c_stride);
void u8s8_gemm_int32_avx512vnni(const uint8_t* x, size_t rows, size_t x_stride, const U8Panels& w, const int32_t* add,
                                size_t col_begin, size_t col_end, int32_t* c, size_t c_stride);
// The AVX-512 epilogue of u8s8_gemm_requantize on int32 sums already computed (the AMX
// kernel's C block leaves through it): `rows` rows of `count` (1 or 2) panels of sums, row t
// at sums + t * sums_stride, `cols_last` valid columns in the last panel, W's first column
// `col`, y and residual at the block's first row and column. nan_*: whether the requantize
// and the residual add can make a NaN (u8s8_gemm_requantize_avx512vnni decides the same way).
void u8s8_requantize_block_avx512vnni(const int32_t* sums, size_t sums_stride, size_t rows, size_t count,
                                      size_t cols_last, const ColumnRequantize& r, size_t col, uint8_t* y,
                                      const uint8_t* residual, bool nan_requantize, bool nan_add);

void s8u8_gemm_scalar(const PackedS8& a, RowRange rows, const U8Panels& b, int32_t* c, size_t c_stride);
void s8u8_gemm_avx512vnni(const PackedS8& a, RowRange rows, const U8Panels& b, int32_t* c, size_t c_stride);
void s8u8_gemm_requantize_scalar(const PackedS8& a, RowRange rows, const U8Panels& b, const S8Requantize& r);
void s8u8_gemm_requantize_avx512vnni(const PackedS8& a, RowRange rows, const U8Panels& b, const S8Requantize& r);

}  // namespace grove::kernels
