// Tester for the blocked direct conv (kernels/conv_nchwc.h): every ISA this CPU has, both block
// widths (8 and 16 channels), against a double-precision oracle on the NCHW tensors. 1x1 to
// 7x7 and non-square kernels; strides 1 and 2 (and 1 by 3); pads 0 to 3 on each side; output
// widths that cover every pixel count of a register tile; one to three output blocks (the
// odd one on its own); the fused residual and activations. x is read in place where the conv
// has no padding and stride 1, and through pack_conv_nchwc_rows otherwise. A call over part
// of the rows and blocks writes exactly its part, and calls over any split give the bits of
// one call. The depthwise form (one group per channel) takes the same cases.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "kernels/conv_nchwc.h"
#include "random_values.h"
#include "supported_isas.h"

namespace grove::kernels {
namespace {

struct Case {
  size_t in_blocks, out_blocks, in_h, in_w, kernel_h, kernel_w, stride_h, stride_w, pad_top, pad_left, pad_bottom,
      pad_right;
  bool residual = false;
  ActivationParams activation = {};
  bool depthwise = false;  // one group per channel: in_blocks == out_blocks
};

constexpr float kSentinel = 1234.5f;

struct Problem {
  Case c;
  size_t b, cin, cout, out_h, out_w;
  std::vector<float> x, w, bias, residual;  // x and w as NCHW and OIHW; the residual blocked like y
  std::vector<float> x_blocked, packed;

  Problem(const Case& k, size_t block, unsigned seed) : c(k), b(block) {
    cin = c.in_blocks * b, cout = c.out_blocks * b;
    out_h = (c.in_h + c.pad_top + c.pad_bottom - c.kernel_h) / c.stride_h + 1;
    out_w = (c.in_w + c.pad_left + c.pad_right - c.kernel_w) / c.stride_w + 1;
    x = random_values(cin * c.in_h * c.in_w, seed);
    const size_t per_output = c.depthwise ? 1 : cin;
    w = random_values(cout * per_output * c.kernel_h * c.kernel_w, seed + 1);
    bias = random_values(cout, seed + 2);
    residual = random_values(cout * out_h * out_w, seed + 3);
    x_blocked.resize(x.size());
    for (size_t ch = 0; ch < cin; ++ch)
      for (size_t i = 0; i < c.in_h * c.in_w; ++i) x_blocked[((ch / b) * c.in_h * c.in_w + i) * b + ch % b] = x[ch * c.in_h * c.in_w + i];
    packed.resize(w.size());
    if (c.depthwise) pack_conv_nchwc_depthwise_weights(w.data(), cout, c.kernel_h, c.kernel_w, b, packed.data());
    else pack_conv_nchwc_weights(w.data(), cout, cin, c.kernel_h, c.kernel_w, b, packed.data());
  }

  size_t plane() const { return out_h * out_w; }
  // Where output channel oc, pixel (oy, ox) sits in y and the residual.
  size_t at(size_t oc, size_t oy, size_t ox) const { return ((oc / b) * plane() + oy * out_w + ox) * b + oc % b; }

  double expected(size_t oc, size_t oy, size_t ox) const {
    double acc = bias[oc];
    const size_t per_output = c.depthwise ? 1 : cin;
    for (size_t i = 0; i < per_output; ++i)
      for (size_t ky = 0; ky < c.kernel_h; ++ky)
        for (size_t kx = 0; kx < c.kernel_w; ++kx) {
          const size_t ic = c.depthwise ? oc : i;
          const long iy = long(oy * c.stride_h + ky) - long(c.pad_top), ix = long(ox * c.stride_w + kx) - long(c.pad_left);
          if (iy < 0 || ix < 0 || iy >= long(c.in_h) || ix >= long(c.in_w)) continue;
          acc += double(w[((oc * per_output + i) * c.kernel_h + ky) * c.kernel_w + kx]) *
                 x[(ic * c.in_h + size_t(iy)) * c.in_w + size_t(ix)];
        }
    if (c.residual) acc += residual[at(oc, oy, ox)];
    return apply_activation(float(acc), c.activation);
  }

  // Output rows [r0, r1) of blocks [ob0, ob1) into y (all blocks).
  void run(Isa isa, std::vector<float>& y, size_t r0, size_t r1, size_t ob0, size_t ob1) const {
    ConvNchwcCall call;
    call.block = b, call.in_blocks = c.in_blocks;
    std::vector<float> padded;
    const bool in_place = c.pad_top + c.pad_left + c.pad_bottom + c.pad_right == 0 && c.stride_w == 1;
    if (in_place) {
      call.x = x_blocked.data() + r0 * c.stride_h * c.in_w * b;
      call.x_block_stride = c.in_h * c.in_w * b, call.x_row_stride = c.in_w * b;
    } else {
      const size_t rows = (r1 - r0 - 1) * c.stride_h + c.kernel_h;
      const size_t phase = conv_nchwc_phase_pixels(out_w, c.kernel_w, c.stride_w);
      padded.assign(c.in_blocks * rows * c.stride_w * phase * b + 1, kSentinel);
      pack_conv_nchwc_rows(x_blocked.data(), c.in_blocks, c.in_h, c.in_w, b, long(r0 * c.stride_h) - long(c.pad_top), rows,
                           c.pad_left, c.stride_w, phase, padded.data());
      EXPECT_EQ(padded.back(), kSentinel) << "pack_conv_nchwc_rows wrote past its rows";
      call.x = padded.data();
      call.x_phase_stride = phase * b, call.x_row_stride = c.stride_w * phase * b, call.x_block_stride = rows * call.x_row_stride;
    }
    call.kernel_h = c.kernel_h, call.kernel_w = c.kernel_w, call.stride_h = c.stride_h, call.stride_w = c.stride_w;
    call.out_rows = r1 - r0, call.out_w = out_w, call.out_blocks = ob1 - ob0;
    call.w = packed.data() + ob0 * conv_nchwc_block_weights(c.depthwise ? 1 : cin, c.kernel_h, c.kernel_w, b);
    call.depthwise = c.depthwise;
    if (c.depthwise) call.x += ob0 * call.x_block_stride;  // output block i reads input block i
    call.bias = bias.data() + ob0 * b;
    const size_t first = (ob0 * plane() + r0 * out_w) * b;
    call.y = y.data() + first, call.residual = c.residual ? residual.data() + first : nullptr;
    call.y_block_stride = plane() * b;
    call.activation = c.activation;
    conv_nchwc(call, isa);
  }
};

std::string label(Isa isa, size_t b, const Case& c) {
  return std::string(isa_name(isa)) + " b" + std::to_string(b) + " " + std::to_string(c.in_blocks) + "->" +
         std::to_string(c.out_blocks) + " blocks " + std::to_string(c.in_h) + "x" + std::to_string(c.in_w) + " k" +
         std::to_string(c.kernel_h) + "x" + std::to_string(c.kernel_w) + " s" + std::to_string(c.stride_h) + "," +
         std::to_string(c.stride_w) + " p" + std::to_string(c.pad_top) + "," + std::to_string(c.pad_left) + "," +
         std::to_string(c.pad_bottom) + "," + std::to_string(c.pad_right);
}

void check(const Case& k, unsigned seed) {
  for (size_t b : {size_t(8), size_t(16)}) {
    const Problem p(k, b, seed);
    for (Isa isa : supported_isas()) {
      const std::string name = label(isa, b, k);
      std::vector<float> whole(p.cout * p.plane() + 1, kSentinel);
      p.run(isa, whole, 0, p.out_h, 0, k.out_blocks);
      ASSERT_EQ(whole.back(), kSentinel) << name << ": wrote past the output";
      for (size_t oc = 0; oc < p.cout; ++oc)
        for (size_t oy = 0; oy < p.out_h; ++oy)
          for (size_t ox = 0; ox < p.out_w; ++ox) {
            const double want = p.expected(oc, oy, ox);
            ASSERT_NEAR(whole[p.at(oc, oy, ox)], want, 2e-5 * (1 + std::fabs(want)))
                << name << " at channel " << oc << ", " << oy << "," << ox;
          }
      // A part writes only its part; the parts together give the bits of the whole call.
      const size_t row_cut = p.out_h / 2, block_cut = k.out_blocks / 2;
      std::vector<float> parts(whole.size(), kSentinel);
      p.run(isa, parts, row_cut, p.out_h, block_cut, k.out_blocks);
      for (size_t oc = 0; oc < p.cout; ++oc)
        for (size_t oy = 0; oy < p.out_h; ++oy) {
          const bool inside = oy >= row_cut && oc / b >= block_cut;
          for (size_t ox = 0; ox < p.out_w; ++ox)
            if (!inside) ASSERT_EQ(parts[p.at(oc, oy, ox)], kSentinel) << name << ": wrote outside its part";
        }
      if (row_cut > 0) p.run(isa, parts, 0, row_cut, block_cut, k.out_blocks);
      if (block_cut > 0) p.run(isa, parts, 0, p.out_h, 0, block_cut);
      ASSERT_EQ(std::memcmp(parts.data(), whole.data(), whole.size() * sizeof(float)), 0) << name << ": split calls differ";
    }
  }
}

TEST(ConvNchwc, EveryWidthKernelStridePadOnEveryIsa) {
  unsigned seed = 1;
  for (auto [kh, kw] : {std::pair<size_t, size_t>{1, 1}, {3, 3}, {3, 5}})
    for (auto [sh, sw] : {std::pair<size_t, size_t>{1, 1}, {2, 2}, {1, 3}})
      for (size_t in_w : {1, 2, 5, 7, 13, 14, 25, 30}) {
        const size_t pad = kw / 2;
        if (in_w + 2 * pad < kw) continue;
        check({1 + seed % 2, 1 + seed % 3, 4 + kh, in_w, kh, kw, sh, sw, kh / 2, pad, kh / 2, pad}, seed);
        ++seed;
      }
}

TEST(ConvNchwc, WidthsPastOneRegisterTileInPlace) {
  // Unpadded stride-1 convs read x in place: every pixel count to two register tiles and more.
  for (size_t in_w = 1; in_w <= 27; ++in_w) check({2, 3, 3, in_w, 1, 1, 1, 1, 0, 0, 0, 0}, unsigned(100 + in_w));
  check({1, 2, 9, 56, 3, 3, 1, 1, 0, 0, 0, 0}, 130);
}

TEST(ConvNchwc, DepthwiseEveryWidthKernelStridePad) {
  unsigned seed = 300;
  for (auto [kh, kw] : {std::pair<size_t, size_t>{3, 3}, {5, 5}, {3, 5}, {1, 1}})
    for (auto [sh, sw] : {std::pair<size_t, size_t>{1, 1}, {2, 2}})
      for (size_t in_w : {1, 4, 7, 13, 14, 29}) {
        const size_t pad = kw / 2, blocks = 1 + seed % 3;
        if (in_w + 2 * pad < kw) continue;
        Case c{blocks, blocks, 3 + kh, in_w, kh, kw, sh, sw, kh / 2, pad, kh / 2, pad};
        c.depthwise = true;
        c.residual = seed % 2 == 0;
        c.activation = seed % 3 == 0 ? ActivationParams{Activation::clip, 0.0f, 6.0f} : ActivationParams{};
        check(c, seed++);
      }
}

TEST(ConvNchwc, AsymmetricPadsStemsAndEpilogues) {
  check({1, 2, 12, 23, 7, 7, 2, 2, 3, 3, 3, 3, true, {Activation::relu}}, 200);  // a 7x7 stride-2 stem, cut short
  check({2, 1, 9, 9, 3, 3, 2, 2, 0, 0, 1, 1, false, {Activation::clip, 0.0f, 0.5f}}, 201);
  check({1, 3, 6, 10, 2, 3, 1, 1, 1, 0, 0, 2, true, {Activation::leaky_relu, 0.1f}}, 202);
  check({3, 2, 7, 7, 3, 3, 1, 1, 1, 1, 1, 1, true, {Activation::sigmoid}}, 203);
  check({2, 2, 8, 8, 1, 1, 2, 2, 0, 0, 0, 0, true, {}}, 204);  // a ResNet downsample: 1x1 stride 2
}

}  // namespace
}  // namespace grove::kernels
