// Tester for the channels-last depthwise kernel (kernels/dwconv_nhwc.h): every ISA this CPU
// has, against a double-precision oracle. Channel counts cover every vector remainder of 16,
// 8 and 4 lanes; planes from 1 pixel wide, strides 1 and 2, pads 0..3, dilation 2, 1x1 to 7x7
// and non-square kernels, the fused residual and activations. A call over part of the rows or
// channels must write exactly its part, and the plane cut at every row and at whole vectors of
// channels must give the same bits as one call (tiles must not change results).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "kernels/dwconv_nhwc.h"
#include "random_values.h"
#include "supported_isas.h"

namespace grove::kernels {
namespace {

struct Case {
  size_t channels, in_h, in_w, kernel_h, kernel_w, stride, pad, dilation;
  bool residual = false;
  ActivationParams activation = {};
};

size_t lanes_of(Isa isa) { return isa == Isa::avx512 ? 16 : isa == Isa::avx2 ? 8 : 4; }

struct Problem {
  Case c;
  Conv2dShape s;
  std::vector<float> x, w, packed, bias, residual;

  Problem(const Case& k, unsigned seed) : c(k) {
    s.in_h = c.in_h, s.in_w = c.in_w, s.kernel_h = c.kernel_h, s.kernel_w = c.kernel_w;
    s.stride_h = s.stride_w = c.stride, s.dilation_h = s.dilation_w = c.dilation, s.pad_top = s.pad_left = c.pad;
    s.out_h = (c.in_h + 2 * c.pad - (c.kernel_h - 1) * c.dilation - 1) / c.stride + 1;
    s.out_w = (c.in_w + 2 * c.pad - (c.kernel_w - 1) * c.dilation - 1) / c.stride + 1;
    x = random_values(c.in_h * c.in_w * c.channels, seed);
    w = random_values(c.channels * c.kernel_h * c.kernel_w, seed + 1);  // [C, 1, kh, kw]
    packed.resize(w.size());
    pack_dwconv_nhwc_weights(w.data(), c.channels, c.kernel_h * c.kernel_w, packed.data());
    bias = random_values(c.channels, seed + 2);
    residual = random_values(s.out_h * s.out_w * c.channels, seed + 3);
  }

  size_t outputs() const { return s.out_h * s.out_w * c.channels; }

  double expected(size_t oy, size_t ox, size_t ch) const {
    double acc = bias[ch];
    for (size_t ki = 0; ki < s.kernel_h; ++ki)
      for (size_t kj = 0; kj < s.kernel_w; ++kj) {
        const long iy = long(oy * s.stride_h + ki * s.dilation_h) - long(s.pad_top);
        const long ix = long(ox * s.stride_w + kj * s.dilation_w) - long(s.pad_left);
        if (iy < 0 || ix < 0 || iy >= long(s.in_h) || ix >= long(s.in_w)) continue;
        acc += double(w[(ch * s.kernel_h + ki) * s.kernel_w + kj]) * x[(size_t(iy) * s.in_w + size_t(ix)) * c.channels + ch];
      }
    if (c.residual) acc += residual[(oy * s.out_w + ox) * c.channels + ch];
    return apply_activation(float(acc), c.activation);
  }

  void run(Isa isa, std::vector<float>& y, size_t row_begin, size_t row_end, size_t c_begin, size_t c_end) const {
    DwConvNhwcCall call;
    call.x = x.data(), call.w = packed.data(), call.bias = bias.data(), call.y = y.data();
    call.residual = c.residual ? residual.data() : nullptr;
    call.channels = c.channels, call.c_begin = c_begin, call.c_end = c_end;
    call.row_begin = row_begin, call.row_end = row_end;
    call.shape = s, call.activation = c.activation;
    dwconv2d_nhwc(call, isa);
  }
};

constexpr float kSentinel = 1234.5f;

void check_case(Isa isa, const Case& c, unsigned seed) {
  const Problem p(c, seed);
  const std::string label = std::string(isa_name(isa)) + " C" + std::to_string(c.channels) + " in " +
                            std::to_string(c.in_h) + "x" + std::to_string(c.in_w) + " k " + std::to_string(c.kernel_h) +
                            "x" + std::to_string(c.kernel_w) + " s" + std::to_string(c.stride) + " p" +
                            std::to_string(c.pad) + " d" + std::to_string(c.dilation) + (c.residual ? " +residual" : "") +
                            " act " + std::to_string(int(c.activation.kind));
  std::vector<float> whole(p.outputs() + 1, kSentinel);  // one slack element catches writes past the end
  p.run(isa, whole, 0, p.s.out_h, 0, c.channels);
  ASSERT_EQ(whole.back(), kSentinel) << label << ": wrote past the output";
  const double tolerance = 1e-5 * double(c.kernel_h * c.kernel_w);
  for (size_t i = 0; i < p.outputs(); ++i) {
    const size_t ch = i % c.channels, pixel = i / c.channels;
    const double want = p.expected(pixel / p.s.out_w, pixel % p.s.out_w, ch);
    ASSERT_NEAR(whole[i], want, tolerance * std::max(1.0, std::fabs(want)))
        << label << " at pixel " << pixel << " channel " << ch;
  }
  // A part of the rows and channels writes that part only; the parts of a cut give the bits of one call.
  const size_t lanes = lanes_of(isa);
  for (size_t row_cut = 1; row_cut <= p.s.out_h; ++row_cut)
    for (size_t c_cut = lanes; c_cut <= c.channels; c_cut += lanes) {
      std::vector<float> part(whole.size(), kSentinel);
      p.run(isa, part, 0, row_cut, 0, c_cut);
      for (size_t i = 0; i < p.outputs(); ++i) {
        const bool inside = i / c.channels / p.s.out_w < row_cut && i % c.channels < c_cut;
        if (inside) ASSERT_EQ(part[i], whole[i]) << label << ": rows < " << row_cut << ", channels < " << c_cut;
        else ASSERT_EQ(part[i], kSentinel) << label << ": wrote outside rows < " << row_cut << ", channels < " << c_cut;
      }
      p.run(isa, part, row_cut, p.s.out_h, 0, c_cut);
      p.run(isa, part, 0, p.s.out_h, c_cut, c.channels);
      ASSERT_EQ(0, std::memcmp(part.data(), whole.data(), part.size() * sizeof(float))) << label << ": cut at row "
                                                                                          << row_cut << ", channel " << c_cut;
    }
}

TEST(DwConvNhwc, Kernel3x3EveryChannelRemainderWidthStridePad) {
  unsigned seed = 1;
  for (Isa isa : supported_isas())
    for (size_t channels : {1, 3, 8, 16, 21, 37})
      for (size_t stride : {1, 2})
        for (size_t pad : {0, 1})
          for (size_t w : {1, 2, 3, 5, 9, 12, 17, 20}) {
            if (w + 2 * pad < 3) continue;
            check_case(isa, {channels, 4, w, 3, 3, stride, pad, 1}, seed++);
          }
}

TEST(DwConvNhwc, OtherKernelsPadsDilations) {
  unsigned seed = 200;
  for (Isa isa : supported_isas())
    for (Case c : {Case{24, 9, 9, 5, 5, 1, 2, 1}, Case{19, 11, 13, 5, 5, 2, 2, 1}, Case{32, 6, 14, 3, 5, 1, 1, 1},
                   Case{17, 10, 11, 3, 3, 1, 2, 2}, Case{48, 9, 9, 3, 3, 2, 1, 2}, Case{33, 5, 7, 1, 1, 1, 0, 1},
                   Case{16, 6, 10, 3, 3, 1, 3, 1}, Case{20, 8, 8, 7, 7, 1, 3, 1}, Case{40, 7, 7, 3, 3, 1, 1, 1}})
      check_case(isa, c, seed++);
}

TEST(DwConvNhwc, FusedEpilogue) {
  const ActivationParams activations[] = {{Activation::identity}, {Activation::relu}, {Activation::clip, 0.0f, 0.5f},
                                          {Activation::hard_swish}};
  unsigned seed = 300;
  for (Isa isa : supported_isas())
    for (const ActivationParams& act : activations)
      for (bool residual : {false, true}) {
        Case c{21, 7, 9, 3, 3, 1, 1, 1};
        c.residual = residual;
        c.activation = act;
        check_case(isa, c, seed++);
      }
}

}  // namespace
}  // namespace grove::kernels
