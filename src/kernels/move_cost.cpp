#include "kernels/move_cost.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <vector>

#include "kernels/gemm.h"
#include "kernels/im2col.h"
#include "kernels/transpose.h"

namespace grove::kernels {

namespace {

template <typename F>
double best_ns(F&& f) {
  double best = 1e300;
  for (int i = 0; i < 5; ++i) {
    auto t = std::chrono::steady_clock::now();
    f();
    best = std::min(best, std::chrono::duration<double, std::nano>(std::chrono::steady_clock::now() - t).count());
  }
  return best;
}

// Nanoseconds of the f32 GEMM of a 3x3 layer of 64 channels on a 16x16 plane (576 x 256 packed
// elements, 64 x 576 x 256 multiply-adds): small enough to stay in L2, big enough to reach the
// kernels' speed. Returns its FLOPs per nanosecond.
double gemm_flops_per_ns() {
  const size_t k = 64 * 9, pixels = 256, m = 64;
  std::vector<float> w(m * k, 0.25f), col(k * pixels, 0.5f), y(m * pixels);
  const PackedA a = pack_a(w.data(), m, k, k);
  const PackedB b = pack_b(col.data(), k, pixels, pixels, BLayout::k_by_n);
  GemmCall call;
  call.m = m;
  call.n = pixels;
  call.c = y.data();
  call.c_stride = pixels;
  return 2.0 * double(m * k * pixels) / std::max(best_ns([&] { gemm(call, a, 0, b); }), 1.0);
}

// Nanoseconds of one GEMM of a mid-network channels-last layer (pixels x output channels x
// k), small enough for L2, with B packed for `precision`.
double layer_gemm_ns(Precision precision) {
  const size_t m = 256, n = 128, k = 576;
  std::vector<float> a(m * k, 0.5f), w(k * n, 0.25f), y(m * n);
  const PackedB b = pack_b(w.data(), k, n, n, BLayout::k_by_n, active_isa(), precision);
  GemmScratch scratch;
  GemmCall call;
  call.m = m;
  call.a = a.data();
  call.a_stride = k;
  call.n = n;
  call.c = y.data();
  call.c_stride = n;
  return best_ns([&] { gemm(call, b, scratch); });
}

}  // namespace

double measure_transpose_flops() {
  // An NCHW activation of 128 channels on a 32x32 plane to NHWC: half a megabyte each way.
  const size_t channels = 128, pixels = 1024;
  std::vector<float> x(channels * pixels, 0.5f), y(channels * pixels);
  const double ns = best_ns([&] { transpose_4byte(x.data(), pixels, channels, pixels, y.data(), channels); });
  const double elements_per_ns = double(channels * pixels) / std::max(ns, 1.0);
  return std::exp2(std::round(std::log2(std::clamp(gemm_flops_per_ns() / elements_per_ns, 1.0, 1024.0))));
}

double measure_move_flops() {
  // The im2col of the layer gemm_flops_per_ns times.
  const Conv2dShape s{.channels = 64, .in_h = 16, .in_w = 16, .out_h = 16, .out_w = 16, .kernel_h = 3, .kernel_w = 3,
                      .pad_top = 1, .pad_left = 1};
  std::vector<float> x(s.channels * s.in_h * s.in_w, 0.5f);
  PackedB b;
  const double pack_ns = best_ns([&] { pack_im2col(b, x.data(), s, 0, 256); });
  const double elements_per_ns = double(s.channels * 9 * 256) / std::max(pack_ns, 1.0);
  return std::exp2(2 * std::round(std::log2(std::clamp(gemm_flops_per_ns() / elements_per_ns, 1.0, 1024.0)) / 2));
}

double measure_amx_flop_cost() {
  if (!precision_supported(Precision::bf16_amx, active_isa())) return 1.0;
  const double f32_ns = layer_gemm_ns(Precision::f32);
  const double amx_ns = layer_gemm_ns(Precision::bf16_amx);
  return std::exp2(std::round(std::log2(std::clamp(amx_ns / std::max(f32_ns, 1.0), 1.0 / 64, 1.0))));
}

double measure_bf16_dot_gain() {
  if (!precision_supported(Precision::bf16, active_isa())) return 0.0;
  const double f32_ns = layer_gemm_ns(Precision::f32);
  const double bf16_ns = layer_gemm_ns(Precision::bf16);
  return std::round(10 * std::clamp(f32_ns / std::max(bf16_ns, 1.0), 0.1, 100.0)) / 10;
}

}  // namespace grove::kernels
