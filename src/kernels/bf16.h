#pragma once
// bfloat16 for the GEMM kernels: the upper 16 bits of a float, rounded to nearest even.
// The packed operands of a bf16 GEMM hold k in pairs: one 32-bit word per (row, k pair),
// element 2p in the low half and 2p + 1 in the high half, which is the operand layout of
// vdpbf16ps (two products summed into each float lane).
#include <cstdint>
#include <cstring>

namespace grove::kernels {

// As vcvtneps2bf16 does it, so scalar and vector packing give the same bits: round to
// nearest even, denormals to signed zero, NaN stays a (quiet) NaN.
inline uint16_t bf16_bits(float value) {
  uint32_t u;
  std::memcpy(&u, &value, sizeof u);
  if ((u & 0x7F800000u) == 0) return static_cast<uint16_t>((u >> 16) & 0x8000u);
  if ((u & 0x7FFFFFFFu) > 0x7F800000u) return static_cast<uint16_t>((u >> 16) | 0x40u);
  u += 0x7FFFu + ((u >> 16) & 1u);
  return static_cast<uint16_t>(u >> 16);
}

inline float bf16_value(uint16_t bits) {
  const uint32_t u = uint32_t(bits) << 16;
  float f;
  std::memcpy(&f, &u, sizeof f);
  return f;
}

inline uint32_t bf16_pair(float low, float high) { return uint32_t(bf16_bits(low)) | uint32_t(bf16_bits(high)) << 16; }

// Packing into that layout with AVX512-BF16 conversions (bf16_gemm_avx512bf16.cpp); only
// called where isa_supports_bf16() holds.
//
// One micro-panel of A from `rows` rows of row-major A (row stride `stride`) over kc steps:
// (kc + 1) / 2 groups of mr words, rows past `rows` zero, the last pair's high half zero
// when kc is odd.
void bf16_pack_a_tile_avx512bf16(const float* a, size_t stride, size_t rows, size_t kc, size_t mr, uint32_t* out);
// `rows` rows of kc floats (row stride `stride`) as rows of (kc + 1) / 2 pair words, row r at
// out + r * out_stride: A for the kernel's in-place read (GemmTileArgs::a_stride).
void bf16_round_rows_avx512bf16(const float* a, size_t stride, size_t rows, size_t kc, uint32_t* out, size_t out_stride);
// out[i] = pair(row0[i], row1[i]) for i < count; row1 null means zeros (an odd k's last pair).
void bf16_interleave_rows_avx512bf16(const float* row0, const float* row1, size_t count, uint32_t* out);

}  // namespace grove::kernels
