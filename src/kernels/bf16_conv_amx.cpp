// Implicit-GEMM convolution on the AMX tile unit (kernels/amx.h AmxConvBlock): the GEMM of
// bf16_gemm_32x32_amx without packed A. For a stride-1 conv whose x has a padded copy with
// rows of (output row + kw - 1) pixels, the windows of 16 consecutive outputs of one tap are
// 16 consecutive pixels of x, one tile load with the pixel stride: no window is copied. Output
// positions in a row's last kw - 1 pixels are computed too and not stored by the caller.
//
// Compiled with the AMX flags (kernels.cmake); called only where isa_supports_amx().
#include <immintrin.h>

#include "kernels/amx.h"

namespace grove::kernels {

namespace {

constexpr size_t kStepK = 32;          // k per tile product: 32 channels of one tap
constexpr size_t kBStepBytes = 2048;   // one 32-step of a 32-column B panel: 16 pair rows of 128 bytes
constexpr size_t kBPrefetchSteps = 2;  // as the GEMM kernel: B fetched a few steps ahead

}  // namespace

void bf16_conv_32x32_amx(const AmxConvBlock& args, float* block) {
  const size_t chunks = args.channels / kStepK, stride = args.channels * sizeof(uint16_t);
  const auto* b = reinterpret_cast<const char*>(args.b);
  _tile_zero(0);
  _tile_zero(1);
  _tile_zero(2);
  _tile_zero(3);
  for (size_t tap = 0, s = 0; tap < args.taps; ++tap) {
    const uint16_t* rows = args.x + (static_cast<int64_t>(args.q0) + args.tap_offsets[tap]) * int64_t(args.channels);
    for (size_t c = 0; c < chunks; ++c, ++s) {
      const char* bs = b + s * kBStepBytes;
      const char* ahead = bs + kBPrefetchSteps * kBStepBytes;
      for (size_t line = 0; line < kBStepBytes; line += 64) _mm_prefetch(ahead + line, _MM_HINT_T0);
      const uint16_t* a = rows + c * kStepK;
      _tile_loadd(4, a, stride);
      _tile_loadd(6, bs, 128);
      _tile_loadd(7, bs + 64, 128);
      _tile_dpbf16ps(0, 4, 6);
      _tile_dpbf16ps(1, 4, 7);
      _tile_loadd(5, a + 16 * args.channels, stride);
      _tile_dpbf16ps(2, 5, 6);
      _tile_dpbf16ps(3, 5, 7);
    }
  }
  _tile_stored(0, block, 128);
  _tile_stored(1, block + 16, 128);
  _tile_stored(2, block + 16 * 32, 128);
  _tile_stored(3, block + 16 * 32 + 16, 128);
}

}  // namespace grove::kernels
