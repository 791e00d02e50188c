// The 8-bit GEMM of QLinearMatMul and QLinearConvNhwc (qgemm.h u8s8_gemm_requantize) on the
// AMX tile unit: one tdpbusd multiplies a 16 x 64 uint8 block of X by a 64 x 16 int8 block of
// W (k in quads) into a 16 x 16 int32 block. W's panels are already in the tile's B layout:
// 16 quads of a panel are 16 rows of 64 bytes. Four C tiles hold 32 rows x 2 panels; per 64 k
// steps two X tiles and two W tiles are loaded and four products issued.
//
// X is read in place where the tile loads stay inside its valid bytes, else copied into rows
// padded with zeros to whole 64-byte steps (the caller's rows hold only the quads W has); the
// last, partial 16-quad group of each W panel is copied into a zero-padded block. So one tile
// configuration serves every shape. The int32 sums leave the
// tiles through a block on the stack and go through the VNNI kernel's requantizing epilogue
// (u8s8_requantize_block_avx512vnni), so the bytes are the same as there.
//
// Compiled with the AMX flags (kernels.cmake); called only where isa_supports_amx_int8().
#include <immintrin.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include "kernels/aligned_buffer.h"
#include "kernels/amx.h"
#include "kernels/qgemm.h"

namespace grove::kernels {

namespace {

constexpr size_t kWidth = U8Panels::kWidth;
constexpr size_t kStepBytes = 64;                  // k steps per tile product
constexpr size_t kGroupQuads = kStepBytes / 4;     // W quads per tile
constexpr size_t kGroupBytes = kGroupQuads * kWidth * 4;  // one W tile
constexpr size_t kBlockRows = 32;

uint8_t* bytes(AlignedFloats& buffer, size_t count) {
  buffer.reserve((count + 3) / 4 + 16);
  return reinterpret_cast<uint8_t*>(buffer.data());
}

}  // namespace

void u8s8_gemm_requantize_amx(const uint8_t* x, size_t rows, size_t x_stride, const U8Panels& w,
                              const ColumnRequantize& r) {
  U8GemmScratch own;
  U8GemmScratch& scratch = r.scratch ? *r.scratch : own;
  const size_t end_col = std::min(r.col_end, w.n), first = r.col_begin / kWidth;
  const size_t panels = (end_col + kWidth - 1) / kWidth;
  const size_t groups = (w.quads + kGroupQuads - 1) / kGroupQuads, full_groups = w.quads / kGroupQuads;
  const size_t row_bytes = groups * kStepBytes, x_bytes = w.quads * 4;
  bool nan_requantize = false;
  for (size_t j = r.col_begin; j < end_col; ++j) nan_requantize |= !std::isfinite(r.multiplier[j]);
  const bool nan_add = r.residual && qadd_may_be_nan(r.residual_add);

  // X in place for a block of 32 rows whose tile loads (row_bytes from each row's start) end
  // inside the valid bytes: the bytes read past a row's quads meet W's zero padding, and an
  // integer times zero is zero. The other blocks (the last, short ones) are copied, every
  // row padded to row_bytes and rows past `rows` zero.
  const size_t blocks = (rows + kBlockRows - 1) / kBlockRows, x_end = (rows - 1) * x_stride + x_bytes;
  auto in_place = [&](size_t b) {
    const size_t last = b * kBlockRows + kBlockRows - 1;
    return last < rows && last * x_stride + row_bytes <= x_end;
  };
  size_t copied = 0;
  for (size_t b = 0; b < blocks; ++b) copied += in_place(b) ? 0 : 1;
  uint8_t* xp = copied ? bytes(scratch.x, copied * kBlockRows * row_bytes) : nullptr;
  std::vector<const uint8_t*>& block_x = scratch.block_x;
  std::vector<size_t>& block_stride = scratch.block_stride;
  block_x.resize(blocks);
  block_stride.resize(blocks);
  for (size_t b = 0, c = 0; b < blocks; ++b) {
    if (in_place(b)) {
      block_x[b] = x + b * kBlockRows * x_stride, block_stride[b] = x_stride;
      continue;
    }
    uint8_t* dst = xp + c++ * kBlockRows * row_bytes;
    const size_t t0 = b * kBlockRows, count = std::min(kBlockRows, rows - t0);
    for (size_t t = 0; t < count; ++t) {
      std::memcpy(dst + t * row_bytes, x + (t0 + t) * x_stride, x_bytes);
      std::memset(dst + t * row_bytes + x_bytes, 0, row_bytes - x_bytes);
    }
    std::memset(dst + count * row_bytes, 0, (kBlockRows - count) * row_bytes);
    block_x[b] = dst, block_stride[b] = row_bytes;
  }
  // W: each panel's partial last group, padded with zero quads.
  const size_t tail_quads = w.quads - full_groups * kGroupQuads;
  uint8_t* tails = tail_quads ? bytes(scratch.tails, (panels - first) * kGroupBytes) : nullptr;
  for (size_t q = first; tails && q < panels; ++q) {
    uint8_t* dst = tails + (q - first) * kGroupBytes;
    std::memcpy(dst, w.values.data() + q * w.panel_bytes() + full_groups * kGroupBytes, tail_quads * kWidth * 4);
    std::memset(dst + tail_quads * kWidth * 4, 0, kGroupBytes - tail_quads * kWidth * 4);
  }
  auto w_group = [&](size_t q, size_t g) -> const uint8_t* {
    return g < full_groups ? w.values.data() + q * w.panel_bytes() + g * kGroupBytes : tails + (q - first) * kGroupBytes;
  };

  amx_begin();
  alignas(64) int32_t sums[kBlockRows][2 * kWidth];
  auto run = [&](size_t q0, size_t b) {
    const size_t count = std::min<size_t>(2, panels - q0), t0 = b * kBlockRows;
    const uint8_t* a = block_x[b];
    const size_t a_stride = block_stride[b];
    _tile_zero(0);
    _tile_zero(1);
    _tile_zero(2);
    _tile_zero(3);
    for (size_t g = 0; g < groups; ++g) {
      _tile_loadd(4, a + g * kStepBytes, a_stride);
      _tile_loadd(5, a + 16 * a_stride + g * kStepBytes, a_stride);
      _tile_loadd(6, w_group(q0, g), kWidth * 4);
      _tile_dpbusd(0, 4, 6);
      _tile_dpbusd(2, 5, 6);
      if (count == 2) {
        _tile_loadd(7, w_group(q0 + 1, g), kWidth * 4);
        _tile_dpbusd(1, 4, 7);
        _tile_dpbusd(3, 5, 7);
      }
    }
    _tile_stored(0, &sums[0][0], sizeof sums[0]);
    _tile_stored(1, &sums[0][kWidth], sizeof sums[0]);
    _tile_stored(2, &sums[16][0], sizeof sums[0]);
    _tile_stored(3, &sums[16][kWidth], sizeof sums[0]);
    const size_t cols_last = std::min(kWidth, end_col - (q0 + count - 1) * kWidth);
    const size_t col_offset = (q0 - first) * kWidth;
    u8s8_requantize_block_avx512vnni(
        &sums[0][0], 2 * kWidth, std::min(kBlockRows, rows - t0), count, cols_last, r, q0 * kWidth,
        static_cast<uint8_t*>(r.y) + t0 * r.y_stride + col_offset,
        r.residual ? static_cast<const uint8_t*>(r.residual) + t0 * r.residual_stride + col_offset : nullptr,
        nan_requantize, nan_add);
  };
  // As the VNNI kernel: the larger operand walked once in the outer loop.
  if (rows > (panels - first) * kWidth) {
    for (size_t b = 0; b < blocks; ++b)
      for (size_t q0 = first; q0 < panels; q0 += 2) run(q0, b);
  } else {
    for (size_t q0 = first; q0 < panels; q0 += 2)
      for (size_t b = 0; b < blocks; ++b) run(q0, b);
  }
  amx_end();
}

}  // namespace grove::kernels
