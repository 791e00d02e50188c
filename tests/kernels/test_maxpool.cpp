// Tester for the NCHW max pool rows (kernels/maxpool.h): every ISA this CPU has, bit-equal to
// the definition (the largest tap inside the plane; a NaN tap makes the window NaN, as
// docs/correctness.md has it), over widths that cover
// every vector remainder of 16, 8 and 4 lanes, kernels 1..5, strides 1..3 and pads 0..2, and
// calls over a part of the rows and columns, which must write that part only.
#include <gtest/gtest.h>

#include <array>
#include <cmath>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "kernels/maxpool.h"
#include "supported_isas.h"

namespace grove::kernels {
namespace {

struct Pool {
  size_t in_h, in_w, kernel, stride, pad;
  size_t out_h() const { return (in_h + 2 * pad - kernel) / stride + 1; }
  size_t out_w() const { return (in_w + 2 * pad - kernel) / stride + 1; }
};

float expected(const Pool& p, const std::vector<float>& x, size_t oy, size_t ox) {
  float best = std::numeric_limits<float>::lowest();
  for (size_t ky = 0; ky < p.kernel; ++ky)
    for (size_t kx = 0; kx < p.kernel; ++kx) {
      const long iy = long(oy * p.stride + ky) - long(p.pad), ix = long(ox * p.stride + kx) - long(p.pad);
      if (iy < 0 || ix < 0 || iy >= long(p.in_h) || ix >= long(p.in_w)) continue;
      const float v = x[size_t(iy) * p.in_w + size_t(ix)];
      best = v > best || v != v ? v : best;  // a NaN, once taken, fails every test and stays
    }
  return best;
}

constexpr float kSentinel = 1234.5f;

void check(Isa isa, const Pool& p, unsigned seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  std::vector<float> x(p.in_h * p.in_w);
  for (float& v : x) v = dist(rng);
  x[seed % x.size()] = std::nanf("");  // the windows over it are NaN
  x[(seed * 7 + 3) % x.size()] = -std::numeric_limits<float>::infinity();
  x[(seed * 13 + 5) % x.size()] = std::numeric_limits<float>::infinity();
  const size_t oh = p.out_h(), ow = p.out_w();
  const std::string label = std::string(isa_name(isa)) + " " + std::to_string(p.in_h) + "x" + std::to_string(p.in_w) +
                            " k" + std::to_string(p.kernel) + " s" + std::to_string(p.stride) + " p" + std::to_string(p.pad);
  std::vector<float> scratch(p.in_w + 1);
  for (const auto& [r0, r1, c0, c1] : {std::array<size_t, 4>{0, oh, 0, ow}, std::array<size_t, 4>{oh / 2, oh, 1, ow},
                                      std::array<size_t, 4>{0, (oh + 1) / 2, 0, ow / 2}}) {
    std::vector<float> y(oh * ow + 1, kSentinel);
    MaxPool2dRowsCall call;
    call.x = x.data(), call.y = y.data(), call.in_h = p.in_h, call.in_w = p.in_w, call.out_w = ow;
    call.kernel_h = call.kernel_w = p.kernel, call.stride_h = call.stride_w = p.stride;
    call.pad_top = call.pad_left = long(p.pad);
    call.row_begin = r0, call.row_end = r1, call.col_begin = c0, call.col_end = c1, call.scratch = scratch.data();
    max_pool2d_rows(call, isa);
    ASSERT_EQ(y.back(), kSentinel) << label << ": wrote past the plane";
    for (size_t oy = 0; oy < oh; ++oy)
      for (size_t ox = 0; ox < ow; ++ox) {
        const bool inside = oy >= r0 && oy < r1 && ox >= c0 && ox < c1;
        const float want = inside ? expected(p, x, oy, ox) : kSentinel, got = y[oy * ow + ox];
        ASSERT_TRUE(got == want || (std::isnan(got) && std::isnan(want))) << label << " at " << oy << "," << ox << " (rows " << r0 << ".." << r1
                                         << ", columns " << c0 << ".." << c1 << "): " << got << ", want " << want;
      }
  }
}

TEST(MaxPool2dRows, EveryWidthKernelStridePadOnEveryIsa) {
  unsigned seed = 1;
  for (Isa isa : supported_isas())
    for (size_t kernel : {1, 2, 3, 5})
      for (size_t stride : {1, 2, 3})
        for (size_t pad = 0; pad <= 2 && pad < kernel; ++pad)
          for (size_t w : {1, 2, 3, 5, 7, 8, 13, 14, 17, 28, 33, 40}) {
            if (w + 2 * pad < kernel) continue;
            check(isa, {4 + kernel, w, kernel, stride, pad}, seed++);
          }
}

// A channels-last run: 1 to 9 taps over channel counts that cover every vector remainder, one
// pixel or several (each pixel's taps shifted by x_step, its output y_step apart), bit-equal to
// the definition, with a NaN in one tap that makes its channel NaN, and nothing written between the
// pixels' channels or past the last.
TEST(MaxPoolNhwcRun, EveryChannelCountTapCountAndPixelCountOnEveryIsa) {
  std::mt19937 rng(7);
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  for (Isa isa : supported_isas())
    for (size_t taps : {0, 1, 2, 4, 9})
      for (size_t channels : {1, 3, 4, 7, 8, 15, 16, 17, 31, 33, 64})
        for (size_t pixels : {1, 3, 6}) {
          const size_t x_step = channels + 5, y_step = channels + 2;
          std::vector<ptrdiff_t> offsets;
          for (size_t t = 0; t < taps; ++t) offsets.push_back(ptrdiff_t(t * 3 * x_step + (t % 2) * 7));
          const size_t x_size = (taps ? size_t(offsets.back()) : 0) + pixels * x_step + channels;
          std::vector<float> x(x_size);
          for (float& v : x) v = dist(rng);
          if (taps) x[size_t(offsets[taps / 2]) + channels / 2] = std::nanf("");
          std::vector<float> y(pixels * y_step + 1, kSentinel);
          MaxPoolNhwcRun run;
          run.x = x.data(), run.offsets = offsets.data(), run.taps = taps, run.channels = channels;
          run.pixels = pixels, run.x_step = x_step, run.y = y.data(), run.y_step = y_step;
          max_pool_nhwc_run(run, isa);
          const std::string label = std::string(isa_name(isa)) + " taps " + std::to_string(taps) + " channels " +
                                    std::to_string(channels) + " pixels " + std::to_string(pixels);
          for (size_t p = 0; p < pixels; ++p) {
            for (size_t k = 0; k < channels; ++k) {
              float best = std::numeric_limits<float>::lowest();
              for (size_t t = 0; t < taps; ++t) {
                const float v = x[p * x_step + size_t(offsets[t]) + k];
                best = v > best || v != v ? v : best;
              }
              const float got = y[p * y_step + k];
              ASSERT_TRUE(got == best || (std::isnan(got) && std::isnan(best))) << got << " vs " << best << " " << label << " pixel " << p << " at " << k;
            }
            for (size_t k = channels; k < y_step; ++k)
              ASSERT_EQ(y[p * y_step + k], kSentinel) << label << ": wrote past pixel " << p << "'s channels";
          }
        }
}

}  // namespace
}  // namespace grove::kernels
