// Depthwise conv for avx512 (flags from kernels.cmake).
//
// The portable loop of dwconv_impl.h walks each output row tap by tap over a stack buffer;
// the compiler vectorises it poorly for the short rows of late layers (7 and 14 wide) and
// not at all for stride 2 (a strided read). This kernel keeps 16 output columns of 4 output
// rows in registers and walks the input rows once: each tap is a masked load of the input row
// (the mask zeroes columns that fall in the padding or past the row, so no border code; for
// stride 2, two loads whose even lanes a permute gathers) feeding every output row it
// touches. Per output element the sum is still bias, then the taps in (kernel row, kernel
// column) order, so rows computed by different calls or tiles agree bit for bit.
// Dilation other than 1 takes the portable loop.
#include <immintrin.h>

#include <algorithm>
#include <cstdint>
#include <vector>

#include "kernels/dwconv_impl.h"
#include "kernels/epilogue.h"

namespace grove::kernels {
namespace {

constexpr int64_t kLanes = 16;

// Lanes l of a 16-float load starting at input column `start` with 0 <= start + l < width.
__mmask16 columns_inside(int64_t start, int64_t width) {
  const int64_t lo = std::clamp<int64_t>(-start, 0, kLanes);
  const int64_t hi = std::clamp<int64_t>(width - start, 0, kLanes);
  if (hi <= lo) return 0;
  const uint32_t below_hi = (uint32_t{1} << hi) - 1, below_lo = (uint32_t{1} << lo) - 1;
  return static_cast<__mmask16>(below_hi & ~below_lo);
}

// Output rows computed together: each loaded input row feeds up to this many accumulators,
// which also hides the FMA latency a single accumulator chain would wait on.
constexpr int64_t kRows = 4;  // acc0..acc3 below
constexpr int64_t kMaxKernel = 8;

// Where a tap's 16 input values start, and which lanes of its load(s) lie inside the row.
struct TapColumns {
  int64_t start = 0;
  __mmask16 lo = 0, hi = 0;  // hi: the second load of a stride-2 tap
};

// The 16 input values a tap contributes to 16 consecutive output columns of one row: one
// masked load for stride 1; for stride 2, two loads whose even lanes a permute gathers.
// Masked-off lanes are not read, so taps in the padding cost no border code.
inline __m512 tap_values(const float* row, const TapColumns& t, bool stride_2) {
  const __m512 lo = _mm512_maskz_loadu_ps(t.lo, row + t.start);
  if (!stride_2) return lo;
  const __m512i evens = _mm512_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30);
  const __m512 hi = _mm512_maskz_loadu_ps(t.hi, row + t.start + kLanes);
  return _mm512_permutex2var_ps(lo, evens, hi);
}

// Stores 16 sums of the output plane at `offset` (lanes in `mask`) after the fused
// epilogue y = act(sum + residual), in the order the portable loop uses.
inline void store_outputs(const DwConv2dCall& c, int64_t offset, __mmask16 mask, __m512 acc) {
  if (c.residual) acc = _mm512_add_ps(acc, _mm512_maskz_loadu_ps(mask, c.residual + offset));
  float* out = c.y + offset;
  switch (c.activation.kind) {
    case Activation::identity: break;
    // acc goes second: vmaxps/vminps return the second operand when either is NaN.
    case Activation::relu: acc = _mm512_max_ps(_mm512_setzero_ps(), acc); break;
    case Activation::clip:
      acc = _mm512_min_ps(_mm512_set1_ps(c.activation.beta), _mm512_max_ps(_mm512_set1_ps(c.activation.alpha), acc));
      break;
    default: {  // rare after a depthwise conv: the scalar definition, lane by lane
      alignas(64) float lanes[kLanes];
      _mm512_store_ps(lanes, acc);
      for (int64_t l = 0; l < kLanes; ++l)
        if (mask >> l & 1) out[l] = apply_activation(lanes[l], c.activation);
      return;
    }
  }
  _mm512_mask_storeu_ps(out, mask, acc);
}

// A row of zeros at least as wide as the input: taps of kernel rows that fall in the top or
// bottom padding read it, so the inner loop has no branch and the accumulators stay in
// registers. Constant data; wider inputs take the portable loop.
constexpr int64_t kMaxZeroRow = 4096;
alignas(64) constexpr float kZeroRow[kMaxZeroRow] = {};

void dwconv2d_unit_dilation(const DwConv2dCall& c) {
  const Conv2dShape& s = c.shape;
  const int64_t H = int64_t(s.in_h), W = int64_t(s.in_w), OW = int64_t(s.out_w);
  const int64_t KH = int64_t(s.kernel_h), KW = int64_t(s.kernel_w);
  const int64_t sh = int64_t(s.stride_h), sw = int64_t(s.stride_w);
  const int64_t pad_top = int64_t(s.pad_top), pad_left = int64_t(s.pad_left);
  const bool stride_2 = sw == 2;
  const float* zeros = kZeroRow;
  const int64_t row_begin = int64_t(c.row_begin), row_end = int64_t(c.row_end);
  for (int64_t oh0 = row_begin; oh0 < row_end; oh0 += kRows) {
    const int64_t rows = std::min(kRows, row_end - oh0);
    // The input row each (output row, kernel row) reads; past the block's last output row
    // too (computed, never stored), so every block runs the same unrolled code.
    const float* in_rows[kRows][kMaxKernel];
    for (int64_t r = 0; r < kRows; ++r)
      for (int64_t kh = 0; kh < KH; ++kh) {
        const int64_t ih = (oh0 + r) * sh + kh - pad_top;
        in_rows[r][kh] = r < rows && ih >= 0 && ih < H ? c.x + ih * W : zeros;
      }
    for (int64_t ow0 = 0; ow0 < OW; ow0 += kLanes) {
      TapColumns taps[kMaxKernel];
      for (int64_t kw = 0; kw < KW; ++kw) {
        taps[kw].start = ow0 * sw + kw - pad_left;
        taps[kw].lo = columns_inside(taps[kw].start, W);
        taps[kw].hi = columns_inside(taps[kw].start + kLanes, W);
      }
      // Four named accumulators, not an array: GCC spills an array indexed by `rows` to
      // the stack on every FMA, and 512-bit stores then bound the loop.
      const __m512 bias = _mm512_set1_ps(c.bias);
      __m512 acc0 = bias, acc1 = bias, acc2 = bias, acc3 = bias;
      // Taps in (kernel row, kernel column) order for every output element, whatever rows
      // this call was given; a padding tap adds w * 0.
      for (int64_t kh = 0; kh < KH; ++kh)
        for (int64_t kw = 0; kw < KW; ++kw) {
          const __m512 w = _mm512_set1_ps(c.w[kh * KW + kw]);
          acc0 = _mm512_fmadd_ps(w, tap_values(in_rows[0][kh], taps[kw], stride_2), acc0);
          acc1 = _mm512_fmadd_ps(w, tap_values(in_rows[1][kh], taps[kw], stride_2), acc1);
          acc2 = _mm512_fmadd_ps(w, tap_values(in_rows[2][kh], taps[kw], stride_2), acc2);
          acc3 = _mm512_fmadd_ps(w, tap_values(in_rows[3][kh], taps[kw], stride_2), acc3);
        }
      const __mmask16 out_mask = columns_inside(0, OW - ow0);
      const int64_t out = oh0 * OW + ow0;
      store_outputs(c, out, out_mask, acc0);
      if (rows > 1) store_outputs(c, out + OW, out_mask, acc1);
      if (rows > 2) store_outputs(c, out + 2 * OW, out_mask, acc2);
      if (rows > 3) store_outputs(c, out + 3 * OW, out_mask, acc3);
    }
  }
}

// Stride 1 with 'same' padding (the output plane is the input plane): the plane is one flat
// row of H*W values, and tap (kh, kw) of output p reads input p + (kh - pad_top) * W +
// (kw - pad_left). Lanes whose column would wrap into the neighbouring row are masked by the
// column of their output, so vectors run across row ends: a 7x7 plane is 4 vectors, where
// the row kernel would run 7 vectors of 7 useful lanes each.
struct FlatGeometry {
  int64_t W, n, KH, KW, pad_top, pad_left;
};

// For the 16 outputs from flat index p0: per kernel column, the lanes whose input column
// stays inside the row (their output column is p mod W), cut by the row mask where a tap
// may leave the plane at the top or bottom.
struct FlatLanes {
  __mmask16 column_ok[kMaxKernel];
  bool inside;  // every tap of every lane stays inside the plane: no row mask needed
};

inline FlatLanes flat_lanes(const FlatGeometry& g, int64_t p0) {
  const __m512i lane = _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15);
  const __m512i width = _mm512_set1_epi32(int32_t(g.W));
  const __m512i p = _mm512_add_epi32(_mm512_set1_epi32(int32_t(p0)), lane);
  // p / W in float is exact: the caller keeps planes under 2^24 elements.
  const __m512i row = _mm512_cvttps_epi32(_mm512_div_round_ps(_mm512_cvtepi32_ps(p), _mm512_cvtepi32_ps(width),
                                                              _MM_FROUND_TO_ZERO | _MM_FROUND_NO_EXC));
  const __m512i column = _mm512_sub_epi32(p, _mm512_mullo_epi32(row, width));
  FlatLanes lanes;
  for (int64_t kw = 0; kw < g.KW; ++kw) {
    const __m512i in_column = _mm512_add_epi32(column, _mm512_set1_epi32(int32_t(kw - g.pad_left)));
    lanes.column_ok[kw] =
        _mm512_cmpge_epi32_mask(in_column, _mm512_setzero_si512()) & _mm512_cmplt_epi32_mask(in_column, width);
  }
  lanes.inside = p0 - g.pad_top * g.W - g.pad_left >= 0 &&
                 p0 + kLanes - 1 + (g.KH - 1 - g.pad_top) * g.W + (g.KW - 1 - g.pad_left) < g.n;
  return lanes;
}

inline __m512 flat_tap(const float* x, const FlatGeometry& g, const FlatLanes& lanes, int64_t q0, int64_t kw) {
  const __mmask16 mask = lanes.inside ? lanes.column_ok[kw] : __mmask16(lanes.column_ok[kw] & columns_inside(q0, g.n));
  return _mm512_maskz_loadu_ps(mask, x + q0);
}

// Stride 1 with 'same' padding (the output plane is the input plane): the plane is one flat
// row of H*W values, and tap (kh, kw) of output p reads input p + (kh - pad_top) * W +
// (kw - pad_left). Lanes whose column would wrap into the neighbouring row are masked by the
// column of their output, so vectors run across row ends: a 7x7 plane is 4 vectors, where
// the row kernel would run 7 vectors of 7 useful lanes each. Four vectors at a time, in
// named accumulators (see dwconv2d_unit_dilation).
void dwconv2d_same_flat(const DwConv2dCall& c) {
  const Conv2dShape& s = c.shape;
  const FlatGeometry g{int64_t(s.in_w), int64_t(s.in_h * s.in_w), int64_t(s.kernel_h), int64_t(s.kernel_w),
                       int64_t(s.pad_top), int64_t(s.pad_left)};
  const int64_t p_begin = int64_t(c.row_begin) * g.W, p_end = int64_t(c.row_end) * g.W;
  const __m512 bias = _mm512_set1_ps(c.bias);
  int64_t p0 = p_begin;
  for (; p_end - p0 > 3 * kLanes; p0 += 4 * kLanes) {
    // Lanes past p_end compute values that are never stored; their loads stay masked
    // inside the plane like any other.
    const FlatLanes l0 = flat_lanes(g, p0), l1 = flat_lanes(g, p0 + kLanes);
    const FlatLanes l2 = flat_lanes(g, p0 + 2 * kLanes), l3 = flat_lanes(g, p0 + 3 * kLanes);
    __m512 acc0 = bias, acc1 = bias, acc2 = bias, acc3 = bias;
    for (int64_t kh = 0; kh < g.KH; ++kh)
      for (int64_t kw = 0; kw < g.KW; ++kw) {
        const int64_t q0 = p0 + (kh - g.pad_top) * g.W + (kw - g.pad_left);
        const __m512 w = _mm512_set1_ps(c.w[kh * g.KW + kw]);
        acc0 = _mm512_fmadd_ps(w, flat_tap(c.x, g, l0, q0, kw), acc0);
        acc1 = _mm512_fmadd_ps(w, flat_tap(c.x, g, l1, q0 + kLanes, kw), acc1);
        acc2 = _mm512_fmadd_ps(w, flat_tap(c.x, g, l2, q0 + 2 * kLanes, kw), acc2);
        acc3 = _mm512_fmadd_ps(w, flat_tap(c.x, g, l3, q0 + 3 * kLanes, kw), acc3);
      }
    store_outputs(c, p0, columns_inside(0, p_end - p0), acc0);
    store_outputs(c, p0 + kLanes, columns_inside(0, p_end - p0 - kLanes), acc1);
    store_outputs(c, p0 + 2 * kLanes, columns_inside(0, p_end - p0 - 2 * kLanes), acc2);
    store_outputs(c, p0 + 3 * kLanes, columns_inside(0, p_end - p0 - 3 * kLanes), acc3);
  }
  // The last 1-3 vectors one at a time: a tile of a 7x7 or 14x14 plane is often under four
  // vectors, and four would compute mostly lanes that are thrown away.
  for (; p0 < p_end; p0 += kLanes) {
    const FlatLanes l = flat_lanes(g, p0);
    __m512 acc = bias;
    for (int64_t kh = 0; kh < g.KH; ++kh)
      for (int64_t kw = 0; kw < g.KW; ++kw) {
        const int64_t q0 = p0 + (kh - g.pad_top) * g.W + (kw - g.pad_left);
        acc = _mm512_fmadd_ps(_mm512_set1_ps(c.w[kh * g.KW + kw]), flat_tap(c.x, g, l, q0, kw), acc);
      }
    store_outputs(c, p0, columns_inside(0, p_end - p0), acc);
  }
}

}  // namespace

void f32_dwconv2d_avx512(const DwConv2dCall& call) {
  const Conv2dShape& s = call.shape;
  const bool unit_dilation = s.dilation_h == 1 && s.dilation_w == 1;
  const bool stride_1_or_2 = (s.stride_w == 1 || s.stride_w == 2) && s.stride_h >= 1;
  const bool same_plane = s.stride_h == 1 && s.stride_w == 1 && s.out_h == s.in_h && s.out_w == s.in_w;
  if (unit_dilation && same_plane && s.kernel_w <= size_t(kMaxKernel) && s.in_h * s.in_w < (size_t(1) << 24))
    return dwconv2d_same_flat(call);
  if (unit_dilation && stride_1_or_2 && s.kernel_w <= size_t(kMaxKernel) && s.kernel_h <= size_t(kMaxKernel) &&
      s.in_w <= size_t(kMaxZeroRow))
    return dwconv2d_unit_dilation(call);
  dwconv2d_impl(call);
}

}  // namespace grove::kernels
