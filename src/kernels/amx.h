#pragma once
// The AMX-BF16 GEMM (bf16_gemm_amx.cpp): what the driver in gemm.cpp needs to pack for it
// and run it. Precision::bf16_amx in kernels/gemm.h selects it.
//
// Packed A for this kernel: per 32 k steps, the 32 rows of a tile one after another, each
// as 16 pair words (kernels/bf16.h), zero past the valid rows and past k. So the k block
// [p, p + kc) of a tile starts p / 2 * 32 words in, as with the other bf16 layout.
// Packed B: the bf16 panels with their pair rows padded with zeros to a multiple of 16.
#include <cstddef>
#include <cstdint>

#include "kernels/gemm_microkernel.h"

namespace grove::kernels {

inline constexpr size_t kAmxAStepWords = 32 * 16;  // one 32-step of a 32-row tile of A
inline constexpr size_t kAmxAStepBytes = kAmxAStepWords * sizeof(uint32_t);

// Loads the tile configuration the kernel uses on the calling thread; amx_end releases the
// tile state. The driver brackets each gemm() call with them.
void amx_begin();
void amx_end();

// One 32-row tile of A from `rows` <= 32 rows of row-major A (row stride `stride`) over kc steps.
void bf16_pack_a_amx(const float* a, size_t stride, size_t rows, size_t kc, uint32_t* out);
// One row of A (kc floats) into row r < 32 of such a tile, every 32-step of it; the other rows
// are left as they are. For a caller that builds A a row at a time (a conv's windows).
void bf16_pack_a_amx_row(const float* row, size_t kc, size_t r, uint32_t* tile);
// The same two from bfloat16 rows: copies, no rounding.
void bf16_pack_a_amx_from_bf16(const uint16_t* a, size_t stride, size_t rows, size_t kc, uint32_t* out);
void bf16_pack_a_amx_row_from_bf16(const uint16_t* row, size_t kc, size_t r, uint32_t* tile);
// `chunks` runs of 32 k steps of one row of such a tile, from 32 x chunks contiguous values:
// chunk c goes to dst + c * kAmxAStepWords (the same row, 32 steps on). A null source writes
// zeros. For a conv whose taps are whole chunks (channels a multiple of 32): each tap's run of
// channels goes straight into the tile, with no window row laid out first.
void bf16_chunks_to_amx_a(const float* src, size_t chunks, uint32_t* dst);
void bf16_chunks_to_amx_a(const uint16_t* src, size_t chunks, uint32_t* dst);
// The same from A stored transposed (kc rows of at least `rows` floats).
void bf16_pack_a_amx_transposed(const float* a_t, size_t stride, size_t rows, size_t kc, uint32_t* out);

}  // namespace grove::kernels
