// Driver of the Winograd F(4x4, 3x3) convolution: weight transform, the per-call loop over
// chunks of blocks (input transform into packed-B panels, 36 GEMMs, output transform and
// epilogue). The transforms themselves are in winograd_f4x3_impl.h; sizes and their reasons
// in docs/kernels.md.
#include "kernels/winograd_f4x3.h"

#include <algorithm>
#include <cstdint>
#include <vector>
#include <string>

#include "grove/error.h"

namespace grove::kernels {

namespace {

constexpr size_t kBlock = 4;  // output rows / columns per block

// Blocks per chunk: one GEMM's n. Two panels of the AVX-512 kernel, so U_t (streamed from
// L2/L3, 36 x Cout x Cin floats) is reused across 64 columns; V (36 x Cin x 64 floats) then
// fits L2 for Cin <= ~100 and otherwise each V_t (Cin x 64) still fits while its GEMM runs.
constexpr size_t kChunkBlocks = 64;
// Output channels per GEMM round: the 36 result matrices of one round (36 x rows x chunk)
// stay in L2 (56 x 64 x 36 x 4 = 516 KiB) until the output transform reads them.
constexpr size_t kChannelBlock = 56;

struct Transforms {
  WinogradInputTransform input;
  WinogradOutputTransform output;
  WinogradDeinterleave deinterleave;
  WinogradInterleave interleave;
};

Transforms transforms_for(Isa isa) {
  switch (isa) {
    case Isa::avx512:
      return {f32_winograd_f4x3_input_avx512, f32_winograd_f4x3_output_avx512, f32_winograd_deinterleave4_avx512,
              f32_winograd_interleave4_avx512};
    case Isa::avx2:
      return {f32_winograd_f4x3_input_avx2, f32_winograd_f4x3_output_avx2, f32_winograd_deinterleave4_avx2,
              f32_winograd_interleave4_avx2};
    case Isa::scalar: break;
  }
  return {f32_winograd_f4x3_input_scalar, f32_winograd_f4x3_output_scalar, f32_winograd_deinterleave4_scalar,
          f32_winograd_interleave4_scalar};
}

// G (6 x 3) of F(4x4, 3x3) for the points 0, 1, -1, 2, -2, infinity.
constexpr double kG[6][3] = {{1.0 / 4, 0, 0},
                             {-1.0 / 6, -1.0 / 6, -1.0 / 6},
                             {-1.0 / 6, 1.0 / 6, -1.0 / 6},
                             {1.0 / 24, 1.0 / 12, 1.0 / 6},
                             {1.0 / 24, -1.0 / 12, 1.0 / 6},
                             {0, 0, 1}};

// The 6 patch rows of block row `br`, input channel plane `x`, split by column phase (see
// WinogradInputTransform): phases[(r * 4 + c) * ps + j] = x[4 br - pad_top + r][4 j + c - pad_left],
// 0 outside the plane, for j = 0 .. blocks_w (inclusive).
void split_phases(const float* x, const Conv2dShape& s, size_t br, size_t blocks_w, float* phases, size_t ps,
                  WinogradDeinterleave deinterleave) {
  const int64_t H = int64_t(s.in_h), W = int64_t(s.in_w), left = int64_t(s.pad_left), last = int64_t(blocks_w);
  // Blocks whose 4 columns all lie inside the row: 4j - left >= 0 and 4j + 3 - left < W.
  const int64_t inner0 = std::min(last + 1, (left + 3) / 4);
  const int64_t inner1 = std::clamp<int64_t>(W + left >= 4 ? (W + left - 4) / 4 + 1 : 0, inner0, last + 1);
  for (size_t r = 0; r < 6; ++r) {
    float* p = phases + r * 4 * ps;
    const int64_t ih = int64_t(br * kBlock + r) - int64_t(s.pad_top);
    if (ih < 0 || ih >= H) {
      for (size_t c = 0; c < kBlock; ++c) std::fill_n(p + c * ps, blocks_w + 1, 0.0f);
      continue;
    }
    const float* row = x + ih * W - left;  // row[col + left] is input column col
    auto edge = [&](int64_t j) {
      for (int64_t c = 0; c < 4; ++c) {
        const int64_t col = 4 * j + c - left;
        p[c * ps + j] = col >= 0 && col < W ? row[4 * j + c] : 0.0f;
      }
    };
    for (int64_t j = 0; j < inner0; ++j) edge(j);
    deinterleave(row + 4 * inner0, size_t(inner1 - inner0), p + inner0, ps);
    for (int64_t j = inner1; j <= last; ++j) edge(j);
  }
}

// dst[i] = act(src[i] + bias + residual[i]) over one output row segment.
void finish_row(const float* src, size_t n, float bias, const float* residual, const ActivationParams& act,
                float* dst) {
  if (residual)
    for (size_t i = 0; i < n; ++i) dst[i] = src[i] + bias + residual[i];
  else
    for (size_t i = 0; i < n; ++i) dst[i] = src[i] + bias;
  switch (act.kind) {
    case Activation::identity: return;
    case Activation::relu:
      for (size_t i = 0; i < n; ++i) dst[i] = std::max(dst[i], 0.0f);
      return;
    default:
      for (size_t i = 0; i < n; ++i) dst[i] = apply_activation(dst[i], act);
  }
}

void check_call(const WinogradF4x3Call& call, const WinogradF4x3Weights& w) {
  const Conv2dShape& s = call.shape;
  if (s.kernel_h != 3 || s.kernel_w != 3 || s.stride_h != 1 || s.stride_w != 1 || s.dilation_h != 1 ||
      s.dilation_w != 1)
    throw Error("winograd_f4x3_conv: needs a 3x3 kernel, stride 1, dilation 1");
  if (s.channels != w.cin) throw Error("winograd_f4x3_conv: input channels differ from the weights'");
  if (call.oc_begin > call.oc_end || call.oc_end > w.cout) throw Error("winograd_f4x3_conv: channels past the weights");
  if (call.row_begin > call.row_end || call.row_end > s.out_h) throw Error("winograd_f4x3_conv: rows past the output");
  if (!call.x || !call.y) throw Error("winograd_f4x3_conv: null input or output");
}

}  // namespace

size_t WinogradF4x3Weights::bytes() const {
  size_t total = 0;
  for (const PackedA& a : u) total += a.bytes();
  return total;
}

void winograd_f4x3_transform_weights(const float* w, size_t cout, size_t cin, float* u) {
  for (size_t co = 0; co < cout; ++co)
    for (size_t ci = 0; ci < cin; ++ci) {
      const float* g = w + (co * cin + ci) * 9;
      double gg[6][3];  // G g
      for (size_t i = 0; i < 6; ++i)
        for (size_t c = 0; c < 3; ++c)
          gg[i][c] = kG[i][0] * g[c] + kG[i][1] * g[3 + c] + kG[i][2] * g[6 + c];
      for (size_t i = 0; i < 6; ++i)
        for (size_t k = 0; k < 6; ++k) {
          const double v = gg[i][0] * kG[k][0] + gg[i][1] * kG[k][1] + gg[i][2] * kG[k][2];
          u[((i * 6 + k) * cout + co) * cin + ci] = static_cast<float>(v);
        }
    }
}

void winograd_f4x3_pack_weights(WinogradF4x3Weights& out, const float* w, size_t cout, size_t cin, Isa isa) {
  if (cout > 0 && cin > 0 && !w) throw Error("winograd_f4x3_pack_weights: null weights");
  std::vector<float> u(36 * cout * cin);  // u[t][co][ci]
  winograd_f4x3_transform_weights(w, cout, cin, u.data());
  out.cout = cout;
  out.cin = cin;
  out.isa = isa;
  for (size_t t = 0; t < 36; ++t) out.u[t] = pack_a(u.data() + t * cout * cin, cout, cin, cin, isa);
}

void winograd_f4x3_conv(const WinogradF4x3Call& call, const WinogradF4x3Weights& w, WinogradF4x3Scratch& s) {
  check_call(call, w);
  if (call.oc_begin == call.oc_end || call.row_begin == call.row_end || w.cin == 0) {
    if (w.cin == 0 && call.oc_begin < call.oc_end && call.row_begin < call.row_end)
      throw Error("winograd_f4x3_conv: no input channels");
    return;
  }
  const Conv2dShape& sh = call.shape;
  const Transforms tf = transforms_for(w.isa);
  const size_t cin = w.cin, out_w = sh.out_w, plane_in = sh.in_h * sh.in_w, plane_out = sh.out_h * out_w;
  const size_t blocks_w = (out_w + kBlock - 1) / kBlock;
  const size_t br0 = call.row_begin / kBlock, br1 = (call.row_end + kBlock - 1) / kBlock;
  const size_t mr = w.u[0].mr, nr = gemm_blocking(w.isa).nr;
  const size_t oc_first = call.oc_begin / mr * mr;  // packed A rows start on tile boundaries
  const size_t channel_block = std::max(mr, kChannelBlock / mr * mr);
  // GEMM columns: each block row of a chunk takes blocks_w + 1 columns, the last one unused,
  // so that the transforms run over the whole chunk at once (block j's right neighbour, whose
  // columns 0-1 are j's columns 4-5, is column j + 1 in every row).
  const size_t row_cols = blocks_w + 1;
  const size_t chunk_rows = std::clamp<size_t>(kChunkBlocks / row_cols, 1, br1 - br0);
  const size_t chunk_cols = chunk_rows * row_cols;

  // Staging: 24 phase rows of chunk_cols + 1, 16 output phase rows of a chunk, one output row.
  const size_t ps = chunk_cols + 1, stage_stride = chunk_cols;
  s.rows.reserve(24 * ps + 16 * stage_stride + row_cols * kBlock);
  float* phases = s.rows.data();
  float* stage = phases + 24 * ps;
  float* row_buf = stage + 16 * stage_stride;
  s.m.reserve(36 * channel_block * chunk_cols);

  for (size_t q0 = br0; q0 < br1; q0 += chunk_rows) {
    const size_t rows_here = std::min(chunk_rows, br1 - q0), nb = rows_here * row_cols;
    for (PackedB& v : s.v) shape_packed_b(v, cin, nb, w.isa);
    // Input transform, one channel at a time, in runs of one panel.
    for (size_t ci = 0; ci < cin; ++ci) {
      for (size_t k = 0; k < rows_here; ++k)
        split_phases(call.x + ci * plane_in, sh, q0 + k, blocks_w, phases + k * row_cols, ps, tf.deinterleave);
      for (size_t j = 0; j < nb; j += nr) {
        float* dst[36];
        for (size_t t = 0; t < 36; ++t) dst[t] = s.v[t].panels.data() + (j / nr) * cin * nr + ci * nr;
        tf.input(phases + j, ps, std::min(nr, nb - j), dst);
      }
    }
    for (size_t oc0 = oc_first; oc0 < call.oc_end; oc0 += channel_block) {
      const size_t rows = std::min(channel_block, call.oc_end - oc0);
      for (size_t t = 0; t < 36; ++t) {
        GemmCall g;
        g.m = rows;
        g.n = nb;
        g.c = s.m.data() + t * rows * nb;
        g.c_stride = nb;
        gemm(g, w.u[t], oc0, s.v[t]);
      }
      for (size_t oc = std::max(oc0, call.oc_begin); oc < oc0 + rows; ++oc) {
        tf.output(s.m.data() + (oc - oc0) * nb, rows * nb, nb, stage, stage_stride);
        const float bias = call.epilogue.row_bias ? call.epilogue.row_bias[oc] : 0.0f;
        for (size_t k = 0; k < rows_here; ++k)
          for (size_t r = 0; r < kBlock; ++r) {
            const size_t oh = (q0 + k) * kBlock + r;
            if (oh < call.row_begin || oh >= call.row_end) continue;
            tf.interleave(stage + r * 4 * stage_stride + k * row_cols, stage_stride, blocks_w, row_buf);
            const size_t offset = oc * plane_out + oh * out_w;
            const float* residual =
                call.epilogue.residual ? call.epilogue.residual + oc * call.epilogue.residual_stride + oh * out_w : nullptr;
            finish_row(row_buf, out_w, bias, residual, call.epilogue.activation, call.y + offset);
          }
      }
    }
  }
}

}  // namespace grove::kernels
