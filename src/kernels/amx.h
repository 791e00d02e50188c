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
// Rows [0, t.m) of a float block (32 floats a row, as a kernel leaves its C tiles) through
// the epilogue into C, float or bf16 as t says (t.finish set, t.accumulate not): for a caller
// whose rows of C are not one stride apart (bf16_conv_32x32_amx's output rows).
void amx_finish_rows(const float* block, const GemmTileArgs& t);
// dst[i] = bf16(src[i]) for i < count, rounded as the packing rounds.
void bf16_round_run(const float* src, size_t count, uint16_t* dst);

// Implicit-GEMM convolution block (bf16_conv_amx.cpp): a stride-1 conv's x laid out once as
// `pixels` bf16 pixels of `channels` (a multiple of 32) each, its rows padded to the output
// row plus kw - 1 pixels, so the window of output pixel q starts at pixel q and tap t adds
// tap_offsets[t] pixels. Rows q0..q0 + 31 of C (32 columns of B's panel, in the GEMM's
// (tap, channel) k order) are the products over every tap; each A tile is read straight from
// x with the pixel stride, with no window laid out. Pixels q0 + 31 + the last offset must
// lie in x. Leaves the 32 x 32 float block in `block` (64-byte aligned).
struct AmxConvBlock {
  const uint16_t* x = nullptr;
  size_t channels = 0;
  const int64_t* tap_offsets = nullptr;
  size_t taps = 0;
  size_t q0 = 0;
  const float* b = nullptr;  // the panel of PackedB (bf16_amx) of these 32 columns
};
void bf16_conv_32x32_amx(const AmxConvBlock& args, float* block);

// The same from A stored transposed (kc rows of at least `rows` floats).
void bf16_pack_a_amx_transposed(const float* a_t, size_t stride, size_t rows, size_t kc, uint32_t* out);

}  // namespace grove::kernels
