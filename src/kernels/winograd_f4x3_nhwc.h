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

#include "kernels/winograd_nhwc.h"

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

// Runs on the ISA the weights were packed for. Throws grove::Error on a bad call.
void winograd_f4x3_nhwc_conv(const WinogradNhwcCall& call, const WinogradF4x3NhwcWeights& weights,
                             WinogradNhwcScratch& scratch);

// The transforms across channels (winograd_nhwc.h), one build per ISA (winograd_f4x3_impl.h).
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
