#pragma once
// Winograd F(2x2, 3x3) on channels-last activations: x [H][W][Cin], y [OH][OW][Cout].
//
// The output plane is cut into 2x2 blocks; each reads a 4x4 input patch and is computed as
//   Y = A^T [ sum over input channels of (G g G^T) (.) (B^T d B) ] A
// with 16 GEMMs M_t[blocks x Cout] = V_t[blocks x Cin] . U_t[Cin x Cout] (winograd_nhwc.h).
// Against F(4x4, 3x3) it does 16/4 = 4 products per output instead of 36/16 = 2.25, but a
// small plane gives its GEMMs four times the rows (a 7x7 plane: 16 blocks, against 4), and
// its transforms are additions only. It is a primitive grove tune can choose for a layer;
// the hand rules never take it.
//
// An output element gets the same operations from its own block whatever rows or channels a
// call covers; a call computes whole blocks and reads their whole patches.
#include <cstddef>

#include "kernels/winograd_nhwc.h"

namespace grove::kernels {

// U_t = (G g G^T)_t for the 16 positions t, each packed as B [Cin x Cout].
struct WinogradF2x3NhwcWeights {
  size_t cout = 0, cin = 0;
  Isa isa = Isa::scalar;
  PackedB u[16];

  size_t bytes() const;
};

// w: [cout][cin][3][3] (ONNX Conv weights of one group). Transformed in double precision.
void winograd_f2x3_nhwc_pack_weights(WinogradF2x3NhwcWeights& out, const float* w, size_t cout, size_t cin,
                                     Isa isa = active_isa());

// Runs on the ISA the weights were packed for. Throws grove::Error on a bad call.
void winograd_f2x3_nhwc_conv(const WinogradNhwcCall& call, const WinogradF2x3NhwcWeights& weights,
                             WinogradNhwcScratch& scratch);

// The transforms across channels (winograd_nhwc.h), one build per ISA (winograd_f2x3_impl.h).
void f32_winograd_f2x3_nhwc_input_scalar(const float* const* patch, size_t channels, float* const* out);
void f32_winograd_f2x3_nhwc_input_avx2(const float* const* patch, size_t channels, float* const* out);
void f32_winograd_f2x3_nhwc_input_avx512(const float* const* patch, size_t channels, float* const* out);
void f32_winograd_f2x3_nhwc_output_scalar(const float* const* m, size_t channels, const float* bias,
                                          const float* const* residual, const ActivationParams& activation,
                                          float* const* out);
void f32_winograd_f2x3_nhwc_output_avx2(const float* const* m, size_t channels, const float* bias,
                                        const float* const* residual, const ActivationParams& activation,
                                        float* const* out);
void f32_winograd_f2x3_nhwc_output_avx512(const float* const* m, size_t channels, const float* bias,
                                          const float* const* residual, const ActivationParams& activation,
                                          float* const* out);

}  // namespace grove::kernels
