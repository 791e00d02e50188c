// Memory-bound kernels against the time their bytes take at the measured memory bandwidth
// (issue 3's target: within 1.5x). Single thread.
//
//   build-x/bench/grove_bench_memory_bound [repetitions]
//
// 1. Bandwidth probe: y[i] = x[i] + 1 over two 256 MiB arrays (far past the last-level
//    cache), bytes = read x + write y (STREAM's convention: the write-allocate read of y is
//    not counted, so the probe does not flatter the kernels measured against it).
// 2. Depthwise 3x3 conv, every distinct depthwise layer of MobileNetV2 at 224x224, batch 1:
//    bytes = input + output planes (weights are negligible). A layer's planes fit in L2/L3,
//    so a kernel can beat the DRAM time; a ratio above 1.5 means the kernel is compute- or
//    latency-bound, not bandwidth-bound.
// Every number is the median of the repetitions; each layer is timed right after the others
// so machine load affects all alike.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <vector>

#include "kernels/aligned_buffer.h"
#include "kernels/dwconv.h"

namespace {

using namespace grove::kernels;
using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

void fill_random(AlignedFloats& v, unsigned seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  for (size_t i = 0; i < v.size(); ++i) v.data()[i] = dist(rng);
}

// GB/s of a streaming read+write pass over arrays much larger than the caches.
double measure_bandwidth(int repetitions) {
  const size_t count = (size_t(256) << 20) / sizeof(float);
  AlignedFloats x(count), y(count);
  fill_random(x, 1);
  fill_random(y, 2);
  std::vector<double> times;
  for (int r = 0; r < repetitions; ++r) {
    const auto start = Clock::now();
    const float* __restrict xs = x.data();
    float* __restrict ys = y.data();
    for (size_t i = 0; i < count; ++i) ys[i] = xs[i] + 1.0f;
    times.push_back(seconds_since(start));
  }
  if (y.data()[count / 2] == 12345.0f) std::puts("");  // keeps the loop observable
  return 2.0 * count * sizeof(float) / median(times) / 1e9;
}

struct DwLayer {
  size_t channels, in_hw, stride;
};

// MobileNetV2 (torchvision, 224x224): the depthwise 3x3 layers, one per distinct shape.
const DwLayer kMobileNetV2Depthwise[] = {
    {32, 112, 1},  {96, 112, 2},  {144, 56, 1}, {144, 56, 2}, {192, 28, 1},
    {192, 28, 2},  {384, 14, 1},  {576, 14, 1}, {576, 14, 2}, {960, 7, 1},
};

double time_dwconv_layer(const DwLayer& layer, int repetitions) {
  Conv2dShape s;
  s.channels = 1;
  s.in_h = s.in_w = layer.in_hw;
  s.kernel_h = s.kernel_w = 3;
  s.stride_h = s.stride_w = layer.stride;
  s.pad_top = s.pad_left = 1;
  s.out_h = s.out_w = (layer.in_hw + 2 - 3) / layer.stride + 1;
  const size_t in_plane = s.in_h * s.in_w, out_plane = s.out_h * s.out_w;
  AlignedFloats x(layer.channels * in_plane), w(layer.channels * 9), y(layer.channels * out_plane);
  fill_random(x, 3);
  fill_random(w, 4);
  std::vector<double> times;
  for (int r = 0; r < repetitions + 1; ++r) {  // the first pass warms the caches: dropped
    const auto start = Clock::now();
    for (size_t c = 0; c < layer.channels; ++c) {
      DwConv2dCall call;
      call.x = x.data() + c * in_plane;
      call.w = w.data() + c * 9;
      call.y = y.data() + c * out_plane;
      call.row_begin = 0;
      call.row_end = s.out_h;
      call.shape = s;
      dwconv2d(call);
    }
    if (r > 0) times.push_back(seconds_since(start));
  }
  return median(times);
}

}  // namespace

int main(int argc, char** argv) {
  const int repetitions = argc > 1 ? std::max(1, std::atoi(argv[1])) : 21;
  const double gbps = measure_bandwidth(std::max(3, repetitions / 4));
  std::printf("memory bandwidth (one thread, 256 MiB read + write): %.1f GB/s\n\n", gbps);
  std::printf("| depthwise 3x3 layer (C, H=W, stride) | time us | bytes/bandwidth us | ratio |\n");
  std::printf("|---|---:|---:|---:|\n");
  for (const DwLayer& layer : kMobileNetV2Depthwise) {
    const size_t out_hw = (layer.in_hw + 2 - 3) / layer.stride + 1;
    const double bytes = 4.0 * layer.channels * (layer.in_hw * layer.in_hw + out_hw * out_hw);
    const double t = time_dwconv_layer(layer, repetitions);
    const double t_bytes = bytes / (gbps * 1e9);
    std::printf("| %zu, %zu, s%zu | %.1f | %.1f | %.2f |\n", layer.channels, layer.in_hw, layer.stride, t * 1e6,
                t_bytes * 1e6, t / t_bytes);
  }
  return 0;
}
