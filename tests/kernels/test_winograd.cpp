// Winograd tester, F(4x4, 3x3) NCHW and channels-last and F(2x2, 3x3) channels-last: every ISA this CPU supports; channel
// counts around the register tile (14 / 6 / 4 rows) and panel width; planes that are not
// multiples of 4; pads 0 and 1 (and uneven); calls covering row and channel windows; every
// epilogue. Compared with a direct convolution within 1e-4 of the layer's largest output.
#include <gtest/gtest.h>

#include <random>
#include <tuple>
#include <vector>

#include "graph/error.h"
#include "kernels/gemm.h"
#include "kernels/winograd_f2x3_nhwc.h"
#include "kernels/winograd_f4x3.h"
#include "kernels/winograd_f4x3_nhwc.h"
#include "winograd_tester.h"

namespace grove::kernels::testing {
namespace {

// The forms each case runs on: NCHW (winograd_f4x3.h) and channels-last (winograd_f4x3_nhwc.h,
// winograd_f2x3_nhwc.h), whose channel windows start on the ISA's panel boundary.
enum class Form { nchw, channels_last, channels_last_f2x3 };

class Winograd : public ::testing::TestWithParam<std::tuple<Isa, Form>> {
 protected:
  void SetUp() override {
    if (!isa_supported(isa())) GTEST_SKIP() << "CPU lacks " << isa_name(isa());
  }
  Isa isa() const { return std::get<0>(GetParam()); }
  bool channels_last() const { return std::get<1>(GetParam()) != Form::nchw; }
  bool small_blocks() const { return std::get<1>(GetParam()) == Form::channels_last_f2x3; }
  WinogradTester tester() const {
    return WinogradTester().isa(isa()).channels_last(channels_last()).small_blocks(small_blocks());
  }
  // Where a channel window may start: anywhere on NCHW (mid register tile), on a panel
  // boundary channels-last.
  size_t window_start(size_t nchw) const { return channels_last() ? gemm_blocking(isa()).nr : nchw; }
};

TEST_P(Winograd, OneBlock) { tester().cin(1).cout(1).height(4).width(4).pad(1).test(); }

TEST_P(Winograd, ChannelRemainders) {
  // Around the register tiles (14 / 6 / 4 rows), the vector widths (16 / 8 / 1) and the panel.
  for (size_t cin : {1, 3, 8, 15, 16, 17, 33})
    for (size_t cout : {1, 5, 13, 14, 15, 16, 17, 29, 31, 33})
      tester().cin(cin).cout(cout).height(6).width(7).seed(unsigned(cin * 64 + cout)).test();
}

TEST_P(Winograd, PlaneSizesAndPads) {
  for (size_t h = 1; h <= 10; ++h)
    for (size_t w : {1, 2, 3, 4, 5, 8, 9, 13})
      for (size_t p : {0, 1}) {
        if (h + 2 * p < 3 || w + 2 * p < 3) continue;
        tester().cin(3).cout(4).height(h).width(w).pad(p).seed(unsigned(h * 100 + w * 2 + p)).test();
      }
  tester().cin(5).cout(6).height(9).width(11).pads(0, 1, 1, 0).test();
  tester().cin(5).cout(6).height(9).width(11).pads(1, 0, 0, 2).test();
  tester().cin(5).cout(6).height(7).width(6).pads(2, 2, 2, 2).test();
}

TEST_P(Winograd, BlocksPastOneChunkAndPanel) {
  // NCHW: 34 x 30 output, 9 x 8 = 72 blocks, more than one chunk of 64 and two panels; many
  // rows of blocks per chunk, and a chunk that starts in the middle of a block row.
  // Channels-last: more blocks than one chunk of the V budget for deep inputs, and output
  // channels past one GEMM round.
  tester().cin(19).cout(70).height(34).width(30).pad(1).test();
  tester().cin(2).cout(3).height(70).width(70).pad(0).test();
  tester().cin(600).cout(40).height(30).width(17).pad(1).test();
  tester().cin(64).cout(300).height(30).width(30).pad(1).rows(8, 20).test();
}

TEST_P(Winograd, ChannelsPastOneKBlockAndManyOutputs) {
  tester().cin(520).cout(9).height(6).width(9).pad(1).test();
  tester().cin(8).cout(70).height(5).width(5).pad(1).test();
}

TEST_P(Winograd, RowAndChannelWindows) {
  const size_t c0 = window_start(3);
  for (size_t r0 : {0, 1, 3, 4, 5})
    for (size_t r1 : {r0 + 1, r0 + 3, r0 + 4, size_t(-1)})
      tester().cin(7).cout(c0 + 17).height(13).width(10).rows(r0, r1).channels(c0, c0 + 14).seed(unsigned(r0 * 10 + r1)).test();
  const size_t c1 = window_start(15);
  tester().cin(7).cout(c1 + 25).height(9).width(9).channels(c1, c1 + 1).test();
  tester().cin(7).cout(c1 + 25).height(9).width(9).channels(c1, c1 + 25).rows(8, 9).test();
}

TEST_P(Winograd, EveryEpilogue) {
  const ActivationParams activations[] = {
      {Activation::identity, 0, 0},       {Activation::relu, 0, 0},         {Activation::clip, 0.0f, 6.0f},
      {Activation::clip, -0.5f, 0.25f},   {Activation::leaky_relu, 0.1f, 0}, {Activation::sigmoid, 0, 0},
      {Activation::hard_sigmoid, 0.2f, 0.5f}, {Activation::hard_swish, 0, 0}, {Activation::gelu_erf, 0, 0},
      {Activation::gelu_tanh, 0, 0},       {Activation::swish, 1.0f, 0},     {Activation::swish, 1.702f, 0},
  };
  for (const ActivationParams& a : activations)
    for (bool bias : {false, true})
      for (bool residual : {false, true})
        tester().cin(6).cout(17).height(7).width(10).bias(bias).residual(residual).activation(a.kind, a.alpha, a.beta)
            .rows(1, 7).test();
}

TEST_P(Winograd, DeepLayerAccuracy) {
  // ResNet-like depth: the error stays within the bound as Cin grows.
  const double worst = tester().cin(256).cout(16).height(14).width(14).pad(1).test();
  EXPECT_LT(worst, 1e-4);
}

// Generated: a pruned conv's Winograd (kernels/winograd_nhwc.h kept_channels) equals the conv
// of x with the other channels 0, whose NaN values never reach an output: skipped by the
// GEMMs' k steps on AVX-512, zeroed after the input transform elsewhere. Input channels past one
// k block, none kept, all kept; output windows.
TEST_P(Winograd, KeptChannelsAloneAddUp) {
  if (!channels_last()) GTEST_SKIP() << "kept channels are channels-last";
  std::mt19937 rng(59);
  for (int i = 0; i < 24; ++i) {
    const size_t cin = i == 0 ? 600 : 1 + rng() % 70, cout = 1 + rng() % 40, h = 3 + rng() % 12, w = 3 + rng() % 12;
    std::vector<uint32_t> kept;
    const unsigned share = i == 1 ? 0 : i == 2 ? 100 : 10 + rng() % 80;  // percent of channels kept
    for (uint32_t c = 0; c < cin; ++c)
      if (rng() % 100 < share) kept.push_back(c);
    const size_t c0 = rng() % 2 ? window_start(0) : 0, oc1 = c0 + 1 + rng() % 20;
    tester().cin(cin).cout(std::max(cout, oc1)).height(h).width(w).pad(rng() % 2).bias(i % 2).residual(i % 3 == 0)
        .activation(Activation::relu).channels(c0, oc1).rows(rng() % 2, size_t(-1)).kept_channels(kept).seed(unsigned(i))
        .test();
  }
}

// Generated: a pruned conv's positions (kernels/winograd_nhwc.h kept_positions, computed) as
// a pruned conv passes them, kept one by one or in square blocks on the output grid (Antidote's
// block=, where whole Winograd blocks are skipped): the pruned positions hold NaN and are never
// read, the outputs not computed are 0, the others the conv of x with the pruned positions 0.
TEST_P(Winograd, KeptPositionsAreReadAndComputedOutputsAloneWritten) {
  if (!channels_last()) GTEST_SKIP() << "kept positions are channels-last";
  std::mt19937 rng(61);
  for (int i = 0; i < 24; ++i) {
    const size_t cin = 1 + rng() % 40, cout = 1 + rng() % 40, h = 3 + rng() % 14, w = 3 + rng() % 14;
    const size_t pad = i % 4 == 3 ? 0 : 1, oh = h + 2 * pad - 2, ow = w + 2 * pad - 2;
    const size_t grain = i % 3 == 0 ? 1 : 2 + rng() % 4;  // positions kept one by one, or in blocks
    const unsigned share = i == 1 ? 0 : i == 2 ? 100 : 10 + rng() % 80;
    std::vector<unsigned char> kept_blocks((h / grain + 1) * (w / grain + 1));
    for (unsigned char& k : kept_blocks) k = rng() % 100 < share;
    std::vector<unsigned char> positions(h * w), computed(oh * ow);
    const size_t per_row = w / grain + 1;
    for (size_t p = 0; p < h * w; ++p) positions[p] = kept_blocks[p / w / grain * per_row + p % w / grain];
    for (size_t q = 0; q < oh * ow; ++q) {  // centred on a kept position, as computed_outputs says
      const size_t ch = q / ow + 1 - pad, cw = q % ow + 1 - pad;
      computed[q] = ch < h && cw < w && positions[ch * w + cw];
    }
    std::vector<uint32_t> kept;
    for (uint32_t c = 0; c < cin; ++c)
      if (rng() % 4) kept.push_back(c);
    const size_t c0 = rng() % 2 ? window_start(0) : 0, oc1 = c0 + 1 + rng() % 20;
    WinogradTester t = tester();
    t.cin(cin).cout(std::max(cout, oc1)).height(h).width(w).pad(pad).bias(i % 2).residual(i % 3 == 0)
        .activation(Activation::relu).channels(c0, oc1).rows(rng() % 3, size_t(-1)).kept_positions(positions)
        .computed(computed).seed(unsigned(i));
    if (i % 2) t.kept_channels(kept);
    t.test();
  }
}

TEST_P(Winograd, RejectsBadCalls) {
  const std::vector<float> weights(40 * 3 * 9, 1.0f), x(3 * 16, 1.0f);
  std::vector<float> y(40 * 16);
  const Conv2dShape shape{.channels = 3, .in_h = 4, .in_w = 4, .out_h = 4, .out_w = 4, .kernel_h = 3, .kernel_w = 3,
                          .pad_top = 1, .pad_left = 1};
  // Both forms refuse the same misfits; channels-last also a window off a panel boundary.
  auto expect_refusals = [&](auto& w, auto& scratch, auto call, auto run) {
    call.x = x.data();
    call.y = y.data();
    call.oc_end = w.cout;
    call.row_end = 4;
    call.shape = shape;
    EXPECT_NO_THROW(run(call, w, scratch));
    auto bad = call;
    bad.oc_end = w.cout + 1;
    EXPECT_THROW(run(bad, w, scratch), Error);
    bad = call;
    bad.shape.stride_h = 2;
    EXPECT_THROW(run(bad, w, scratch), Error);
    bad = call;
    bad.shape.channels = 4;
    EXPECT_THROW(run(bad, w, scratch), Error);
    bad = call;
    bad.row_end = 5;
    EXPECT_THROW(run(bad, w, scratch), Error);
    if (!channels_last()) return;
    bad = call;
    bad.oc_begin = 1;
    EXPECT_THROW(run(bad, w, scratch), Error);
  };
  if (small_blocks()) {
    WinogradF2x3NhwcWeights w;
    winograd_f2x3_nhwc_pack_weights(w, weights.data(), 40, 3, isa());
    WinogradNhwcScratch scratch;
    expect_refusals(w, scratch, WinogradNhwcCall{}, [](auto& c, auto& w, auto& s) { winograd_f2x3_nhwc_conv(c, w, s); });
  } else if (channels_last()) {
    WinogradF4x3NhwcWeights w;
    winograd_f4x3_nhwc_pack_weights(w, weights.data(), 40, 3, isa());
    WinogradNhwcScratch scratch;
    expect_refusals(w, scratch, WinogradNhwcCall{}, [](auto& c, auto& w, auto& s) { winograd_f4x3_nhwc_conv(c, w, s); });
  } else {
    WinogradF4x3Weights w;
    winograd_f4x3_pack_weights(w, weights.data(), 40, 3, isa());
    WinogradF4x3Scratch scratch;
    expect_refusals(w, scratch, WinogradF4x3Call{}, [](auto& c, auto& w, auto& s) { winograd_f4x3_conv(c, w, s); });
  }
}

INSTANTIATE_TEST_SUITE_P(IsasAndLayouts, Winograd,
                         ::testing::Combine(::testing::Values(Isa::scalar, Isa::avx2, Isa::avx512),
                                            ::testing::Values(Form::nchw, Form::channels_last, Form::channels_last_f2x3)),
                         [](const ::testing::TestParamInfo<std::tuple<Isa, Form>>& info) {
                           const Form f = std::get<1>(info.param);
                           return std::string(isa_name(std::get<0>(info.param))) +
                                  (f == Form::nchw ? "_nchw" : f == Form::channels_last ? "_channels_last" : "_channels_last_f2x3");
                         });

}  // namespace
}  // namespace grove::kernels::testing
