// Tester for the depthwise conv kernel (kernels/dwconv.h): every ISA this CPU has, against
// a double-precision oracle, over plane sizes that cover every vector remainder (1 .. past
// two 16-lane vectors), 3x3 / 5x5 / non-square kernels, strides 1 and 2, pads 0..2,
// dilation 1 and 2. A second check computes the plane as two row ranges cut at every row
// and wants the exact same bits as one call: tiles cut by rows must not change results.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "kernels/dwconv.h"
#include "random_values.h"
#include "supported_isas.h"

namespace grove::kernels {
namespace {

struct DwCase {
  size_t in_h, in_w, kernel_h, kernel_w, stride, pad, dilation;
  bool residual = false;
  ActivationParams activation = {};
};

// The activations in double, for the oracle (the kernels use float).
double activate(double x, const ActivationParams& a) {
  switch (a.kind) {
    case Activation::identity: return x;
    case Activation::relu: return std::max(x, 0.0);
    case Activation::clip: return std::min(std::max(x, double(a.alpha)), double(a.beta));
    case Activation::leaky_relu: return x >= 0 ? x : a.alpha * x;
    case Activation::sigmoid: return 1.0 / (1.0 + std::exp(-x));
    case Activation::hard_sigmoid: return std::max(0.0, std::min(1.0, a.alpha * x + a.beta));
    case Activation::hard_swish: return x * std::max(0.0, std::min(1.0, x / 6 + 0.5));
    case Activation::gelu_erf: return 0.5 * x * (1 + std::erf(x / std::sqrt(2.0)));
    case Activation::gelu_tanh: return 0.5 * x * (1 + std::tanh(std::sqrt(2 / M_PI) * (x + 0.044715 * x * x * x)));
    case Activation::swish: return x / (1 + std::exp(-double(a.alpha) * x));
  }
  return x;
}

Conv2dShape shape_of(const DwCase& c) {
  Conv2dShape s;
  s.channels = 1;
  s.in_h = c.in_h;
  s.in_w = c.in_w;
  s.kernel_h = c.kernel_h;
  s.kernel_w = c.kernel_w;
  s.stride_h = s.stride_w = c.stride;
  s.dilation_h = s.dilation_w = c.dilation;
  s.pad_top = s.pad_left = c.pad;
  const size_t span_h = (c.kernel_h - 1) * c.dilation + 1, span_w = (c.kernel_w - 1) * c.dilation + 1;
  s.out_h = (c.in_h + 2 * c.pad - span_h) / c.stride + 1;
  s.out_w = (c.in_w + 2 * c.pad - span_w) / c.stride + 1;
  return s;
}

// y[oh][ow] = act(bias + sum over taps inside the plane + residual), in double.
std::vector<double> oracle(const Conv2dShape& s, const std::vector<float>& x, const std::vector<float>& w, float bias,
                           const float* residual, const ActivationParams& activation) {
  std::vector<double> y(s.out_h * s.out_w);
  for (size_t oh = 0; oh < s.out_h; ++oh)
    for (size_t ow = 0; ow < s.out_w; ++ow) {
      double acc = bias;
      for (size_t kh = 0; kh < s.kernel_h; ++kh)
        for (size_t kw = 0; kw < s.kernel_w; ++kw) {
          const long ih = long(oh * s.stride_h + kh * s.dilation_h) - long(s.pad_top);
          const long iw = long(ow * s.stride_w + kw * s.dilation_w) - long(s.pad_left);
          if (ih < 0 || iw < 0 || ih >= long(s.in_h) || iw >= long(s.in_w)) continue;
          acc += double(w[kh * s.kernel_w + kw]) * x[size_t(ih) * s.in_w + size_t(iw)];
        }
      if (residual) acc += residual[oh * s.out_w + ow];
      y[oh * s.out_w + ow] = activate(acc, activation);
    }
  return y;
}

// Runs rows [row_begin, row_end) into y; the rest of y is left as it was.
void run_rows(Isa isa, const Conv2dShape& s, const std::vector<float>& x, const std::vector<float>& w, float bias,
              const float* residual, const ActivationParams& activation, std::vector<float>& y, size_t row_begin,
              size_t row_end) {
  DwConv2dCall call;
  call.x = x.data();
  call.w = w.data();
  call.bias = bias;
  call.y = y.data();
  call.row_begin = row_begin;
  call.row_end = row_end;
  call.shape = s;
  call.residual = residual;
  call.activation = activation;
  dwconv2d(call, isa);
}

void check_case(Isa isa, const DwCase& c, unsigned seed) {
  const Conv2dShape s = shape_of(c);
  const std::string label = std::string(isa_name(isa)) + " in " + std::to_string(c.in_h) + "x" +
                            std::to_string(c.in_w) + " k " + std::to_string(c.kernel_h) + "x" +
                            std::to_string(c.kernel_w) + " s" + std::to_string(c.stride) + " p" +
                            std::to_string(c.pad) + " d" + std::to_string(c.dilation) +
                            (c.residual ? " +residual" : "") + " act " + std::to_string(int(c.activation.kind));
  const std::vector<float> x = random_values(s.in_h * s.in_w, seed);
  const std::vector<float> w = random_values(s.kernel_h * s.kernel_w, seed + 1);
  const float bias = 0.25f;
  const std::vector<float> residual_plane = random_values(s.out_h * s.out_w, seed + 2);
  const float* residual = c.residual ? residual_plane.data() : nullptr;
  const float sentinel = 1234.5f;
  // One slack element after the plane catches writes past its end.
  std::vector<float> whole(s.out_h * s.out_w + 1, sentinel);
  run_rows(isa, s, x, w, bias, residual, c.activation, whole, 0, s.out_h);
  ASSERT_EQ(whole.back(), sentinel) << label << ": wrote past the output plane";
  const std::vector<double> expected = oracle(s, x, w, bias, residual, c.activation);
  const double tolerance = 1e-5 * double(s.kernel_h * s.kernel_w);
  for (size_t i = 0; i < expected.size(); ++i)
    ASSERT_NEAR(whole[i], expected[i], tolerance * std::max(1.0, std::fabs(expected[i])))
        << label << " at output " << i / s.out_w << "," << i % s.out_w;
  for (size_t cut = 1; cut < s.out_h; ++cut) {
    std::vector<float> split(whole.size(), sentinel);
    run_rows(isa, s, x, w, bias, residual, c.activation, split, 0, cut);
    run_rows(isa, s, x, w, bias, residual, c.activation, split, cut, s.out_h);
    ASSERT_EQ(0, std::memcmp(split.data(), whole.data(), split.size() * sizeof(float)))
        << label << ": rows cut at " << cut << " differ from one call";
  }
}

TEST(DwConv, Kernel3x3EveryWidthStridePad) {
  unsigned seed = 1;
  for (Isa isa : supported_isas())
    for (size_t stride : {1, 2})
      for (size_t pad : {0, 1})
        for (size_t w = 1; w <= 40; ++w) {
          if (w + 2 * pad < 3) continue;
          for (size_t h : {size_t(3), size_t(4), size_t(7)}) check_case(isa, {h, w, 3, 3, stride, pad, 1}, seed++);
        }
}

TEST(DwConv, Kernel3x3MobileNetPlanes) {
  unsigned seed = 100;
  for (Isa isa : supported_isas())
    for (size_t hw : {7, 14, 28, 56, 112})
      for (size_t stride : {1, 2}) check_case(isa, {hw, hw, 3, 3, stride, 1, 1}, seed++);
}

TEST(DwConv, OtherKernelsPadsDilations) {
  unsigned seed = 200;
  for (Isa isa : supported_isas())
    for (DwCase c : {DwCase{9, 9, 5, 5, 1, 2, 1}, DwCase{17, 20, 5, 5, 2, 2, 1}, DwCase{12, 33, 3, 5, 1, 1, 1},
                     DwCase{10, 19, 3, 3, 1, 2, 2}, DwCase{16, 16, 3, 3, 2, 1, 2}, DwCase{5, 31, 1, 1, 1, 0, 1},
                     DwCase{6, 18, 3, 3, 1, 2, 1}, DwCase{8, 8, 7, 7, 1, 3, 1}})
      check_case(isa, c, seed++);
}

TEST(DwConv, FusedEpilogueEveryPath) {
  const ActivationParams activations[] = {{Activation::identity}, {Activation::relu}, {Activation::clip, 0.0f, 0.5f},
                                          {Activation::hard_swish}, {Activation::sigmoid}, {Activation::swish, 1.0f, 0}};
  unsigned seed = 300;
  for (Isa isa : supported_isas())
    for (const ActivationParams& act : activations)
      for (bool residual : {false, true})
        // Same-padded stride 1 (the flat path), stride 2, and a dilated kernel (the portable loop).
        for (DwCase c : {DwCase{7, 7, 3, 3, 1, 1, 1}, DwCase{9, 21, 3, 3, 2, 1, 1}, DwCase{10, 19, 3, 3, 1, 2, 2},
                         DwCase{5, 18, 3, 3, 1, 0, 1}}) {
          c.residual = residual;
          c.activation = act;
          check_case(isa, c, seed++);
        }
}

}  // namespace
}  // namespace grove::kernels
