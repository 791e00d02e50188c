// Tester for the channels-last row conv (kernels/conv_rows.h) against a double-precision oracle,
// on CPUs whose GEMM kernel reads A in place (AVX-512). Each case runs with every way of
// grouping the taps into microkernel calls: one tap per call (partial sums in y), a few, all
// of them (partial sums in registers) and the default; all must agree with the oracle, with
// output channels off the panel width, strides and dilations, several rows per call, the
// residual and an activation, and a kernel of more taps than one call adds up.
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <string>
#include <vector>

#include "grove/error.h"
#include "kernels/bf16.h"
#include "kernels/conv_rows.h"
#include "kernels/gemm.h"
#include "random_values.h"

namespace grove::kernels {
namespace {

struct Case {
  size_t channels, out_channels, kernel_h, kernel_w, stride_w, dilation_w, out_w, rows;
  bool residual, relu;
  size_t stride_h = 1;  // input rows from one output row's window to the next one's
  // The call's output channels [n0, n0 + n) (a tile's; n0 a multiple of the panel width,
  // n 0: to the last); the others must be left as they were.
  size_t n0 = 0, n = 0;
};

std::string name(const Case& c) {
  return std::to_string(c.channels) + "->" + std::to_string(c.out_channels) + " k" + std::to_string(c.kernel_h) + "x" +
         std::to_string(c.kernel_w) + " s" + std::to_string(c.stride_w) + " d" + std::to_string(c.dilation_w) + " w" +
         std::to_string(c.out_w) + " rows " + std::to_string(c.rows) + " row step " + std::to_string(c.stride_h) +
         " channels from " + std::to_string(c.n0) + (c.n ? " count " + std::to_string(c.n) : std::string());
}

// precision bf16: x is given as bf16 rows and the weights packed bf16 (AVX512-BF16); the oracle
// then multiplies the rounded operands.
// kept: only these channels count (ConvRowCall::kept_channels); the others hold NaN in x, which
// must never be read. listed: only these output positions are computed (ConvRowCall::outputs);
// the others must be left as they were. zero_share (with listed): about that share of the input
// pixels is zero and marked so (ConvRowCall::kept_pixels), so the taps that read them may be
// skipped.
void check(const Case& c, unsigned seed, Precision precision = Precision::f32, const std::vector<uint32_t>* kept = nullptr,
           const std::vector<uint32_t>* listed = nullptr, double zero_share = 0.0) {
  const bool bf16 = precision == Precision::bf16;
  auto operand = [&](float v) { return bf16 ? double(bf16_value(bf16_bits(v))) : double(v); };
  // Padded input rows: each output row steps stride_h input rows on, kernel row ki reads ki
  // rows further on.
  const size_t row_pixels = (c.out_w - 1) * c.stride_w + (c.kernel_w - 1) * c.dilation_w + 1;
  const size_t row_floats = row_pixels * c.channels, in_rows = (c.rows - 1) * c.stride_h + c.kernel_h;
  const size_t taps = c.kernel_h * c.kernel_w, k = taps * c.channels, m = c.out_channels;
  std::vector<float> x = random_values(in_rows * row_floats, seed);
  std::vector<bool> counts(c.channels, kept == nullptr);
  if (kept)
    for (uint32_t ch : *kept) counts[ch] = true;
  for (size_t i = 0; i < x.size(); ++i)
    if (!counts[i % c.channels]) x[i] = std::nanf("");
  std::vector<unsigned char> kept_pixels(in_rows * row_pixels, 1);
  std::mt19937 zeros(seed + 4);
  for (size_t p = 0; zero_share > 0 && p < kept_pixels.size(); ++p) {
    if (std::uniform_real_distribution<double>(0, 1)(zeros) >= zero_share) continue;
    kept_pixels[p] = 0;
    for (size_t ci = 0; ci < c.channels; ++ci)
      if (counts[ci]) x[p * c.channels + ci] = 0.0f;
  }
  ConvRowScratch scratch;
  const std::vector<float> w = random_values(k * m, seed + 1);  // k x m, k ordered (ki, kj, c)
  const std::vector<float> bias = random_values(m, seed + 2);
  const std::vector<float> residual = random_values(c.rows * c.out_w * m, seed + 3);
  const PackedB packed = pack_b(w.data(), k, m, m, BLayout::k_by_n, Isa::avx512, precision);
  std::vector<uint16_t> x_bits(x.size());
  for (size_t i = 0; i < x.size(); ++i) x_bits[i] = bf16_bits(x[i]);

  std::vector<double> expect(c.rows * c.out_w * m);
  for (size_t r = 0; r < c.rows; ++r)
    for (size_t o = 0; o < c.out_w; ++o)
      for (size_t n = 0; n < m; ++n) {
        double sum = bias[n];
        for (size_t ki = 0; ki < c.kernel_h; ++ki)
          for (size_t kj = 0; kj < c.kernel_w; ++kj)
            for (size_t ci = 0; ci < c.channels; ++ci)
              if (counts[ci]) sum += operand(x[(r * c.stride_h + ki) * row_floats + (o * c.stride_w + kj * c.dilation_w) * c.channels + ci]) *
                     operand(w[((ki * c.kernel_w + kj) * c.channels + ci) * m + n]);
        const size_t at = (r * c.out_w + o) * m + n;
        if (c.residual) sum += residual[at];
        expect[at] = c.relu ? std::max(sum, 0.0) : sum;
      }

  const size_t n0 = c.n0, n = c.n ? c.n : m - c.n0;
  for (size_t per_call : {size_t{1}, size_t{2}, taps, size_t{0}}) {
    std::vector<float> y(c.rows * c.out_w * m, 1234.5f);
    ConvRowCall call;
    if (bf16) call.x_bf16 = x_bits.data();
    else call.x = x.data();
    call.tap_row_floats = row_floats;
    call.channels = c.channels;
    call.kernel_h = c.kernel_h, call.kernel_w = c.kernel_w, call.stride_w = c.stride_w, call.dilation_w = c.dilation_w;
    call.out_w = c.out_w;
    call.rows = c.rows;
    call.row_step_floats = c.stride_h * row_floats;
    call.w = &packed;
    call.n0 = n0;
    call.n = n;
    call.y = y.data() + n0;
    call.y_stride = m;
    call.residual = c.residual ? residual.data() + n0 : nullptr;
    call.bias = bias.data() + n0;
    if (c.relu) call.activation.kind = Activation::relu;
    call.taps_per_call = per_call;
    if (kept) call.kept_channels = kept->data(), call.kept = kept->size();
    static const uint32_t none = 0;  // an empty list is not null: no output computed
    if (listed) call.outputs = listed->empty() ? &none : listed->data(), call.output_count = listed->size();
    if (zero_share > 0) call.kept_pixels = kept_pixels.data(), call.scratch = &scratch;
    conv_rows(call);
    std::vector<bool> computed(c.rows * c.out_w, listed == nullptr);
    if (listed)
      for (uint32_t q : *listed) computed[q] = true;
    for (size_t i = 0; i < y.size(); ++i) {
      // bf16: products exact in float, sums in float in another order than the oracle's.
      const double tol = (bf16 ? 2e-4 : 1e-4) * (1.0 + std::sqrt(double(k)));
      if (i % m < n0 || i % m >= n0 + n || !computed[i / m]) {
        ASSERT_EQ(y[i], 1234.5f) << name(c) << ", taps per call " << per_call << ": element " << i << " is not the call's";
        continue;
      }
      ASSERT_NEAR(y[i], expect[i], tol) << name(c) << ", taps per call " << per_call << ", element " << i;
    }
  }
}

TEST(ConvRows, EveryGroupingOfTapsMatchesTheOracle) {
  if (!conv_row_supported(active_isa(), Precision::f32)) GTEST_SKIP() << "no in-place A kernel on this CPU";
  const std::vector<Case> cases = {
      {16, 64, 3, 3, 1, 1, 55, 2, false, true},   // a SqueezeNet expand: blocks of 14 and a short one
      {5, 40, 3, 3, 2, 1, 9, 3, true, false},     // strided, channels off the panel width
      {4, 33, 3, 3, 1, 2, 7, 2, true, true},      // dilated
      {3, 8, 9, 9, 1, 1, 6, 1, false, false},     // 81 taps: more than one call adds up
      {64, 96, 1, 3, 1, 1, 30, 1, true, true},    // one kernel row, three panels
      // 7-wide rows, two to a tile: an odd count of rows, a strided row step, a 1x1 kernel
      {32, 64, 3, 3, 1, 1, 7, 7, true, true},
      {16, 40, 3, 3, 2, 1, 7, 4, false, false, 2},
      {8, 33, 1, 1, 1, 1, 7, 3, true, false, 3},
  };
  unsigned seed = 1;
  for (const Case& c : cases) check(c, seed += 10);
}

// Draws the generated tests' cases: channels, output channels (a panel of 16 or fewer runs on
// the narrow kernel, also as a wide conv's last panel or a tile's), kernel sizes, strides,
// dilations, row widths (7 and 14 wide rows are grouped across rows), rows, a tile's window of
// channels, the residual and the activation; and lists of kept channels.
struct CaseDraws {
  std::mt19937 rng;
  size_t pick(size_t lo, size_t hi) { return std::uniform_int_distribution<size_t>(lo, hi)(rng); }
  Case next() {
    static const size_t widths[] = {7, 14, 28, 1, 5, 13, 29, 56};
    Case c{};
    c.channels = pick(1, 40);
    c.out_channels = pick(0, 2) == 0 ? pick(1, 16) : pick(1, 80);
    c.kernel_h = pick(1, 3), c.kernel_w = pick(1, 3);
    c.stride_w = pick(1, 2), c.dilation_w = pick(1, 2);
    c.out_w = pick(0, 1) ? widths[pick(0, 2)] : widths[pick(3, 7)];
    c.rows = pick(1, 6);
    c.residual = pick(0, 1), c.relu = pick(0, 1);
    c.stride_h = pick(1, 2);
    if (c.out_channels > 32 && pick(0, 1)) {  // a tile's channels: from a panel boundary on
      c.n0 = 32 * pick(1, (c.out_channels - 1) / 32);
      c.n = pick(1, c.out_channels - c.n0);
    }
    return c;
  }
  // About two thirds of the channels, at least one.
  std::vector<uint32_t> kept_channels(size_t channels) {
    std::vector<uint32_t> kept;
    for (uint32_t ch = 0; ch < channels; ++ch)
      if (pick(0, 2) != 0) kept.push_back(ch);
    if (kept.empty()) kept.push_back(0);
    return kept;
  }
};

// Drawn cases, each with every grouping of taps; and the same over kept channels.
TEST(ConvRows, GeneratedCasesMatchTheOracle) {
  if (!conv_row_supported(active_isa(), Precision::f32)) GTEST_SKIP() << "no in-place A kernel on this CPU";
  CaseDraws draws{std::mt19937(20261205)};
  for (int i = 0; i < 60; ++i) {
    const Case c = draws.next();
    check(c, unsigned(100 + i));
    if (::testing::Test::HasFatalFailure()) return;
    if (c.channels > 1 && i % 3 == 0) {
      const std::vector<uint32_t> kept = draws.kept_channels(c.channels);
      check(c, unsigned(200 + i), Precision::f32, &kept);
      if (::testing::Test::HasFatalFailure()) return;
    }
  }
}

// Listed outputs (a pruned conv's computed ones): each read where its window lies, the others
// untouched; over drawn cases, lists drawn at random (a few outputs, most of them, every one,
// none), with and without kept channels, and with more taps than one call adds up.
TEST(ConvRows, ListedOutputsAloneMatchTheOracle) {
  if (!conv_row_supported(active_isa(), Precision::f32)) GTEST_SKIP() << "no in-place A kernel on this CPU";
  CaseDraws draws{std::mt19937(20261206)};
  for (int i = 0; i < 60; ++i) {
    Case c = draws.next();
    if (i == 0) c.kernel_h = c.kernel_w = 9;  // 81 taps: two calls accumulate in the stack tile
    const size_t share = draws.pick(0, 3);    // of 4: a quarter to every output; 0: none
    std::vector<uint32_t> listed;
    for (uint32_t q = 0; q < c.rows * c.out_w; ++q)
      if (draws.pick(1, 4) <= share) listed.push_back(q);
    check(c, unsigned(300 + i), Precision::f32, nullptr, &listed);
    if (::testing::Test::HasFatalFailure()) return;
    if (c.channels > 1 && i % 2 == 0) {
      const std::vector<uint32_t> kept = draws.kept_channels(c.channels);
      check(c, unsigned(400 + i), Precision::f32, &kept, &listed);
      if (::testing::Test::HasFatalFailure()) return;
    }
  }
}

// Listed outputs over an input with zero pixels marked (a pruned conv's map): a call whose
// outputs read enough zero pixels runs tap by tap over the taps that read kept ones, with its
// sums in the scratch. Drawn cases and lists, a quarter to three quarters of the pixels zero,
// with and without kept channels; a kernel of 81 taps stays in registers.
TEST(ConvRows, ListedOutputsSkipTheTapsOfZeroPixels) {
  if (!conv_row_supported(active_isa(), Precision::f32)) GTEST_SKIP() << "no in-place A kernel on this CPU";
  CaseDraws draws{std::mt19937(20261207)};
  for (int i = 0; i < 60; ++i) {
    Case c = draws.next();
    if (i == 0) c.kernel_h = c.kernel_w = 9;
    std::vector<uint32_t> listed;
    const size_t share = draws.pick(1, 4);  // of 4 outputs listed
    for (uint32_t q = 0; q < c.rows * c.out_w; ++q)
      if (draws.pick(1, 4) <= share) listed.push_back(q);
    const double zeros = 0.25 * double(draws.pick(1, 3));
    check(c, unsigned(500 + i), Precision::f32, nullptr, &listed, zeros);
    if (::testing::Test::HasFatalFailure()) return;
    if (c.channels > 1 && i % 2 == 0) {
      const std::vector<uint32_t> kept = draws.kept_channels(c.channels);
      check(c, unsigned(600 + i), Precision::f32, &kept, &listed, zeros);
      if (::testing::Test::HasFatalFailure()) return;
    }
  }
}

TEST(ConvRows, ListedOutputsMustIncrease) {
  if (!conv_row_supported(active_isa(), Precision::f32)) GTEST_SKIP() << "no in-place A kernel on this CPU";
  const std::vector<float> x(4 * 9, 1.0f), w(9 * 4 * 8, 1.0f);
  const PackedB packed = pack_b(w.data(), 36, 8, 8, BLayout::k_by_n, Isa::avx512, Precision::f32);
  std::vector<float> y(4 * 8);
  const uint32_t backwards[] = {2, 1}, past[] = {0, 4};
  ConvRowCall call;
  call.x = x.data();
  call.channels = 4, call.kernel_h = 3, call.kernel_w = 3, call.out_w = 2, call.rows = 2;
  call.tap_row_floats = 4 * 4, call.row_step_floats = 4 * 4;
  call.w = &packed, call.n = 8, call.y = y.data(), call.y_stride = 8;
  call.outputs = backwards, call.output_count = 2;
  EXPECT_THROW(conv_rows(call), Error);
  call.outputs = past;
  EXPECT_THROW(conv_rows(call), Error);
}

// Pruned channels are skipped: never read (NaN in x), and the sum over the kept ones only.
TEST(ConvRows, KeptChannelsAloneAddUp) {
  if (!conv_row_supported(active_isa(), Precision::f32)) GTEST_SKIP() << "no in-place A kernel on this CPU";
  const std::vector<Case> cases = {
      {16, 64, 3, 3, 1, 1, 55, 2, false, true},
      {5, 40, 3, 3, 2, 1, 9, 3, true, false},
      {4, 33, 3, 3, 1, 2, 7, 2, true, true},
      {64, 96, 1, 3, 1, 1, 30, 1, true, true},
      {32, 64, 3, 3, 1, 1, 7, 7, true, true},
      {8, 33, 1, 1, 1, 1, 7, 3, true, false, 3},
  };
  unsigned seed = 5;
  for (const Case& c : cases) {
    std::vector<uint32_t> every_other, last;
    for (uint32_t ch = 0; ch < c.channels; ch += 2) every_other.push_back(ch);
    last.push_back(uint32_t(c.channels - 1));
    check(c, seed += 10, Precision::f32, &every_other);
    check(c, seed += 10, Precision::f32, &last);
  }
}

// The same on the AVX512-BF16 kernel, on cases of whole channel pairs (conv_rows refuses odd ones).
TEST(ConvRows, Bf16EveryGroupingOfTapsMatchesTheOracleOnRoundedOperands) {
  if (!conv_row_supported(active_isa(), Precision::bf16)) GTEST_SKIP() << "no AVX512-BF16 on this CPU";
  const std::vector<Case> cases = {
      {16, 64, 3, 3, 1, 1, 55, 2, false, true},  // blocks of 14 and a short one
      {6, 40, 3, 3, 2, 1, 9, 3, true, false},    // strided, channels off the panel width
      {4, 33, 3, 3, 1, 2, 7, 2, true, true},     // dilated
      {2, 8, 9, 9, 1, 1, 6, 1, false, false},    // 81 taps: more than one call adds up
      {64, 96, 1, 3, 1, 1, 30, 1, true, true},   // one kernel row, three panels
      {32, 64, 3, 3, 1, 1, 7, 7, true, true},    // 7-wide rows, two to a tile
      {16, 40, 3, 3, 2, 1, 7, 4, false, false, 2},
  };
  unsigned seed = 5;
  for (const Case& c : cases) check(c, seed += 10, Precision::bf16);
}

TEST(ConvRows, Bf16RefusesOddChannels) {
  if (!conv_row_supported(active_isa(), Precision::bf16)) GTEST_SKIP() << "no AVX512-BF16 on this CPU";
  const std::vector<float> w(3 * 9 * 32, 0.5f);
  const PackedB packed = pack_b(w.data(), 27, 32, 32, BLayout::k_by_n, Isa::avx512, Precision::bf16);
  std::vector<uint16_t> x(3 * 9 * 3, 0);
  std::vector<float> y(32 * 7);
  ConvRowCall call;
  call.x_bf16 = x.data();
  call.tap_row_floats = 27, call.channels = 3, call.kernel_h = call.kernel_w = 3, call.out_w = 7;
  call.row_step_floats = 27, call.w = &packed, call.n = 32, call.y = y.data(), call.y_stride = 32;
  EXPECT_THROW(conv_rows(call), grove::Error);
}

}  // namespace
}  // namespace grove::kernels
