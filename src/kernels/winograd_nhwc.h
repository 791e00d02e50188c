#pragma once
// What the two channels-last Winograd forms share: F(4x4, 3x3) (winograd_f4x3_nhwc.h) and
// F(2x2, 3x3) (winograd_f2x3_nhwc.h). Both cut the output plane into square blocks on a grid
// anchored at output (0, 0), transform each block's input patch (block + 2 pixels a side)
// across channels, run one GEMM per position t of the transformed tile
//   M_t[blocks x Cout] = V_t[blocks x Cin] . U_t[Cin x Cout]
// and transform back with the fused epilogue. F(2x2, 3x3) does 16 GEMMs of four times the
// rows where F(4x4, 3x3) does 36: more products per output, but on a small plane its GEMMs
// get rows enough to fill a register tile (docs/tuning.md).
#include <cstddef>
#include <cstdint>
#include <vector>

#include "kernels/epilogue.h"
#include "kernels/gemm.h"
#include "kernels/im2col.h"

namespace grove::kernels {

// Per-worker working memory, reused across calls.
struct WinogradNhwcScratch {
  AlignedFloats v;      // positions x blocks x Cin: the transformed input of one chunk of blocks
  AlignedFloats m;      // positions x blocks x channels: the GEMMs' results
  AlignedFloats zeros;  // Cin zeros: the padding pixels of a patch
  GemmScratch gemm;
  std::vector<uint32_t> pruned;  // the input channels not in WinogradNhwcCall::kept_channels
  std::vector<uint32_t> blocks;  // the call's blocks that compute an output (WinogradNhwcCall::computed)
};

// One image: output rows [row_begin, row_end), full width, output channels [oc_begin, oc_end)
// with oc_begin a multiple of the weights' panel width. x points at the image's pixel (0, 0),
// y and epilogue.residual (shaped like y) at the output's. epilogue.bias[oc] is indexed by
// output channel; row_bias is not used. y's pixels are y_stride floats apart (0: Cout), so y
// may be a slice of a wider channels-last tensor; the residual's are Cout apart.
struct WinogradNhwcCall {
  const float* x = nullptr;
  float* y = nullptr;
  size_t y_stride = 0;
  size_t oc_begin = 0, oc_end = 0;
  size_t row_begin = 0, row_end = 0;
  Conv2dShape shape;  // channels = Cin; kernel 3x3, stride 1, dilation 1
  Epilogue epilogue;
  // The input channels to add up (increasing, each < Cin), or null for all: the conv of x with
  // every other channel taken as 0, their values never used (a pruned conv: Antidote). The
  // GEMMs skip the others' steps where gemm_takes_k_steps; elsewhere their transformed values
  // are zeroed before the GEMMs (the transform is linear per channel).
  const uint32_t* kept_channels = nullptr;
  size_t kept = 0;
  // The input positions to read, one byte per pixel of x's plane (0: taken as 0, never read),
  // or null for all: a pruned conv's masked map without the masked copy.
  const unsigned char* kept_positions = nullptr;
  // The outputs to compute, one byte per pixel of y's plane, or null for all. The others are
  // written 0 (no epilogue); a block with none of the call's outputs to compute is skipped
  // whole (its transforms and its rows of the GEMMs), which is where a pruned conv whose kept
  // positions come in whole blocks (Antidote's block=) saves Winograd's work.
  const unsigned char* computed = nullptr;
};

// The transforms across channels, one build per ISA and form. With a = block + 2:
// Input: patch[r * a + c] points at the `channels` floats of patch pixel (r, c) (a run of
// zeros for padding); writes (B^T d B)_t of every channel to out[t][0 .. channels), t < a * a.
using WinogradNhwcInputTransform = void (*)(const float* const* patch, size_t channels, float* const* out);
// Output: m[t] points at the `channels` floats of position t; output pixel i = r * block + c of
// the block, act((A^T m A)_(r, c) + bias + residual[i]), goes to out[i] unless out[i] is null.
// bias and residual (the whole array, or an entry) may be null.
using WinogradNhwcOutputTransform = void (*)(const float* const* m, size_t channels, const float* bias,
                                             const float* const* residual, const ActivationParams& activation,
                                             float* const* out);

// One form as the shared driver sees it.
struct WinogradNhwcForm {
  const char* name;  // for errors: "winograd_f4x3_nhwc_conv"
  size_t block;      // output rows and columns per block (4 or 2)
  WinogradNhwcInputTransform input;
  WinogradNhwcOutputTransform output;
};

// The driver (winograd_nhwc.cpp): u holds the (block + 2)^2 packed U_t. Throws grove::Error
// on a bad call.
void winograd_nhwc_conv(const WinogradNhwcForm& form, const WinogradNhwcCall& call, const PackedB* u, size_t cout,
                        size_t cin, Isa isa, WinogradNhwcScratch& scratch);

}  // namespace grove::kernels
