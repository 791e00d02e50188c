// The driver of both channels-last Winograd forms: per chunk of output blocks, the input
// transform of every block into V, then per block of output channels one GEMM per position and
// the output transform with the epilogue.
#include "kernels/winograd_nhwc.h"

#include <algorithm>
#include <cstdint>
#include <string>

#include "grove/error.h"
#include "kernels/cpu_info.h"

namespace grove::kernels {

namespace {

constexpr size_t kMaxPatch = 36;  // pixels of F(4x4, 3x3)'s 6x6 patch, the larger form

// A quarter of this CPU's L2, in floats: the budget of V (positions x blocks x Cin) and, apart,
// of M (positions x blocks x channels), so both stay in L2 beside the U_t the GEMMs stream.
size_t quarter_l2_floats() {
  static const size_t floats = [] {
    const int64_t l2 = cpu_info().l2_bytes > 0 ? cpu_info().l2_bytes : int64_t{1} << 20;
    return size_t(l2) / 4 / sizeof(float);
  }();
  return floats;
}

// The floats from one position's block of V (or M) to the next: its own floats and one cache
// line more. Unpadded, a block of 4 KiB (16 blocks of 64 channels: a 14x14 plane) put a
// block's 36 positions 4 KiB apart, all in one set of L1: the input transform, writing the
// 36 positions of a block at once, ran about 3.5 times slower there than with 48 channels.
size_t padded_rows(size_t floats) { return floats + 16; }

// The message is built only when a check fails: the checks run on every tile.
void check_call(const WinogradNhwcForm& f, const WinogradNhwcCall& call, const PackedB* u, size_t cout, size_t cin) {
  auto fail = [&](const char* why) { return Error(std::string(f.name) + ": " + why); };
  const Conv2dShape& s = call.shape;
  if (s.kernel_h != 3 || s.kernel_w != 3 || s.stride_h != 1 || s.stride_w != 1 || s.dilation_h != 1 ||
      s.dilation_w != 1)
    throw fail("needs a 3x3 kernel, stride 1, dilation 1");
  if (s.channels != cin) throw fail("input channels differ from the weights'");
  if (call.oc_begin > call.oc_end || call.oc_end > cout) throw fail("channels past the weights");
  if (cout > 0 && call.oc_begin % u[0].nr != 0) throw fail("the first channel is not on a panel boundary");
  if (call.row_begin > call.row_end || call.row_end > s.out_h) throw fail("rows past the output");
  if (!call.x || !call.y) throw fail("null input or output");
  if (call.y_stride != 0 && call.y_stride < cout) throw fail("y's pixels overlap");
  for (size_t i = 0; call.kept_channels && i < call.kept; ++i)
    if (call.kept_channels[i] >= cin || (i > 0 && call.kept_channels[i] <= call.kept_channels[i - 1]))
      throw fail("kept channels must increase and stay below the input channels");
}

}  // namespace

void winograd_nhwc_conv(const WinogradNhwcForm& f, const WinogradNhwcCall& call, const PackedB* u, size_t cout,
                        size_t cin, Isa isa, WinogradNhwcScratch& s) {
  check_call(f, call, u, cout, cin);
  if (call.oc_begin == call.oc_end || call.row_begin == call.row_end) return;
  if (cin == 0) throw Error(std::string(f.name) + ": no input channels");
  const Conv2dShape& sh = call.shape;
  const size_t block = f.block, side = block + 2, positions = side * side;
  const size_t in_h = sh.in_h, in_w = sh.in_w, out_w = sh.out_w;
  const size_t y_stride = call.y_stride ? call.y_stride : cout;
  const size_t blocks_w = (out_w + block - 1) / block;
  const size_t br0 = call.row_begin / block, br1 = (call.row_end + block - 1) / block;
  // The blocks to compute, in row-major order; the call's outputs of every other block are 0.
  auto mine = [&](size_t oh, size_t ow) { return oh >= call.row_begin && oh < call.row_end && ow < out_w; };
  const size_t cols_all = call.oc_end - call.oc_begin;
  s.blocks.clear();
  for (size_t br = br0; br < br1; ++br)
    for (size_t bc = 0; bc < blocks_w; ++bc) {
      bool any = !call.computed;
      for (size_t r = 0; r < block && !any; ++r)
        for (size_t c = 0; c < block && !any; ++c) {
          const size_t oh = br * block + r, ow = bc * block + c;
          any = mine(oh, ow) && call.computed[oh * out_w + ow];
        }
      if (any) {
        s.blocks.push_back(uint32_t(br * blocks_w + bc));
        continue;
      }
      for (size_t r = 0; r < block; ++r)
        for (size_t c = 0; c < block; ++c)
          if (mine(br * block + r, bc * block + c))
            std::fill_n(call.y + ((br * block + r) * out_w + bc * block + c) * y_stride + call.oc_begin, cols_all, 0.0f);
    }
  const size_t total = s.blocks.size();
  if (total == 0) return;
  const GemmBlocking blocking = gemm_blocking(isa);
  // Blocks per chunk: V in a quarter of L2, in whole register tiles of rows; then output
  // channels per GEMM round: M in another quarter, in whole panels.
  const size_t fit = std::max(blocking.mr, quarter_l2_floats() / (positions * cin) / blocking.mr * blocking.mr);
  const size_t chunk = std::min(total, fit);
  const size_t channel_block =
      std::max(blocking.nr, quarter_l2_floats() / (positions * chunk) / blocking.nr * blocking.nr);
  const size_t most_cols = std::min(channel_block, call.oc_end - call.oc_begin);
  s.v.reserve(positions * padded_rows(chunk * cin));
  s.m.reserve(positions * padded_rows(chunk * most_cols));
  s.zeros.reserve(cin);
  std::fill_n(s.zeros.data(), cin, 0.0f);
  const float* zeros = s.zeros.data();
  const Epilogue& e = call.epilogue;
  // Pruned channels: skipped by the GEMMs, or zeroed in V where the kernel cannot skip them.
  const bool skip_steps = call.kept_channels && gemm_takes_k_steps(isa);
  s.pruned.clear();
  if (call.kept_channels && !skip_steps)
    for (size_t c = 0, i = 0; c < cin; ++c) {
      if (i < call.kept && call.kept_channels[i] == c) ++i;
      else s.pruned.push_back(uint32_t(c));
    }

  for (size_t b0 = 0; b0 < total; b0 += chunk) {
    const size_t nb = std::min(chunk, total - b0);
    const size_t v_rows = padded_rows(nb * cin);  // floats from one position's V_t to the next
    float* v = s.v.data();
    for (size_t i = 0; i < nb; ++i) {
      const size_t br = s.blocks[b0 + i] / blocks_w, bc = s.blocks[b0 + i] % blocks_w;
      const float* patch[kMaxPatch];
      float* out[kMaxPatch];
      for (size_t r = 0; r < side; ++r) {
        const int64_t ih = int64_t(br * block + r) - int64_t(sh.pad_top);
        for (size_t c = 0; c < side; ++c) {
          const int64_t iw = int64_t(bc * block + c) - int64_t(sh.pad_left);
          const size_t p = size_t(ih) * in_w + size_t(iw);
          const bool inside = ih >= 0 && ih < int64_t(in_h) && iw >= 0 && iw < int64_t(in_w) &&
                              (!call.kept_positions || call.kept_positions[p]);
          patch[r * side + c] = inside ? call.x + p * cin : zeros;
        }
      }
      for (size_t t = 0; t < positions; ++t) out[t] = v + t * v_rows + i * cin;
      f.input(patch, cin, out);
      for (size_t t = 0; t < positions; ++t)
        for (uint32_t c : s.pruned) out[t][c] = 0.0f;
    }
    for (size_t oc0 = call.oc_begin; oc0 < call.oc_end; oc0 += channel_block) {
      const size_t cols = std::min(channel_block, call.oc_end - oc0);
      const size_t m_rows = padded_rows(nb * cols);
      float* m = s.m.data();
      for (size_t t = 0; t < positions; ++t) {
        GemmCall g;
        g.m = nb;
        g.a = v + t * v_rows;
        g.a_stride = cin;
        g.n0 = oc0;
        g.n = cols;
        g.c = m + t * m_rows;
        g.c_stride = cols;
        if (skip_steps) g.k_steps = call.kept_channels, g.k_step_count = call.kept;
        gemm(g, u[t], s.gemm);
      }
      for (size_t i = 0; i < nb; ++i) {
        const size_t br = s.blocks[b0 + i] / blocks_w, bc = s.blocks[b0 + i] % blocks_w;
        const float* mt[kMaxPatch];
        for (size_t t = 0; t < positions; ++t) mt[t] = m + t * m_rows + i * cols;
        float* out[kMaxPatch];
        const float* residual[kMaxPatch];
        for (size_t r = 0; r < block; ++r)
          for (size_t c = 0; c < block; ++c) {
            const size_t oh = br * block + r, ow = bc * block + c;
            const bool write = mine(oh, ow), compute = write && (!call.computed || call.computed[oh * out_w + ow]);
            const size_t at = (oh * out_w + ow) * cout + oc0;
            float* to = write ? call.y + (oh * out_w + ow) * y_stride + oc0 : nullptr;
            if (write && !compute) std::fill_n(to, cols, 0.0f);
            out[r * block + c] = compute ? to : nullptr;
            residual[r * block + c] = compute && e.residual ? e.residual + at : nullptr;
          }
        f.output(mt, cols, e.bias ? e.bias + oc0 : nullptr, e.residual ? residual : nullptr, e.activation, out);
      }
    }
  }
}

}  // namespace grove::kernels
