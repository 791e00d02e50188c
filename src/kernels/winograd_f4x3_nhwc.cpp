// Driver of the channels-last Winograd F(4x4, 3x3) convolution: per chunk of output blocks,
// the input transform of every block into V, then per block of output channels the 36 GEMMs
// and the output transform with the epilogue. The transforms are in winograd_f4x3_impl.h.
#include "kernels/winograd_f4x3_nhwc.h"

#include <algorithm>
#include <cstdint>
#include <vector>

#include "grove/error.h"
#include "kernels/cpu_info.h"
#include "kernels/winograd_f4x3.h"

namespace grove::kernels {

namespace {

constexpr size_t kBlock = 4;  // output rows / columns per block

struct Transforms {
  WinogradNhwcInputTransform input;
  WinogradNhwcOutputTransform output;
};

Transforms transforms_for(Isa isa) {
  switch (isa) {
    case Isa::avx512: return {f32_winograd_f4x3_nhwc_input_avx512, f32_winograd_f4x3_nhwc_output_avx512};
    case Isa::avx2: return {f32_winograd_f4x3_nhwc_input_avx2, f32_winograd_f4x3_nhwc_output_avx2};
    case Isa::scalar: break;
  }
  return {f32_winograd_f4x3_nhwc_input_scalar, f32_winograd_f4x3_nhwc_output_scalar};
}

// A quarter of this CPU's L2, in floats: the budget of V (36 x blocks x Cin) and, apart, of M
// (36 x blocks x channels), so both stay in L2 beside the U_t the GEMMs stream.
size_t quarter_l2_floats() {
  static const size_t floats = [] {
    const int64_t l2 = cpu_info().l2_bytes > 0 ? cpu_info().l2_bytes : int64_t{1} << 20;
    return size_t(l2) / 4 / sizeof(float);
  }();
  return floats;
}

void check_call(const WinogradF4x3NhwcCall& call, const WinogradF4x3NhwcWeights& w) {
  const Conv2dShape& s = call.shape;
  if (s.kernel_h != 3 || s.kernel_w != 3 || s.stride_h != 1 || s.stride_w != 1 || s.dilation_h != 1 ||
      s.dilation_w != 1)
    throw Error("winograd_f4x3_nhwc_conv: needs a 3x3 kernel, stride 1, dilation 1");
  if (s.channels != w.cin) throw Error("winograd_f4x3_nhwc_conv: input channels differ from the weights'");
  if (call.oc_begin > call.oc_end || call.oc_end > w.cout)
    throw Error("winograd_f4x3_nhwc_conv: channels past the weights");
  if (w.cout > 0 && call.oc_begin % w.u[0].nr != 0)
    throw Error("winograd_f4x3_nhwc_conv: the first channel is not on a panel boundary");
  if (call.row_begin > call.row_end || call.row_end > s.out_h)
    throw Error("winograd_f4x3_nhwc_conv: rows past the output");
  if (!call.x || !call.y) throw Error("winograd_f4x3_nhwc_conv: null input or output");
  if (call.y_stride != 0 && call.y_stride < w.cout) throw Error("winograd_f4x3_nhwc_conv: y's pixels overlap");
}

}  // namespace

size_t WinogradF4x3NhwcWeights::bytes() const {
  size_t total = 0;
  for (const PackedB& b : u) total += b.bytes();
  return total;
}

void winograd_f4x3_nhwc_pack_weights(WinogradF4x3NhwcWeights& out, const float* w, size_t cout, size_t cin, Isa isa) {
  if (cout > 0 && cin > 0 && !w) throw Error("winograd_f4x3_nhwc_pack_weights: null weights");
  std::vector<float> u(36 * cout * cin);  // u[t][co][ci]: B given n rows of k
  winograd_f4x3_transform_weights(w, cout, cin, u.data());
  out.cout = cout;
  out.cin = cin;
  out.isa = isa;
  for (size_t t = 0; t < 36; ++t)
    out.u[t] = pack_b(u.data() + t * cout * cin, cin, cout, cin, BLayout::n_by_k, isa);
}

void winograd_f4x3_nhwc_conv(const WinogradF4x3NhwcCall& call, const WinogradF4x3NhwcWeights& w,
                             WinogradF4x3NhwcScratch& s) {
  check_call(call, w);
  if (call.oc_begin == call.oc_end || call.row_begin == call.row_end) return;
  if (w.cin == 0) throw Error("winograd_f4x3_nhwc_conv: no input channels");
  const Conv2dShape& sh = call.shape;
  const Transforms tf = transforms_for(w.isa);
  const size_t cin = w.cin, cout = w.cout, in_h = sh.in_h, in_w = sh.in_w, out_w = sh.out_w;
  const size_t y_stride = call.y_stride ? call.y_stride : cout;
  const size_t blocks_w = (out_w + kBlock - 1) / kBlock;
  const size_t br0 = call.row_begin / kBlock, br1 = (call.row_end + kBlock - 1) / kBlock;
  const size_t total = (br1 - br0) * blocks_w;
  const GemmBlocking blocking = gemm_blocking(w.isa);
  // Blocks per chunk: V in a quarter of L2, in whole register tiles of rows; then output
  // channels per GEMM round: M in another quarter, in whole panels.
  const size_t fit = std::max(blocking.mr, quarter_l2_floats() / (36 * cin) / blocking.mr * blocking.mr);
  const size_t chunk = std::min(total, fit);
  const size_t channel_block = std::max(blocking.nr, quarter_l2_floats() / (36 * chunk) / blocking.nr * blocking.nr);
  s.v.reserve(36 * chunk * cin);
  s.m.reserve(36 * chunk * std::min(channel_block, call.oc_end - call.oc_begin));
  s.zeros.reserve(cin);
  std::fill_n(s.zeros.data(), cin, 0.0f);
  const float* zeros = s.zeros.data();
  const Epilogue& e = call.epilogue;

  for (size_t b0 = 0; b0 < total; b0 += chunk) {
    const size_t nb = std::min(chunk, total - b0);
    float* v = s.v.data();
    for (size_t i = 0; i < nb; ++i) {
      const size_t br = br0 + (b0 + i) / blocks_w, bc = (b0 + i) % blocks_w;
      const float* patch[36];
      float* out[36];
      for (size_t r = 0; r < 6; ++r) {
        const int64_t ih = int64_t(br * kBlock + r) - int64_t(sh.pad_top);
        for (size_t c = 0; c < 6; ++c) {
          const int64_t iw = int64_t(bc * kBlock + c) - int64_t(sh.pad_left);
          const bool inside = ih >= 0 && ih < int64_t(in_h) && iw >= 0 && iw < int64_t(in_w);
          patch[r * 6 + c] = inside ? call.x + (size_t(ih) * in_w + size_t(iw)) * cin : zeros;
        }
      }
      for (size_t t = 0; t < 36; ++t) out[t] = v + (t * nb + i) * cin;
      tf.input(patch, cin, out);
    }
    for (size_t oc0 = call.oc_begin; oc0 < call.oc_end; oc0 += channel_block) {
      const size_t cols = std::min(channel_block, call.oc_end - oc0);
      float* m = s.m.data();
      for (size_t t = 0; t < 36; ++t) {
        GemmCall g;
        g.m = nb;
        g.a = v + t * nb * cin;
        g.a_stride = cin;
        g.n0 = oc0;
        g.n = cols;
        g.c = m + t * nb * cols;
        g.c_stride = cols;
        gemm(g, w.u[t], s.gemm);
      }
      for (size_t i = 0; i < nb; ++i) {
        const size_t br = br0 + (b0 + i) / blocks_w, bc = (b0 + i) % blocks_w;
        const float* mt[36];
        for (size_t t = 0; t < 36; ++t) mt[t] = m + (t * nb + i) * cols;
        float* out[16];
        const float* residual[16];
        for (size_t r = 0; r < kBlock; ++r)
          for (size_t c = 0; c < kBlock; ++c) {
            const size_t oh = br * kBlock + r, ow = bc * kBlock + c;
            const bool mine = oh >= call.row_begin && oh < call.row_end && ow < out_w;
            const size_t at = (oh * out_w + ow) * cout + oc0;
            out[r * 4 + c] = mine ? call.y + (oh * out_w + ow) * y_stride + oc0 : nullptr;
            residual[r * 4 + c] = mine && e.residual ? e.residual + at : nullptr;
          }
        tf.output(mt, cols, e.bias ? e.bias + oc0 : nullptr, e.residual ? residual : nullptr, e.activation, out);
      }
    }
  }
}

}  // namespace grove::kernels
