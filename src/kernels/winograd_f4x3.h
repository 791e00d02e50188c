#pragma once
// Winograd F(4x4, 3x3) convolution for 3x3, stride 1, dilation 1, one group, NCHW.
//
// The output plane is cut into 4x4 blocks on a grid anchored at output (0, 0). Each block
// reads a 6x6 input patch d (rows 4*br - pad_top .., cols 4*bc - pad_left ..; outside the
// input is 0) and is computed as
//   Y = A^T [ sum over input channels of (G g G^T) (.) (B^T d B) ] A
// i.e. 36 independent GEMMs  M_t[Cout x blocks] = U_t[Cout x Cin] . V_t[Cin x blocks]
// (t = the 36 positions of the 6x6 transformed tile) on the packed-A/packed-B microkernels,
// with U_t = (G g G^T)_t packed once at load (PackedA), V_t written by the input transform
// straight into packed-B panels, and the output transform applying the fused epilogue.
//
// Every output element is computed from its own block by the same operations whatever rows
// or channels a call covers, so results do not depend on how the layer is tiled. A call
// whose rows do not start or end on the 4-row grid computes whole blocks and writes only its
// rows; it reads the whole 6-row patches of those blocks, which callers must provide.
#include <cstddef>

#include "kernels/epilogue.h"
#include "kernels/gemm.h"
#include "kernels/im2col.h"

namespace grove::kernels {

// U = G g G^T for every (cout, cin), as 36 packed [Cout x Cin] matrices.
struct WinogradF4x3Weights {
  size_t cout = 0, cin = 0;
  Isa isa = Isa::scalar;
  PackedA u[36];

  size_t bytes() const;
};

// u[t][co][ci] = (G g G^T)_t of w[co][ci] (w: [cout][cin][3][3]), in double precision: the
// weights of both layouts' GEMMs before packing.
void winograd_f4x3_transform_weights(const float* w, size_t cout, size_t cin, float* u);

// w: [cout][cin][3][3] (ONNX Conv weights of one group). Transformed in double precision.
void winograd_f4x3_pack_weights(WinogradF4x3Weights& out, const float* w, size_t cout, size_t cin,
                                Isa isa = active_isa());

// Per-thread working memory, reused across calls (the hot path does not allocate once warm).
struct WinogradF4x3Scratch {
  PackedB v[36];       // transformed input: V_t [Cin x blocks] in packed-B panels
  AlignedFloats m;     // GEMM results: 36 x channels x blocks
  AlignedFloats rows;  // transform staging (padded input rows, output rows)
};

// One image: output channels [oc_begin, oc_end) over output rows [row_begin, row_end), full
// width. Pointers are to channel 0: x = the cin input planes, y = the cout output planes.
// Epilogue (NCHW): row_bias[oc] per output channel; residual + oc * residual_stride + oh *
// out_w + ow is the residual of output (oc, oh, ow); then the activation.
struct WinogradF4x3Call {
  const float* x = nullptr;
  float* y = nullptr;
  size_t oc_begin = 0, oc_end = 0;
  size_t row_begin = 0, row_end = 0;
  Conv2dShape shape;  // channels = cin; kernel 3x3, stride 1, dilation 1
  Epilogue epilogue;
};

// Runs on the ISA the weights were packed for. Throws grove::Error on a bad call.
void winograd_f4x3_conv(const WinogradF4x3Call& call, const WinogradF4x3Weights& weights, WinogradF4x3Scratch& scratch);

// The transforms, one build per ISA (winograd_f4x3_impl.h), vectorised across `blocks`
// consecutive blocks of one block row.
// Input: the 6 patch rows split by column phase: column 4j + c of patch row r (c = 0..3) is
// phases[(r * 4 + c) * phase_stride + j], j = 0..blocks (one past: columns 4 and 5 of block j
// are phases 0 and 1 of block j + 1). Writes B^T d B of block j, position t, to out[t][j].
using WinogradInputTransform = void (*)(const float* phases, size_t phase_stride, size_t blocks,
                                        float* const* out);
// Output: m[t * m_stride + j] (t = 0..35) -> A^T m A, output (r, c) of block j to
// out[(r * 4 + c) * out_stride + j].
using WinogradOutputTransform = void (*)(const float* m, size_t m_stride, size_t blocks, float* out,
                                         size_t out_stride);

// Column phases of a row and back (the stride-4 moves around the transforms):
// dst[c * dst_stride + j] = src[4 j + c], and dst[4 j + c] = src[c * src_stride + j].
using WinogradDeinterleave = void (*)(const float* src, size_t blocks, float* dst, size_t dst_stride);
using WinogradInterleave = void (*)(const float* src, size_t src_stride, size_t blocks, float* dst);

void f32_winograd_deinterleave4_scalar(const float* src, size_t blocks, float* dst, size_t dst_stride);
void f32_winograd_deinterleave4_avx2(const float* src, size_t blocks, float* dst, size_t dst_stride);
void f32_winograd_deinterleave4_avx512(const float* src, size_t blocks, float* dst, size_t dst_stride);
void f32_winograd_interleave4_scalar(const float* src, size_t src_stride, size_t blocks, float* dst);
void f32_winograd_interleave4_avx2(const float* src, size_t src_stride, size_t blocks, float* dst);
void f32_winograd_interleave4_avx512(const float* src, size_t src_stride, size_t blocks, float* dst);
void f32_winograd_f4x3_input_scalar(const float* phases, size_t phase_stride, size_t blocks, float* const* out);
void f32_winograd_f4x3_input_avx2(const float* phases, size_t phase_stride, size_t blocks, float* const* out);
void f32_winograd_f4x3_input_avx512(const float* phases, size_t phase_stride, size_t blocks, float* const* out);
void f32_winograd_f4x3_output_scalar(const float* m, size_t m_stride, size_t blocks, float* out, size_t out_stride);
void f32_winograd_f4x3_output_avx2(const float* m, size_t m_stride, size_t blocks, float* out, size_t out_stride);
void f32_winograd_f4x3_output_avx512(const float* m, size_t m_stride, size_t blocks, float* out, size_t out_stride);

}  // namespace grove::kernels
