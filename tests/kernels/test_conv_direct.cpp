// Tester for the direct few-channel conv (kernels/conv_direct.h): every ISA this CPU has,
// against a double-precision oracle. 1 to 4 input channels; 1x1 to 7x7 and non-square
// kernels; strides 1 to 3 (different along rows and columns), pads 0 to 3 on each side;
// output widths that cover every vector remainder of 16, 8 and 4 lanes and every count of
// pixel vectors per register tile; output channel counts off the 4-channel block; the fused
// residual and activations. A call over part of the rows and channels must write exactly its
// part, and calls over any split of the rows and channels must give the bits of one call.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "kernels/conv_direct.h"
#include "random_values.h"
#include "supported_isas.h"

namespace grove::kernels {
namespace {

struct Case {
  size_t in_channels, out_channels, in_h, in_w, kernel_h, kernel_w, stride_h, stride_w, pad_top, pad_left, pad_bottom,
      pad_right;
  bool residual = false;
  ActivationParams activation = {};
};

constexpr float kSentinel = 1234.5f;

struct Problem {
  Case c;
  size_t out_h, out_w, taps;
  std::vector<float> x, w, bias, residual;

  Problem(const Case& k, unsigned seed) : c(k) {
    out_h = (c.in_h + c.pad_top + c.pad_bottom - c.kernel_h) / c.stride_h + 1;
    out_w = (c.in_w + c.pad_left + c.pad_right - c.kernel_w) / c.stride_w + 1;
    taps = c.in_channels * c.kernel_h * c.kernel_w;
    x = random_values(c.in_channels * c.in_h * c.in_w, seed);
    w = random_values(c.out_channels * taps, seed + 1);
    bias = random_values(c.out_channels, seed + 2);
    residual = random_values(c.out_channels * out_h * out_w, seed + 3);
  }

  size_t plane() const { return out_h * out_w; }

  double expected(size_t oc, size_t oy, size_t ox) const {
    double acc = bias[oc];
    for (size_t ic = 0; ic < c.in_channels; ++ic)
      for (size_t ky = 0; ky < c.kernel_h; ++ky)
        for (size_t kx = 0; kx < c.kernel_w; ++kx) {
          const long iy = long(oy * c.stride_h + ky) - long(c.pad_top), ix = long(ox * c.stride_w + kx) - long(c.pad_left);
          if (iy < 0 || ix < 0 || iy >= long(c.in_h) || ix >= long(c.in_w)) continue;
          acc += double(w[((oc * c.in_channels + ic) * c.kernel_h + ky) * c.kernel_w + kx]) *
                 x[(ic * c.in_h + size_t(iy)) * c.in_w + size_t(ix)];
        }
    if (c.residual) acc += residual[oc * plane() + oy * out_w + ox];
    return apply_activation(float(acc), c.activation);
  }

  // Output rows [r0, r1) of channels [oc0, oc1) into y (all planes).
  void run(Isa isa, std::vector<float>& y, size_t r0, size_t r1, size_t oc0, size_t oc1) const {
    ConvDirectRows rows;
    rows.in_channels = c.in_channels, rows.rows = (r1 - r0 - 1) * c.stride_h + c.kernel_h, rows.stride_w = c.stride_w;
    rows.row_floats = conv_direct_row_floats(out_w, c.kernel_w, c.stride_w);
    std::vector<float> padded(rows.in_channels * rows.rows * rows.stride_w * rows.row_floats, kSentinel);
    rows.data = padded.data();
    pack_conv_direct_rows(x.data(), c.in_h, c.in_w, long(r0 * c.stride_h) - long(c.pad_top), c.pad_left, rows);
    const size_t channels = oc1 - oc0;
    std::vector<float> packed((channels + kConvDirectChannels - 1) / kConvDirectChannels * kConvDirectChannels * taps);
    pack_conv_direct_weights(w.data() + oc0 * taps, channels, taps, packed.data());
    ConvDirectCall call;
    call.x = rows, call.w = packed.data(), call.bias = bias.data() + oc0;
    const size_t at = oc0 * plane() + r0 * out_w;
    call.y = y.data() + at, call.residual = c.residual ? residual.data() + at : nullptr;
    call.y_plane = plane(), call.channels = channels, call.out_rows = r1 - r0, call.out_w = out_w;
    call.kernel_h = c.kernel_h, call.kernel_w = c.kernel_w, call.stride_h = c.stride_h;
    call.activation = c.activation;
    conv_direct(call, isa);
  }
};

std::string label(Isa isa, const Case& c) {
  return std::string(isa_name(isa)) + " " + std::to_string(c.in_channels) + "->" + std::to_string(c.out_channels) + " " +
         std::to_string(c.in_h) + "x" + std::to_string(c.in_w) + " k" + std::to_string(c.kernel_h) + "x" +
         std::to_string(c.kernel_w) + " s" + std::to_string(c.stride_h) + "," + std::to_string(c.stride_w) + " p" +
         std::to_string(c.pad_top) + "," + std::to_string(c.pad_left) + "," + std::to_string(c.pad_bottom) + "," +
         std::to_string(c.pad_right);
}

void check(const Case& k, unsigned seed) {
  const Problem p(k, seed);
  for (Isa isa : supported_isas()) {
    const std::string name = label(isa, k);
    std::vector<float> whole(p.c.out_channels * p.plane() + 1, kSentinel);
    p.run(isa, whole, 0, p.out_h, 0, p.c.out_channels);
    ASSERT_EQ(whole.back(), kSentinel) << name << ": wrote past the output";
    for (size_t oc = 0; oc < p.c.out_channels; ++oc)
      for (size_t oy = 0; oy < p.out_h; ++oy)
        for (size_t ox = 0; ox < p.out_w; ++ox) {
          const double want = p.expected(oc, oy, ox);
          ASSERT_NEAR(whole[oc * p.plane() + oy * p.out_w + ox], want, 1e-5 * (1 + std::fabs(want)))
              << name << " at channel " << oc << ", " << oy << "," << ox;
        }
    // A part writes only its part; the parts together give the bits of the whole call.
    const size_t row_cut = p.out_h / 2, channel_cut = std::min<size_t>(p.c.out_channels, 3);
    std::vector<float> parts(whole.size(), kSentinel);
    p.run(isa, parts, row_cut, p.out_h, channel_cut, p.c.out_channels);
    for (size_t oc = 0; oc < p.c.out_channels; ++oc)
      for (size_t oy = 0; oy < p.out_h; ++oy) {
        const bool inside = oy >= row_cut && oc >= channel_cut;
        for (size_t ox = 0; ox < p.out_w; ++ox)
          if (!inside) ASSERT_EQ(parts[oc * p.plane() + oy * p.out_w + ox], kSentinel) << name << ": wrote outside its part";
      }
    if (row_cut > 0) p.run(isa, parts, 0, row_cut, channel_cut, p.c.out_channels);
    if (channel_cut > 0) p.run(isa, parts, 0, p.out_h, 0, channel_cut);
    ASSERT_EQ(std::memcmp(parts.data(), whole.data(), whole.size() * sizeof(float)), 0) << name << ": split calls differ";
  }
}

TEST(ConvDirect, EveryWidthKernelStridePadOnEveryIsa) {
  unsigned seed = 1;
  for (size_t in_channels : {1, 3, 4})
    for (auto [kh, kw] : {std::pair<size_t, size_t>{1, 1}, {3, 3}, {7, 7}, {3, 5}})
      for (auto [sh, sw] : {std::pair<size_t, size_t>{1, 1}, {2, 2}, {1, 3}})
        for (size_t in_w : {1, 5, 16, 30, 37, 111}) {
          const size_t pad = kw / 2;
          if (in_w + 2 * pad < kw) continue;
          check({in_channels, 6, 5 + kh, in_w, kh, kw, sh, sw, kh / 2, pad, kh / 2, pad}, seed++);
        }
}

TEST(ConvDirect, AsymmetricPadsChannelCountsAndEpilogues) {
  // The stem shapes of ResNet-50 and GoogLeNet (7x7 stride 2, pad 3) and SqueezeNet (3x3 stride 2, no pad), cut short.
  check({3, 9, 12, 40, 7, 7, 2, 2, 3, 3, 3, 3, true, {Activation::relu}}, 100);
  check({3, 5, 9, 47, 3, 3, 2, 2, 0, 0, 0, 0, false, {Activation::clip, 0.0f, 0.5f}}, 101);
  // Pads only after, only before; one output channel; every channel count to two blocks.
  check({2, 1, 6, 19, 3, 3, 1, 1, 0, 0, 2, 2, true}, 102);
  check({2, 8, 6, 19, 5, 3, 2, 1, 3, 2, 0, 0}, 103);
  for (size_t out_channels = 1; out_channels <= 9; ++out_channels)
    check({1, out_channels, 4, 21, 3, 3, 1, 1, 1, 1, 1, 1, true, {Activation::sigmoid}}, 104 + unsigned(out_channels));
}

}  // namespace
}  // namespace grove::kernels
