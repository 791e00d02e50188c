// lay_out_windows (ops/conv/window_rows.h), the GEMM rows of channels-last convs, against each
// tap read on its own: strides, dilations, pads on every side, runs of every copy size (a
// stem's 21 bytes, the 16-64 byte copies, longer memcpys), chunks that start and end
// mid-row, bytes and floats.
#include <gtest/gtest.h>

#include <random>

#include "ops/conv/window_rows.h"

namespace grove::tiling {
namespace {

template <class T>
void check_geometry(std::mt19937& rng, int64_t kernel, int64_t stride, int64_t dilation, int64_t pad, int64_t channels) {
  WindowGeometry g;
  const int64_t ih = 5 + static_cast<int64_t>(rng() % 9), iw = 5 + static_cast<int64_t>(rng() % 9);
  const int64_t extent = (kernel - 1) * dilation + 1;
  g.input = {ih, iw};
  g.kernel = {kernel, kernel};
  g.strides = {stride, stride};
  g.dilations = {dilation, dilation};
  g.pads_begin = {pad, pad};
  g.pads_end = {pad, pad};
  g.output = {(ih + 2 * pad - extent) / stride + 1, (iw + 2 * pad - extent) / stride + 1};
  if (g.output[0] < 1 || g.output[1] < 1) return;
  const int64_t images = 2, pixels = g.output[0] * g.output[1];
  std::vector<T> x(static_cast<size_t>(images * ih * iw * channels));
  for (auto& v : x) v = static_cast<T>(rng() % 200 + 1);
  const size_t k = static_cast<size_t>(kernel * kernel * channels), row = k + rng() % 5;
  const T pad_value = static_cast<T>(255);
  for (int64_t n = 0; n < images; ++n) {
    const int64_t first = static_cast<int64_t>(rng() % static_cast<uint32_t>(pixels));
    const int64_t count = 1 + static_cast<int64_t>(rng() % static_cast<uint32_t>(pixels - first));
    std::vector<T> out(3, T(9));
    lay_out_windows(x.data(), n, g, channels, first, count, pad_value, row, out);
    ASSERT_EQ(out.size(), static_cast<size_t>(count) * row);
    for (int64_t i = 0; i < count; ++i) {
      const int64_t oy = (first + i) / g.output[1], ox = (first + i) % g.output[1];
      for (int64_t ki = 0; ki < kernel; ++ki)
        for (int64_t kj = 0; kj < kernel; ++kj)
          for (int64_t c = 0; c < channels; ++c) {
            const int64_t iy = oy * stride - pad + ki * dilation, ix = ox * stride - pad + kj * dilation;
            const bool inside = iy >= 0 && iy < ih && ix >= 0 && ix < iw;
            const T want = inside ? x[static_cast<size_t>(((n * ih + iy) * iw + ix) * channels + c)] : pad_value;
            ASSERT_EQ(out[static_cast<size_t>(i) * row + static_cast<size_t>((ki * kernel + kj) * channels + c)], want)
                << "kernel " << kernel << " stride " << stride << " dilation " << dilation << " pad " << pad
                << " channels " << channels << " pixel " << first + i << " tap " << ki << "," << kj << "," << c;
          }
      for (size_t p = k; p < row; ++p) ASSERT_EQ(out[static_cast<size_t>(i) * row + p], T(0)) << "padding past k";
    }
  }
}

TEST(WindowRows, EveryTapIsTheInputPixelOrThePad) {
  std::mt19937 rng(3);
  for (int64_t kernel : {1, 2, 3, 7})
    for (int64_t stride : {1, 2, 3})
      for (int64_t dilation : {1, 2})
        for (int64_t pad : {0, 1, 3})
          for (int64_t channels : {1, 3, 4, 9, 64}) {
            check_geometry<uint8_t>(rng, kernel, stride, dilation, pad, channels);
            check_geometry<float>(rng, kernel, stride, dilation, pad, channels);
          }
}

}  // namespace
}  // namespace grove::tiling
