#pragma once
// Winograd F(4x4, 3x3) on channels-last activations: x [H][W][Cin], y [OH][OW][Cout].
//
// The same blocks and matrices as winograd_f4x3.h, with the roles of the GEMM operands
// swapped: the 4x4 output blocks are the rows, so for each of the 36 positions t
//   M_t[blocks x Cout] = V_t[blocks x Cin] . U_t[Cin x Cout]
// with V_t read in place by the microkernel (a row of V is one block's Cin values) and U_t
// packed once as B. The transforms run across channels, one vector of channels at a time,
// over the 36 pixels of a block's patch: a pixel's channels are contiguous, so there is no
// column shuffle, and the output transform writes each output pixel's channels in place with
// the fused bias, residual and activation.
//
// A channels-last model keeps its Winograd layers in its layout: no Transpose before and after
// them (docs/layout.md).
//
// As on the NCHW path, an output element gets the same operations from its own block whatever
// rows or channels a call covers; a call computes whole blocks and reads their whole patches.
#include <cstddef>

#include "kernels/epilogue.h"
#include "kernels/gemm.h"
#include "kernels/im2col.h"

namespace grove::kernels {

// U_t = (G g G^T)_t for the 36 positions t, each packed as B [Cin x Cout].
struct WinogradF4x3NhwcWeights {
  size_t cout = 0, cin = 0;
  Isa isa = Isa::scalar;
  PackedB u[36];

  size_t bytes() const;
};

// w: [cout][cin][3][3] (ONNX Conv weights of one group). Transformed in double precision.
void winograd_f4x3_nhwc_pack_weights(WinogradF4x3NhwcWeights& out, const float* w, size_t cout, size_t cin,
                                     Isa isa = active_isa());

// Per-worker working memory, reused across calls.
struct WinogradF4x3NhwcScratch {
  AlignedFloats v;      // 36 x blocks x Cin: the transformed input of one chunk of blocks
  AlignedFloats m;      // 36 x blocks x channels: the GEMMs' results
  AlignedFloats zeros;  // Cin zeros: the padding pixels of a patch
  GemmScratch gemm;
};

// One image: output rows [row_begin, row_end), full width, output channels [oc_begin, oc_end)
// with oc_begin a multiple of the weights' panel width. x points at the image's pixel (0, 0),
// y and epilogue.residual (shaped like y) at the output's. epilogue.bias[oc] is indexed by
// output channel; row_bias is not used. y's pixels are y_stride floats apart (0: Cout), so y
// may be a slice of a wider channels-last tensor; the residual's are Cout apart.
struct WinogradF4x3NhwcCall {
  const float* x = nullptr;
  float* y = nullptr;
  size_t y_stride = 0;
  size_t oc_begin = 0, oc_end = 0;
  size_t row_begin = 0, row_end = 0;
  Conv2dShape shape;  // channels = Cin; kernel 3x3, stride 1, dilation 1
  Epilogue epilogue;
};

// Runs on the ISA the weights were packed for. Throws grove::Error on a bad call.
void winograd_f4x3_nhwc_conv(const WinogradF4x3NhwcCall& call, const WinogradF4x3NhwcWeights& weights,
                             WinogradF4x3NhwcScratch& scratch);

// The transforms across channels, one build per ISA (winograd_f4x3_impl.h).
// Input: patch[r * 6 + c] points at the `channels` floats of patch pixel (r, c) (a run of
// zeros for padding); writes (B^T d B)_t of every channel to out[t][0 .. channels).
using WinogradNhwcInputTransform = void (*)(const float* const* patch, size_t channels, float* const* out);
// Output: m[t] points at the `channels` floats of position t; output pixel i = r * 4 + c of the
// block, act((A^T m A)_(r, c) + bias + residual[i]), goes to out[i] unless out[i] is null.
// bias and residual (the whole array, or an entry) may be null.
using WinogradNhwcOutputTransform = void (*)(const float* const* m, size_t channels, const float* bias,
                                             const float* const* residual, const ActivationParams& activation,
                                             float* const* out);

void f32_winograd_f4x3_nhwc_input_scalar(const float* const* patch, size_t channels, float* const* out);
void f32_winograd_f4x3_nhwc_input_avx2(const float* const* patch, size_t channels, float* const* out);
void f32_winograd_f4x3_nhwc_input_avx512(const float* const* patch, size_t channels, float* const* out);
void f32_winograd_f4x3_nhwc_output_scalar(const float* const* m, size_t channels, const float* bias,
                                          const float* const* residual, const ActivationParams& activation,
                                          float* const* out);
void f32_winograd_f4x3_nhwc_output_avx2(const float* const* m, size_t channels, const float* bias,
                                        const float* const* residual, const ActivationParams& activation,
                                        float* const* out);
void f32_winograd_f4x3_nhwc_output_avx512(const float* const* m, size_t channels, const float* bias,
                                          const float* const* residual, const ActivationParams& activation,
                                          float* const* out);

}  // namespace grove::kernels
