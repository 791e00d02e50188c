// Driver of the Winograd F(4x4, 3x3) convolution: weight transform, the per-call loop over
// chunks of blocks (input transform into packed-B panels, 36 GEMMs, output transform and
// epilogue). The transforms themselves are in winograd_f4x3_impl.h; sizes and their reasons
// in docs/kernels.md.
#include "kernels/winograd_f4x3.h"

#include <algorithm>
#include <cstdint>
#include <vector>
#include <string>

#include "graph/error.h"

namespace grove::kernels {

namespace {

constexpr size_t kBlock = 4;  // output rows / columns per block

// Blocks per chunk: one GEMM's n. Two panels of the AVX-512 kernel, so U_t (streamed from
// L2/L3, 36 x Cout x Cin floats) is reused across 64 columns; V (36 x Cin x 64 floats) then
// fits L2 for Cin <= ~100 and otherwise each V_t (Cin x 64) still fits while its GEMM runs.
constexpr size_t kChunkBlocks = 64;
// Output channels per GEMM round: the 36 result matrices of one round (36 x rows x chunk)
// stay in L2 (28 x 64 x 36 x 4 = 258 KiB) until the output transform reads them.
constexpr size_t kChannelBlock = 28;

struct Transforms {
  WinogradInputTransform input;
  WinogradOutputTransform output;
};

Transforms transforms_for(Isa isa) {
  switch (isa) {
    case Isa::avx512: return {f32_winograd_f4x3_input_avx512, f32_winograd_f4x3_output_avx512};
    case Isa::avx2: return {f32_winograd_f4x3_input_avx2, f32_winograd_f4x3_output_avx2};
    case Isa::scalar: break;
  }
  return {f32_winograd_f4x3_input_scalar, f32_winograd_f4x3_output_scalar};
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
void split_phases(const float* x, const Conv2dShape& s, size_t br, size_t blocks_w, float* phases, size_t ps) {
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
    for (int64_t j = inner0; j < inner1; ++j)
      for (int64_t c = 0; c < 4; ++c) p[c * ps + j] = row[4 * j + c];
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

void winograd_f4x3_pack_weights(WinogradF4x3Weights& out, const float* w, size_t cout, size_t cin, Isa isa) {
  if (cout > 0 && cin > 0 && !w) throw Error("winograd_f4x3_pack_weights: null weights");
  std::vector<float> u(36 * cout * cin);  // u[t][co][ci]
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
  const size_t total = (br1 - br0) * blocks_w;
  const size_t mr = w.u[0].mr, nr = gemm_blocking(w.isa).nr;
  const size_t oc_first = call.oc_begin / mr * mr;  // packed A rows start on tile boundaries
  const size_t channel_block = std::max(mr, kChannelBlock / mr * mr);
  const size_t chunk = std::min(total, kChunkBlocks);

  // Staging: 24 phase rows, 16 output rows of a chunk, one output row.
  const size_t ps = blocks_w + 1, stage_stride = chunk, row_out = blocks_w * kBlock;
  s.rows.reserve(24 * ps + 16 * stage_stride + row_out);
  float* phases = s.rows.data();
  float* stage = phases + 24 * ps;
  float* row_buf = stage + 16 * stage_stride;
  s.m.reserve(36 * channel_block * chunk);

  for (size_t b0 = 0; b0 < total; b0 += chunk) {
    const size_t nb = std::min(chunk, total - b0);
    for (PackedB& v : s.v) shape_packed_b(v, cin, nb, w.isa);
    // Input transform: each (channel, block row) of the chunk, in runs that stay inside a panel.
    for (size_t ci = 0; ci < cin; ++ci)
      for (size_t b = b0; b < b0 + nb;) {
        const size_t br = br0 + b / blocks_w, bc0 = b % blocks_w;
        const size_t bc1 = std::min(blocks_w, bc0 + (b0 + nb - b));
        split_phases(call.x + ci * plane_in, sh, br, blocks_w, phases, ps);
        for (size_t bc = bc0; bc < bc1;) {
          const size_t lane = b + (bc - bc0) - b0, count = std::min(bc1 - bc, nr - lane % nr);
          float* dst[36];
          for (size_t t = 0; t < 36; ++t) dst[t] = s.v[t].panels.data() + (lane / nr) * cin * nr + ci * nr + lane % nr;
          tf.input(phases + bc, ps, count, dst);
          bc += count;
        }
        b += bc1 - bc0;
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
        for (size_t b = b0; b < b0 + nb;) {
          const size_t br = br0 + b / blocks_w, bc0 = b % blocks_w;
          const size_t bc1 = std::min(blocks_w, bc0 + (b0 + nb - b));
          const size_t col0 = bc0 * kBlock, col1 = std::min(out_w, bc1 * kBlock);
          for (size_t r = 0; r < kBlock; ++r) {
            const size_t oh = br * kBlock + r;
            if (oh < call.row_begin || oh >= call.row_end) continue;
            const float* src = stage + r * 4 * stage_stride + (b - b0);
            for (size_t j = 0; j < bc1 - bc0; ++j)
              for (size_t c = 0; c < kBlock; ++c) row_buf[j * kBlock + c] = src[c * stage_stride + j];
            const size_t offset = oc * plane_out + oh * out_w + col0;
            const float* residual =
                call.epilogue.residual ? call.epilogue.residual + oc * call.epilogue.residual_stride + oh * out_w + col0
                                       : nullptr;
            finish_row(row_buf, col1 - col0, bias, residual, call.epilogue.activation, call.y + offset);
          }
          b += bc1 - bc0;
        }
      }
    }
  }
}

}  // namespace grove::kernels
