// Channels-last float convolutions: grove.internal ConvNhwc's tile rule against Conv's
// reference on rotated tensors, and the plan-time pass (passes/layout_f32.cpp) that puts
// chains of convs on it: what it converts, what it leaves NCHW, and that a channels-last plan
// computes the model's reference.
#include <gtest/gtest.h>

#include <limits>
#include <random>

#include "graph/node_decisions.h"
#include "kernels/bf16.h"
#include "kernels/conv_rows.h"
#include "kernels/cpu_info.h"
#include "kernels/gemm.h"
#include "ops/conv/channels_last.h"
#include "ops/conv_fused/conv_max_pool.h"
#include "ops/conv_fused/expand_depthwise.h"
#include "ops/op.h"
#include "ops/conv/tile_conv_winograd.h"
#include "plan_test_util.h"
#include "runtime/reference_executor.h"
#include "tiling_test_util.h"

namespace grove {
namespace {

using namespace grove::test;
using optest::NodeBuilder;

// Random x, W and bias (or none) for a ConvNhwc node, and a residual shaped like its y where
// the node fuses one (y's shape from the plain conv's reference).
std::vector<Tensor> conv_inputs(const Node& node, const Shape& x, const Shape& w, bool bias, bool residual,
                                uint32_t& seed) {
  std::vector<Tensor> in = {tiletest::random_f32(x, seed++), tiletest::random_f32(w, seed++),
                            bias ? tiletest::random_f32({w[0]}, seed++) : Tensor()};
  if (residual) {
    std::vector<const Tensor*> plain = {&in[0], &in[1], bias ? &in[2] : nullptr};
    Node conv = node;
    conv.inputs.resize(3);
    conv.decisions.epilogue = {};
    conv.decisions.conv = ConvPrimitive::unset;
    in.push_back(tiletest::random_f32(evaluate_node(conv, plain).at(0).shape(), seed++));
  }
  return in;
}

// Every tile grid the rule allows (rows, images, channels in panel widths), with and without
// prepared weights and with inputs poisoned outside `needs`, within float rounding of the
// reference. The cases take each way the rule lays windows out: 1x1 stride 1 straight from x,
// whole window rows, padded, strided and dilated taps, three input channels, more pixels
// than one GEMM call lays out (400 pixels of k = 576), more taps than one microkernel call
// adds up (a 9x9 kernel), and strided rows 4 KiB apart, which the copy pads apart.
TEST(ConvNhwc, TileRuleMatchesReference) {
  struct Case { Shape x, w; int64_t stride, pad, dilation; bool bias, relu, residual; };
  const std::vector<Case> cases = {
      {{2, 6, 5, 8}, {40, 8, 1, 1}, 1, 0, 1, true, false, false},
      {{1, 9, 7, 12}, {36, 12, 3, 3}, 1, 1, 1, true, true, true},
      {{1, 11, 9, 5}, {33, 5, 3, 3}, 2, 1, 1, false, false, false},
      {{1, 12, 12, 3}, {8, 3, 7, 7}, 2, 3, 1, true, true, false},
      {{2, 8, 9, 4}, {9, 4, 3, 3}, 1, 2, 2, true, false, true},
      {{1, 6, 6, 6}, {40, 6, 1, 1}, 2, 0, 1, true, false, true},
      {{1, 20, 20, 64}, {16, 64, 3, 3}, 1, 1, 1, true, true, false},
      {{1, 10, 40, 256}, {8, 256, 3, 3}, 1, 1, 1, true, true, true},  // several groups of padded rows
      {{1, 12, 11, 3}, {40, 3, 9, 9}, 1, 4, 1, true, true, true},      // 81 taps: two runs of the kernel
      {{1, 9, 8, 512}, {16, 512, 3, 3}, 2, 1, 1, true, true, false},   // 4 KiB steps: pixels padded apart
      {{1, 6, 7, 1024}, {32, 1024, 1, 1}, 2, 0, 1, true, false, true},
  };
  uint32_t seed = 40;
  for (const Case& c : cases) {
    NodeBuilder node("ConvNhwc", 13, c.residual ? 4 : 3);
    node.node.domain = kGroveDomain;
    node.ints("strides", {c.stride, c.stride}).ints("pads", {c.pad, c.pad, c.pad, c.pad});
    node.ints("dilations", {c.dilation, c.dilation});
    if (c.residual || c.relu)
      node.epilogue(c.residual ? (c.relu ? "Add+Relu" : "Add") : "Relu", c.relu ? FusedActivation::relu : FusedActivation::none);
    const auto stats = tiletest::check_tiling(node, conv_inputs(node, c.x, c.w, c.bias, c.residual, seed), 1e-4);
    EXPECT_GT(stats.tiles, 2u) << shape_str(c.x);
  }
}

// The convs the layout pass leaves on Winograd (primitive winograd) and those a tuning record
// puts on F(2x2, 3x3) ("winograd_f2x3_nhwc"): every grid the rule allows (rows in whole blocks
// on large planes, output channels in panels, images), inputs poisoned outside `needs`, against
// the reference. The cases take uneven pads, planes that are not multiples of the block,
// channels that are not multiples of the vector, a residual, two images, and planes small
// enough that the rule cuts them by channels or images only.
TEST(ConvNhwc, WinogradTileRuleMatchesReference) {
  struct Case { Shape x, w; int64_t pad_top, pad_left; bool bias, relu, residual; };
  const std::vector<Case> cases = {
      {{1, 46, 45, 16}, {40, 16, 3, 3}, 1, 1, true, true, true},  // 12 x 12 blocks: cut by rows
      {{2, 26, 26, 24}, {33, 24, 3, 3}, 0, 1, true, false, false},
      {{1, 27, 31, 9}, {64, 9, 3, 3}, 1, 0, false, true, true},
      {{1, 9, 9, 70}, {70, 70, 3, 3}, 1, 1, true, true, false},  // one image, few channels a block: rows
      {{1, 9, 9, 16}, {160, 16, 3, 3}, 1, 1, false, true, true},  // many channels a block: channels only
  };
  uint32_t seed = 90;
  for (const ConvPrimitive form : {ConvPrimitive::winograd, ConvPrimitive::winograd_f2x3_nhwc})
  for (const Case& c : cases) {
    NodeBuilder node("ConvNhwc", 13, c.residual ? 4 : 3);
    node.node.domain = kGroveDomain;
    node.ints("pads", {c.pad_top, c.pad_left, 1, 1});
    node.primitive(form);
    if (c.residual || c.relu)
      node.epilogue(c.residual ? (c.relu ? "Add+Relu" : "Add") : "Relu", c.relu ? FusedActivation::relu : FusedActivation::none);
    const auto stats = tiletest::check_tiling(node, conv_inputs(node, c.x, c.w, c.bias, c.residual, seed), 1e-4);
    EXPECT_GT(stats.tiles, 1u) << conv_primitive_name(form) << " " << shape_str(c.x);
  }
}

// Which dims a small plane's Winograd conv may be cut along: rows of whole blocks for one
// image with few output channels per GEMM column (so the input is transformed once, not once per
// channel tile), output channels for one image with many, images (only) for several.
TEST(ConvNhwc, WinogradSmallPlaneCutFollowsChannelsPerBlock) {
  struct Case { Shape x, w; std::vector<int64_t> cuttable; };
  const std::vector<Case> cases = {
      {{1, 14, 14, 64}, {64, 64, 3, 3}, {1, 4, 0, 16}},      // 20 columns, 3.2 channels each
      {{1, 28, 28, 128}, {128, 128, 3, 3}, {1, 4, 0, 16}},   // 56 columns, 2.3
      {{1, 14, 14, 256}, {256, 256, 3, 3}, {1, 0, 0, 16}},   // 12.8
      {{2, 14, 14, 64}, {64, 64, 3, 3}, {1, 0, 0, 0}},       // two images
      {{1, 56, 56, 256}, {256, 256, 3, 3}, {1, 4, 0, 16}},   // a large plane: rows anyway
  };
  for (const Case& c : cases) {
    NodeBuilder node("ConvNhwc", 13, 3);
    node.node.domain = kGroveDomain;
    node.ints("pads", {1, 1, 1, 1});
    node.primitive(ConvPrimitive::winograd);
    uint32_t seed = 5;
    const std::vector<Tensor> inputs = conv_inputs(node, c.x, c.w, true, false, seed);
    std::vector<ValueInfo> infos;
    for (const Tensor& t : inputs) infos.push_back(ValueInfo{t.dtype(), t.shape(), &t, true});
    const TileRule* rule = find_tile_rule(node);
    ASSERT_NE(rule, nullptr);
    std::vector<int64_t> want = c.cuttable;
    if (want[3] > 0) want[3] = int64_t(kernels::gemm_blocking(kernels::active_isa()).nr);
    EXPECT_EQ(rule->cuttable(node, infos, infer_node(node, infos)), want) << shape_str(c.x) << " " << shape_str(c.w);
  }
}

// A stem that reads its image as NCHW (Decisions::x_nchw, made by the layout pass on the row path):
// every grid against the reference, inputs poisoned outside `needs` (whole channel planes,
// the rows the windows reach). Elsewhere than on the row path the rule runs the reference.
TEST(ConvNhwc, StemReadingNchwMatchesReference) {
  struct Case { Shape x, w; int64_t stride, pad; bool bias, relu, residual; };
  const std::vector<Case> cases = {
      {{1, 3, 23, 21}, {32, 3, 7, 7}, 2, 3, true, true, false},
      {{2, 3, 17, 19}, {40, 3, 3, 3}, 2, 1, false, true, true},
      {{1, 4, 12, 13}, {16, 4, 3, 3}, 1, 1, true, false, false},
  };
  uint32_t seed = 70;
  for (const Case& c : cases) {
    NodeBuilder node("ConvNhwc", 13, c.residual ? 4 : 3);
    node.node.domain = kGroveDomain;
    node.ints("strides", {c.stride, c.stride}).ints("pads", {c.pad, c.pad, c.pad, c.pad});
    node.node.decisions.x_nchw = true;
    if (c.residual || c.relu)
      node.epilogue(c.residual ? (c.relu ? "Add+Relu" : "Add") : "Relu", c.relu ? FusedActivation::relu : FusedActivation::none);
    const auto stats = tiletest::check_tiling(node, conv_inputs(node, c.x, c.w, c.bias, c.residual, seed), 1e-4);
    EXPECT_GT(stats.tiles, 1u) << shape_str(c.x);
  }
}

// A conv whose y is a channel slice of a Concat's buffer (Decisions::y_channel_offset, set by the
// planner where TileRule::writes_channel_slice says so): on every grid the rule allows, its
// channels of the wide buffer hold the reference and every other channel is untouched. The
// cases take each path: 1x1 in place, the row path (padded, strided), Winograd, a stem reading
// NCHW, and a region of part of the width, which the rule leaves to the reference.
TEST(ConvNhwc, WritesItsChannelsOfAConcatBuffer) {
  struct Case { Shape x, w; int64_t stride, pad; bool winograd, x_nchw, part_width; };
  const std::vector<Case> cases = {
      {{2, 6, 5, 8}, {40, 8, 1, 1}, 1, 0, false, false, false},
      {{1, 11, 9, 5}, {33, 5, 3, 3}, 2, 1, false, false, false},
      {{1, 9, 7, 12}, {36, 12, 3, 3}, 1, 1, false, false, false},
      {{1, 26, 25, 16}, {40, 16, 3, 3}, 1, 1, true, false, false},
      {{1, 3, 23, 21}, {32, 3, 7, 7}, 2, 3, false, true, false},
      {{1, 9, 7, 12}, {36, 12, 3, 3}, 1, 1, false, false, true},
  };
  const float sentinel = -12345.0f;
  uint32_t seed = 300;
  for (const Case& c : cases) {
    for (const int64_t offset : {int64_t{0}, int64_t{3}, int64_t{16}}) {
      NodeBuilder node("ConvNhwc", 13, 3);
      node.node.domain = kGroveDomain;
      node.ints("strides", {c.stride, c.stride}).ints("pads", {c.pad, c.pad, c.pad, c.pad});
      node.epilogue("Relu", FusedActivation::relu);
      if (c.winograd) node.primitive(ConvPrimitive::winograd);
      node.node.decisions.x_nchw = c.x_nchw;
      const std::vector<Tensor> inputs = conv_inputs(node, c.x, c.w, true, false, seed);
      const std::vector<const Tensor*> in = {&inputs[0], &inputs[1], &inputs[2]};
      std::vector<ValueInfo> infos;
      for (const Tensor& t : inputs) infos.push_back(ValueInfo{t.dtype(), t.shape(), &t, true});
      const Tensor want = evaluate_node(node, in).at(0);
      const TileRule* rule = find_tile_rule(node);
      ASSERT_TRUE(rule && rule->writes_channel_slice && rule->writes_channel_slice(node, infos));
      node.node.decisions.y_channel_offset = offset;
      const Shape& s = want.shape();
      const int64_t m = s[3], wide = offset + m + 5;
      std::vector<std::vector<int64_t>> grids = tiletest::grids_for(s, rule->cuttable(node, infos, infer_node(node, infos)));
      if (c.part_width) grids = {{s[0], s[1], (s[2] + 1) / 2, s[3]}};
      TileScratch scratch;
      for (const auto& sizes : grids) {
        Tensor y(DType::f32, {s[0], s[1], s[2], wide});
        for (float& v : y.span<float>()) v = sentinel;
        std::vector<Tensor*> out = {&y};
        for (const Region& tile : tiletest::grid(s, sizes)) rule->run_tile(node, in, out, tile, nullptr, scratch);
        const float* got = y.data<float>();
        const float* ref = want.data<float>();
        int failures = 0;
        for (int64_t p = 0; p < s[0] * s[1] * s[2] && failures < 3; ++p)
          for (int64_t ch = 0; ch < wide && failures < 3; ++ch) {
            const bool mine = ch >= offset && ch < offset + m;
            const float v = got[p * wide + ch];
            if (mine ? tiletest::close(v, ref[p * m + ch - offset], 1e-4) : v == sentinel) continue;
            ++failures;
            ADD_FAILURE() << shape_str(c.x) << " offset " << offset << " pixel " << p << " channel " << ch << ": got "
                          << v << (mine ? ", want " + std::to_string(ref[p * m + ch - offset]) : ", want untouched");
          }
      }
    }
  }  // A fused residual is read at y's offsets: such a conv keeps its own y.
  NodeBuilder fused("ConvNhwc", 13, 4);
  fused.node.domain = kGroveDomain;
  fused.epilogue("Add");
  const std::vector<Tensor> inputs = conv_inputs(fused, {1, 5, 5, 8}, {16, 8, 1, 1}, true, true, seed);
  std::vector<ValueInfo> infos;
  for (const Tensor& t : inputs) infos.push_back(ValueInfo{t.dtype(), t.shape(), &t, true});
  EXPECT_FALSE(find_tile_rule(fused)->writes_channel_slice(fused, infos));
}

// bf16 on each unit this CPU has (AVX512-BF16 dot products; AMX, whose windows go straight
// into the tile unit's A layout): every grid against the reference on bf16-rounded inputs,
// which the packing rounds again exactly, so only accumulation order differs. The cases take
// 1x1 in place, padded and strided windows, an odd k (the last pair and step half empty), a
// last tile of few pixels, and more pixels than one GEMM call lays out.
TEST(ConvNhwc, Bf16OnEachUnitMatchesReferenceOnRoundedInputs) {
  struct Case { Shape x, w; int64_t stride, pad; };
  const std::vector<Case> cases = {
      {{1, 6, 5, 16}, {40, 16, 1, 1}, 1, 0},
      {{1, 9, 7, 17}, {36, 17, 3, 3}, 1, 1},
      {{2, 11, 9, 16}, {33, 16, 3, 3}, 2, 1},
      {{1, 20, 20, 64}, {48, 64, 3, 3}, 1, 1},
  };
  auto rounded = [](Tensor t) {
    for (float& v : t.span<float>()) v = kernels::bf16_value(kernels::bf16_bits(v));
    return t;
  };
  int units = 0;
  for (const auto& [unit, precision] : {std::pair{NodePrecision::bf16, kernels::Precision::bf16},
                                        std::pair{NodePrecision::bf16_amx, kernels::Precision::bf16_amx}}) {
    if (!kernels::precision_supported(precision, kernels::active_isa())) continue;
    ++units;
    uint32_t seed = 140;
    for (const Case& c : cases) {
      SCOPED_TRACE(std::string(node_precision_name(unit)) + " " + shape_str(c.x) + " * " + shape_str(c.w));
      NodeBuilder node("ConvNhwc", 13, 3);
      node.node.domain = kGroveDomain;
      node.ints("strides", {c.stride, c.stride}).ints("pads", {c.pad, c.pad, c.pad, c.pad});
      node.epilogue("Relu", FusedActivation::relu).precision(unit);
      const std::vector<Tensor> in = {rounded(tiletest::random_f32(c.x, seed++)), rounded(tiletest::random_f32(c.w, seed++)),
                                      tiletest::random_f32({c.w[0]}, seed++)};
      EXPECT_GT(tiletest::check_tiling(node, in, 1e-4).tiles, 2u);
    }
  }
  if (units == 0) GTEST_SKIP() << "no bf16 kernels here";
}

Tensor rounded(Tensor t) {
  for (float& v : t.span<float>()) v = kernels::bf16_value(kernels::bf16_bits(v));
  return t;
}

Tensor to_bf16(const Tensor& t) {
  Tensor out(DType::bf16, t.shape());
  auto* bits = reinterpret_cast<uint16_t*>(out.raw());
  const float* v = t.data<float>();
  for (int64_t i = 0; i < t.numel(); ++i) bits[i] = kernels::bf16_bits(v[i]);
  return out;
}

// Activations stored as bfloat16 between bf16 convs (plan/precision.cpp): x, the residual (AMX
// only) and y in every mix, against the reference on the widened values, y rounded once.
// Within a bf16 step of y (the sums differ only in order). Cases: 1x1 in place (the GEMM reads
// or packs A from bf16 rows), with k over one k block, padded and strided windows of channels
// that are whole 32-steps (on AMX each tap copied straight into the tile) and of channels that
// are not, a strided 1x1, and a k over several k blocks (float sums kept aside). The dtype mixes change only
// how A is read and how the epilogue reads and writes, not the conv path: the first and last
// case take every mix, the others x alone and all in bf16 (the whole set took minutes under
// ASan in CI).
void check_bf16_activations(NodePrecision unit, bool residual_bf16) {
  struct Case { Shape x, w; int64_t stride, pad; };
  const std::vector<Case> cases = {
      {{1, 6, 5, 64}, {40, 64, 1, 1}, 1, 0},
      {{2, 9, 7, 64}, {40, 64, 1, 1}, 1, 0},
      {{1, 5, 9, 1056}, {48, 1056, 1, 1}, 1, 0},
      {{1, 9, 7, 40}, {36, 40, 3, 3}, 1, 1},
      {{2, 11, 9, 16}, {33, 16, 3, 3}, 2, 1},
      {{2, 11, 9, 32}, {33, 32, 3, 3}, 2, 1},
      {{2, 11, 9, 32}, {33, 32, 1, 1}, 2, 0},
      {{1, 7, 7, 160}, {64, 160, 3, 3}, 1, 1},
  };
  uint32_t seed = 240;
  for (const Case& c : cases)
    for (int mix = 1; mix < 8; ++mix) {
      const bool every_mix = &c == &cases.front() || &c == &cases.back();
      if (!every_mix && mix != 1 && mix != 7) continue;
      const bool x_bf16 = mix & 1, r_bf16 = (mix & 2) && residual_bf16, y_bf16 = mix & 4;
      SCOPED_TRACE(std::string(node_precision_name(unit)) + " " + shape_str(c.x) + " * " + shape_str(c.w) + " mix " + std::to_string(mix));
      NodeBuilder node("ConvNhwc", 13, 4);
      node.node.domain = kGroveDomain;
      node.ints("strides", {c.stride, c.stride}).ints("pads", {c.pad, c.pad, c.pad, c.pad});
      node.epilogue("Add+Relu", FusedActivation::relu).precision(unit);
      node.node.decisions.output_bf16 = y_bf16;
      Tensor x = rounded(tiletest::random_f32(c.x, seed++));
      std::vector<Tensor> in = {x_bf16 ? to_bf16(x) : x, rounded(tiletest::random_f32(c.w, seed++)),
                                tiletest::random_f32({c.w[0]}, seed++)};
      const int64_t oh = (c.x[1] + 2 * c.pad - c.w[2]) / c.stride + 1, ow = (c.x[2] + 2 * c.pad - c.w[3]) / c.stride + 1;
      Tensor r = tiletest::random_f32({c.x[0], oh, ow, c.w[0]}, seed++);
      in.push_back(r_bf16 ? to_bf16(r) : r);
      std::vector<ValueInfo> infos;
      for (const Tensor& t : in) infos.push_back(ValueInfo{t.dtype(), t.shape(), nullptr, true});
      EXPECT_EQ(infer_node(node, infos).at(0).dtype, y_bf16 ? DType::bf16 : DType::f32);
      EXPECT_GT(tiletest::check_tiling(node, in, y_bf16 ? 8e-3 : 1e-4).tiles, 2u);
    }
}

TEST(ConvNhwc, Bf16ActivationsOnAmxMatchReference) {
  if (!kernels::precision_supported(kernels::Precision::bf16_amx, kernels::active_isa())) GTEST_SKIP() << "no AMX";
  check_bf16_activations(NodePrecision::bf16_amx, true);
}

// On AVX512-BF16 dot products the kernel reads x's channel pairs in place (1x1) or from the
// row copy (3x3, strided), and writes y in bf16; the residual stays float.
TEST(ConvNhwc, Bf16ActivationsOnDotProductsMatchReference) {
  if (!kernels::precision_supported(kernels::Precision::bf16, kernels::active_isa())) GTEST_SKIP() << "no AVX512-BF16";
  check_bf16_activations(NodePrecision::bf16, false);
}

// The depthwise rule (one group per channel) against the reference: padded and strided
// windows, a dilated 5x5, channels past the last whole vector of every ISA (40, 21), and the
// fused residual with ReLU6 (Clip) and ReLU. Every grid is checked, with poisoned inputs.
TEST(DepthwiseConvNhwc, TileRuleMatchesReference) {
  struct Case { Shape x; int64_t kernel, stride, pad, dilation; bool residual, clip; };
  const std::vector<Case> cases = {
      {{1, 9, 7, 40}, 3, 1, 1, 1, false, true},  {{2, 11, 9, 21}, 3, 2, 1, 1, true, false},
      {{1, 12, 10, 32}, 5, 1, 4, 2, false, false}, {{1, 7, 7, 48}, 3, 1, 1, 1, true, true},
      {{1, 6, 5, 16}, 3, 2, 0, 1, false, false},
  };
  uint32_t seed = 60;
  for (const Case& c : cases) {
    const int64_t channels = c.x[3];
    NodeBuilder node("DepthwiseConvNhwc", 13, c.residual ? 4 : 3);
    node.node.domain = kGroveDomain;
    node.i("group", channels).ints("strides", {c.stride, c.stride}).ints("pads", {c.pad, c.pad, c.pad, c.pad});
    node.ints("dilations", {c.dilation, c.dilation});
    node.epilogue(std::string(c.residual ? "Add+" : "") + (c.clip ? "Clip" : "Relu"), c.clip ? FusedActivation::clip : FusedActivation::relu,
                  0.0f, c.clip ? 6.0f : 0.0f);
    std::vector<Tensor> in = {tiletest::random_f32(c.x, seed++), tiletest::random_f32({channels, 1, c.kernel, c.kernel}, seed++),
                              tiletest::random_f32({channels}, seed++)};
    const int64_t span = (c.kernel - 1) * c.dilation + 1;
    const int64_t oh = (c.x[1] + 2 * c.pad - span) / c.stride + 1, ow = (c.x[2] + 2 * c.pad - span) / c.stride + 1;
    if (c.residual) in.push_back(tiletest::random_f32({c.x[0], oh, ow, channels}, seed++));
    SCOPED_TRACE(shape_str(c.x) + " k" + std::to_string(c.kernel) + " s" + std::to_string(c.stride));
    EXPECT_GT(tiletest::check_tiling(node, in, 1e-4).tiles, 2u);
  }
}

// A 1x1 stride-1 conv padded only at the bottom has output rows past the input: they are
// bias alone, never read from x (a 1x1 conv that reads x in place must not take it).
// ExpandDepthwiseNhwc's tile rule: every grid it allows (rows, channels in GEMM panels,
// images), inputs poisoned outside `needs`, against the two convs' references. The cases take
// strides 1 and 2, a 5x5 kernel, dilation, uneven pads, no biases, channels that are not whole
// panels, and planes tall enough for several bands (rows shared between bands carried over).
TEST(ExpandDepthwiseNhwc, TileRuleMatchesReference) {
  struct Case { Shape x; int64_t m, k, stride, pad_top, pad_bottom, dilation; bool biases; };
  const std::vector<Case> cases = {
      {{1, 9, 8, 8}, 48, 3, 1, 1, 1, 1, true},
      {{2, 11, 9, 5}, 40, 3, 2, 1, 1, 1, false},
      {{1, 10, 7, 16}, 64, 5, 1, 2, 2, 1, true},
      {{1, 12, 10, 8}, 32, 3, 1, 2, 0, 2, true},
      {{1, 64, 90, 8}, 96, 3, 2, 0, 1, 1, true},
      {{1, 70, 80, 4}, 96, 3, 1, 1, 1, 1, true},
  };
  uint32_t seed = 500;
  for (const Case& c : cases) {
    NodeBuilder node("ExpandDepthwiseNhwc", 13, 5);
    node.node.domain = kGroveDomain;
    node.i("group", c.m).ints("kernel_shape", {c.k, c.k}).ints("strides", {c.stride, c.stride});
    node.ints("pads", {c.pad_top, c.pad_top, c.pad_bottom, c.pad_bottom}).ints("dilations", {c.dilation, c.dilation});
    node.epilogue("Clip", FusedActivation::clip, 0.0f, 6.0f);
    node.node.decisions.expand = Decisions{.epilogue = {.activation = FusedActivation::relu, .fused = "Relu"}};
    const std::vector<Tensor> in = {tiletest::random_f32(c.x, seed++), tiletest::random_f32({c.m, c.x[3], 1, 1}, seed++),
                                    c.biases ? tiletest::random_f32({c.m}, seed++) : Tensor(),
                                    tiletest::random_f32({c.m, 1, c.k, c.k}, seed++),
                                    c.biases ? tiletest::random_f32({c.m}, seed++) : Tensor()};
    // The tall planes (several bands a tile) in rows of 16 and whole channels: their finest
    // grid of single rows took a minute under AddressSanitizer and adds no other path.
    const std::vector<int64_t> tall = {1, 16, 0, c.m};
    const auto stats = tiletest::check_tiling(node, in, 1e-4, c.x[1] >= 64 ? &tall : nullptr);
    EXPECT_GT(stats.tiles, 2u) << shape_str(c.x);
  }
}

// ExpandDepthwiseNhwc with an expand conv on the row path (a MobileNet's stem): 3x3 stride 2
// reading the NCHW image, and a channels-last 3x3 stride 1 conv, over several bands; then
// InvertedResidualNhwc, the project conv joined too (grids of images and rows only), with and
// without its bias and residual, after both kinds of expand conv. Elsewhere than on the row
// path the stem cases run the reference.
TEST(ExpandDepthwiseNhwc, RowPathExpandAndProjectMatchReference) {
  struct Case { Shape x; int64_t m, ek, es, ep, dk, ds; bool nchw; int64_t project; bool residual; };
  const std::vector<Case> cases = {
      {{1, 3, 37, 35}, 32, 3, 2, 1, 3, 1, true, 0, false},    {{2, 9, 8, 8}, 48, 3, 1, 1, 3, 2, false, 0, false},
      {{1, 3, 130, 70}, 32, 3, 2, 1, 3, 1, true, 0, false},   {{1, 3, 29, 31}, 32, 3, 2, 1, 3, 1, true, 16, false},
      {{2, 10, 9, 24}, 144, 1, 1, 0, 3, 1, false, 24, true},  {{1, 13, 11, 16}, 96, 1, 1, 0, 3, 2, false, 24, false},
      {{1, 70, 60, 8}, 48, 1, 1, 0, 3, 1, false, 8, true},
  };
  uint32_t seed = 700;
  for (const Case& c : cases) {
    NodeBuilder node(c.project ? "InvertedResidualNhwc" : "ExpandDepthwiseNhwc", 13, c.project ? (c.residual ? 8 : 7) : 5);
    node.node.domain = kGroveDomain;
    node.i("group", c.m).ints("kernel_shape", {c.dk, c.dk}).ints("strides", {c.ds, c.ds}).ints("pads", {1, 1, 1, 1});
    node.epilogue("Clip", FusedActivation::clip, 0.0f, 6.0f);
    const std::string e = kExpandPrefix;
    node.ints(e + "strides", {c.es, c.es}).ints(e + "pads", {c.ep, c.ep, c.ep, c.ep});
    node.node.decisions.expand = Decisions{.x_nchw = c.nchw, .epilogue = {.activation = FusedActivation::relu, .fused = "Relu"}};
    const int64_t channels = c.x[c.nchw ? 1 : 3], h = c.x[c.nchw ? 2 : 1], w = c.x[c.nchw ? 3 : 2];
    const int64_t mh = (h + 2 * c.ep - c.ek) / c.es + 1, mw = (w + 2 * c.ep - c.ek) / c.es + 1;
    const int64_t oh = (mh + 2 - c.dk) / c.ds + 1, ow = (mw + 2 - c.dk) / c.ds + 1;
    std::vector<Tensor> in = {tiletest::random_f32(c.x, seed++), tiletest::random_f32({c.m, channels, c.ek, c.ek}, seed++),
                              tiletest::random_f32({c.m}, seed++), tiletest::random_f32({c.m, 1, c.dk, c.dk}, seed++),
                              tiletest::random_f32({c.m}, seed++)};
    if (c.project) {
      in.push_back(tiletest::random_f32({c.project, c.m, 1, 1}, seed++));
      in.push_back(c.residual ? tiletest::random_f32({c.project}, seed++) : Tensor());
      if (c.residual) in.push_back(tiletest::random_f32({c.x[0], oh, ow, c.project}, seed++));
      if (c.residual) node.node.decisions.project = Decisions{.epilogue = {.fused = "Add"}};
    }
    const std::vector<int64_t> tall = {1, 16, 0, c.project ? 0 : c.m};  // as above
    SCOPED_TRACE(shape_str(c.x) + (c.project ? " project" : ""));
    const auto stats = tiletest::check_tiling(node, in, 1e-4, c.x[c.nchw ? 2 : 1] >= 64 ? &tall : nullptr);
    if (c.ek == 1 || kernels::conv_row_supported(kernels::active_isa(), kernels::Precision::f32))
      EXPECT_GT(stats.tiles, 2u);  // the rule claims the node: cut, not one reference tile
  }
}

// ConvMaxPoolNhwc's tile rule: every grid it allows (rows, channels in GEMM panels, images),
// inputs poisoned outside `needs`, against the conv's and the pool's references. The cases
// take a stem reading NCHW (SqueezeNet's 3x3 stride 2 and GoogLeNet's 7x7 stride 2 with
// ceil-mode pools), a channels-last conv with a padded pool (ResNet-50's), a stride-1 pool
// (two conv rows shared between bands), channels that are not whole panels, no bias, and a
// plane tall enough for several bands. Elsewhere than on the row path the rule runs the
// reference.
TEST(ConvMaxPoolNhwc, TileRuleMatchesReference) {
  struct Case { Shape x, w; int64_t stride, pad, pool_k, pool_s, pool_pad; bool ceil, nchw, bias; };
  const std::vector<Case> cases = {
      {{1, 3, 35, 33}, {64, 3, 3, 3}, 2, 0, 3, 2, 0, true, true, true},
      {{2, 3, 30, 30}, {40, 3, 7, 7}, 2, 3, 3, 2, 0, true, true, false},
      {{1, 19, 17, 8}, {32, 8, 3, 3}, 1, 1, 3, 2, 1, false, false, true},
      {{1, 12, 11, 4}, {16, 4, 3, 3}, 1, 1, 3, 1, 1, false, false, true},
      {{1, 120, 100, 4}, {64, 4, 3, 3}, 1, 1, 3, 2, 1, false, false, true},
  };
  uint32_t seed = 900;
  for (const Case& c : cases) {
    NodeBuilder node("ConvMaxPoolNhwc", 13, 3);
    node.node.domain = kGroveDomain;
    node.ints("strides", {c.stride, c.stride}).ints("pads", {c.pad, c.pad, c.pad, c.pad});
    node.node.decisions.x_nchw = c.nchw;
    node.epilogue("Relu", FusedActivation::relu);
    const std::string pool = kPoolPrefix;
    node.ints(pool + "kernel_shape", {c.pool_k, c.pool_k}).ints(pool + "strides", {c.pool_s, c.pool_s});
    node.ints(pool + "pads", {c.pool_pad, c.pool_pad, c.pool_pad, c.pool_pad}).i(pool + "ceil_mode", c.ceil);
    const std::vector<Tensor> in = {tiletest::random_f32(c.x, seed++), tiletest::random_f32(c.w, seed++),
                                    c.bias ? tiletest::random_f32({c.w[0]}, seed++) : Tensor()};
    const std::vector<int64_t> tall = {1, 8, 0, c.w[0]};  // the tall plane's finest grid adds no path
    const auto stats = tiletest::check_tiling(node, in, 1e-4, c.x[1] >= 64 ? &tall : nullptr);
    EXPECT_GT(stats.tiles, 2u) << shape_str(c.x);
  }
}

TEST(ConvNhwc, OneByOneWithBottomPaddingReadsNoRowPastTheInput) {
  NodeBuilder node("ConvNhwc", 13, 3);
  node.node.domain = kGroveDomain;
  node.ints("pads", {0, 0, 2, 0});
  const std::vector<Tensor> in = {tiletest::random_f32({1, 5, 6, 8}, 1), tiletest::random_f32({40, 8, 1, 1}, 2),
                                  tiletest::random_f32({40}, 3)};
  tiletest::check_tiling(node, in, 1e-4);
}

// The float Transposes at the layout changes take the blocked 4-byte path: equal to the
// reference for both directions, with and without a 16-element block to walk.
TEST(ConvNhwc, FloatTransposesMatchReferenceExactly) {
  for (const auto& [shape, perm] : std::vector<std::pair<Shape, std::vector<int64_t>>>{
           {{2, 40, 5, 7}, {0, 2, 3, 1}}, {{1, 9, 6, 35}, {0, 3, 1, 2}}, {{1, 3, 4, 5}, {0, 2, 3, 1}}}) {
    NodeBuilder node("Transpose", 13, 1);
    node.ints("perm", perm);
    tiletest::check_tiling(node, {tiletest::random_f32(shape, 3)}, 0.0);
  }
}

// x [1, 32, 9, 9] -> Conv 3x3 p1 (64) + Relu -> Conv 1x1 (32) -> Add x' -> Relu -> y, where
// x' = Conv 1x1 of x: three convs linked by their values, and a MaxPool reading y. Their
// FLOPs outweigh the Transposes (81 pixels: the 3x3 conv stays off Winograd).
TestModel conv_block() {
  OnnxBuilder b(13);
  b.input("x", kF32, {1, 32, 9, 9}).output("y", kF32, {1, 32, 5, 5}).output("p", kF32, {1, 32, 4, 4});
  weight(b, "wa", {64, 32, 3, 3}, 1);
  weight(b, "ba", {64}, 2);
  weight(b, "wb", {32, 64, 1, 1}, 3);
  weight(b, "ws", {32, 32, 1, 1}, 4);
  auto& a = b.node("Conv", {"x", "wa", "ba"}, {"a"}, "conv_a");
  OnnxBuilder::attr_ints(a, "pads", {1, 1, 1, 1});
  b.node("Relu", {"a"}, {"ar"}, "relu_a");
  b.node("Conv", {"ar", "wb"}, {"cb"}, "conv_b");
  b.node("Conv", {"x", "ws"}, {"s"}, "conv_skip");
  b.node("Add", {"cb", "s"}, {"sum"}, "add");
  b.node("Relu", {"sum"}, {"y"}, "relu");
  auto& p = b.node("MaxPool", {"y"}, {"p"}, "pool");
  OnnxBuilder::attr_ints(p, "kernel_shape", {2, 2});
  return {"conv_block", b.bytes(), {{"x", seeded_tensor({1, 32, 9, 9}, 5)}}};
}

int count_op(const Plan& plan, const std::string& op) {
  int n = 0;
  for (const Node& node : plan.graph.nodes) n += node.op_type == op;
  return n;
}

// Runs the plan on the tile runtime with each worker count and compares with `want`.
void expect_plan_computes(const auto& plan, const TestModel& m, const TensorMap& want, std::vector<size_t> workers,
                          const std::string& label, double tol = 1e-4) {
  for (size_t w : workers) {
    PlannedRun run(plan, m.inputs, PlannedRunOptions{true});
    run_serial(run, w);
    expect_close(run.outputs(), want, tol, label);
  }
}

// The plan with Transposes priced so high that every channels-last group goes back to NCHW.
auto plan_with_costly_transposes(const Graph& g) {
  PlanOptions costly;
  costly.machine.transpose_flops = 1e6;
  return make_plan(g, costly);
}

TEST(LayoutF32, ChainOfConvsRunsChannelsLastAndComputesTheReference) {
  const TestModel m = conv_block();
  Model model = load_test_model(m);
  const TensorMap want = run_reference(bound_graph(model), m.inputs);
  auto plan = make_plan(bound_graph(model), PlanOptions{});
  EXPECT_EQ(plan->channels_last_convs, 3);
  EXPECT_EQ(count_op(*plan, "ConvNhwc"), 3);
  EXPECT_EQ(count_op(*plan, "Conv"), 0);
  EXPECT_EQ(count_op(*plan, "MaxPoolNhwc"), 1);   // the pool reads y's channels-last copy
  EXPECT_EQ(count_op(*plan, "Transpose"), 3);     // x in; y and p back for the outputs
  PlannedRun run(plan, m.inputs, PlannedRunOptions{true});
  run_serial(run, 6);
  expect_close(run.outputs(), want, 1e-4, "channels-last plan");

  PlanOptions nchw;
  nchw.conv_layout = ConvLayout::nchw;
  auto as_written = make_plan(bound_graph(model), nchw);
  EXPECT_EQ(as_written->channels_last_convs, 0);
  EXPECT_EQ(count_op(*as_written, "ConvNhwc"), 0);
  EXPECT_EQ(count_op(*as_written, "Transpose"), 0);
}

// bf16 on AMX or AVX512-BF16 dot products: a value only bf16 convs read as x (conv_a's y) is
// stored as bfloat16; the skip conv's y, read as the residual, and y, read by the Transpose
// back, stay float. The tile runtime computes the plan graph's reference (which widens and
// rounds the same values) and the fp32 model to bf16's accuracy.
TEST(LayoutF32, Bf16PlanStoresTheValuesBetweenBf16ConvsAsBf16) {
  if (!kernels::precision_supported(kernels::Precision::bf16, kernels::active_isa())) GTEST_SKIP() << "no bf16 kernels";
  const TestModel m = conv_block();
  Model model = load_test_model(m);
  PlanOptions options;
  options.precision = Precision::bf16;
  auto plan = make_plan(bound_graph(model), options);
  ASSERT_EQ(count_op(*plan, "ConvNhwc"), 3);
  std::map<std::string, DType> y_dtype;
  for (const Node& n : plan->graph.nodes)
    if (n.op_type == "ConvNhwc") y_dtype[n.name] = plan->graph.values.at(n.outputs[0]).dtype;
  EXPECT_EQ(y_dtype.at("conv_a"), DType::bf16);
  EXPECT_EQ(y_dtype.at("conv_skip"), DType::f32);
  EXPECT_EQ(y_dtype.at("conv_b"), DType::f32);
  EXPECT_EQ(plan->precision.bf16_values, 1);
  EXPECT_NE(plan->precision.note.find("; 1 activation between them stored bf16"), std::string::npos) << plan->precision.note;

  PlannedRun run(plan, m.inputs, PlannedRunOptions{true});
  run_serial(run, 6);
  const TensorMap got = run.outputs();
  // Largest |difference| over the largest |value|, per output: bf16's products and storage.
  auto relative_error = [&](const TensorMap& want) {
    double worst = 0;
    for (const auto& [name, t] : want) {
      const std::vector<double> a = t.to_f64(), b = got.at(name).to_f64();
      double largest = 0, diff = 0;
      for (size_t i = 0; i < a.size(); ++i) largest = std::max(largest, std::abs(a[i])), diff = std::max(diff, std::abs(a[i] - b[i]));
      worst = std::max(worst, diff / largest);
    }
    return worst;
  };
  EXPECT_LT(relative_error(run_reference(plan->graph, m.inputs)), 2e-2) << "against the plan graph's reference";
  const double error = relative_error(run_reference(bound_graph(model), m.inputs));
  EXPECT_LT(error, 2e-2) << "against fp32";
  EXPECT_GT(error, 0.0);

  const auto fp32 = make_plan(bound_graph(model), PlanOptions{});
  for (const Node& n : fp32->graph.nodes) EXPECT_FALSE(stores_bf16(n)) << n.name << ": fp32 stores nothing as bf16";
}

// A SqueezeNet fire module and the pool after it: squeeze 1x1, then 1x1 and 3x3 expands
// concatenated over the channels, a 3x3 stride-2 MaxPool (ceil mode), and the next squeeze.
// Channels-last from end to end, the Concat joins the expands' copies along their last dim and
// the pool pools the Concat's copy: only x's Transpose in and y's back. Priced so that the
// Transposes outweigh the products, everything goes back to NCHW, the Concat and the pool too.
TEST(LayoutF32, ConcatAndMaxPoolJoinTheChannelsLastConvs) {
  OnnxBuilder b(13);
  b.input("x", kF32, {1, 32, 12, 12}).output("y", kF32, {1, 32, 6, 6});
  weight(b, "ws", {32, 32, 1, 1}, 1);
  weight(b, "w1", {32, 32, 1, 1}, 2);
  weight(b, "w3", {32, 32, 3, 3}, 3);
  weight(b, "wn", {32, 64, 1, 1}, 4);
  b.node("Conv", {"x", "ws"}, {"s"}, "squeeze");
  b.node("Relu", {"s"}, {"sr"}, "squeeze_relu");
  b.node("Conv", {"sr", "w1"}, {"e1"}, "expand1x1");
  auto& e3 = b.node("Conv", {"sr", "w3"}, {"e3"}, "expand3x3");
  OnnxBuilder::attr_ints(e3, "pads", {1, 1, 1, 1});
  auto& cat = b.node("Concat", {"e1", "e3"}, {"cat"}, "concat");
  OnnxBuilder::attr_int(cat, "axis", 1);
  auto& pool = b.node("MaxPool", {"cat"}, {"p"}, "pool");
  OnnxBuilder::attr_ints(pool, "kernel_shape", {3, 3});
  OnnxBuilder::attr_ints(pool, "strides", {2, 2});
  OnnxBuilder::attr_int(pool, "ceil_mode", 1);
  b.node("Conv", {"p", "wn"}, {"y"}, "next_squeeze");
  const TestModel m{"fire", b.bytes(), {{"x", seeded_tensor({1, 32, 12, 12}, 6)}}};
  Model model = load_test_model(m);
  const TensorMap want = run_reference(bound_graph(model), m.inputs);
  auto plan = make_plan(bound_graph(model), PlanOptions{});
  EXPECT_EQ(plan->channels_last_convs, 4);
  EXPECT_EQ(count_op(*plan, "MaxPoolNhwc"), 1);
  EXPECT_EQ(count_op(*plan, "Transpose"), 2);
  for (const Node& n : plan->graph.nodes)
    if (n.op_type == "Concat") EXPECT_EQ(n.attr_int("axis", 0), 3);
  expect_plan_computes(plan, m, want, {1, 3}, "channels-last fire module");
  auto back = plan_with_costly_transposes(bound_graph(model));
  EXPECT_EQ(back->channels_last_convs, 0);
  EXPECT_EQ(count_op(*back, "MaxPoolNhwc"), 0);
  EXPECT_EQ(count_op(*back, "MaxPool"), 1);
  EXPECT_EQ(count_op(*back, "Transpose"), 0);
  for (const Node& n : back->graph.nodes)
    if (n.op_type == "Concat") EXPECT_EQ(n.attr_int("axis", 0), 1);
  expect_plan_computes(back, m, want, {2}, "the module back in NCHW");
}

// A darknet block (YOLOv3): x + leaky(conv3x3(leaky(conv1x1(x)))), the residual added after the
// activation, so no conv fuses it. The Add adds the convs' channels-last copies, and the next
// block's convs read its copy: only x's Transpose in and y's back. Priced so that the
// Transposes outweigh the products, the Adds go back to NCHW with the convs.
TEST(LayoutF32, AnAddOfChannelsLastValuesJoinsTheConvs) {
  OnnxBuilder b(13);
  b.input("x", kF32, {1, 32, 10, 10}).output("y", kF32, {1, 32, 10, 10});
  weight(b, "w0", {32, 32, 3, 3}, 1);
  weight(b, "wr", {16, 32, 1, 1}, 2);
  weight(b, "we", {32, 16, 3, 3}, 3);
  weight(b, "wr2", {16, 32, 1, 1}, 4);
  weight(b, "we2", {32, 16, 3, 3}, 5);
  auto& c0 = b.node("Conv", {"x", "w0"}, {"c0"}, "stage");
  OnnxBuilder::attr_ints(c0, "pads", {1, 1, 1, 1});
  b.node("LeakyRelu", {"c0"}, {"a0"}, "stage_act");
  b.node("Conv", {"a0", "wr"}, {"r"}, "reduce");
  b.node("LeakyRelu", {"r"}, {"ra"}, "reduce_act");
  auto& e = b.node("Conv", {"ra", "we"}, {"e"}, "expand");
  OnnxBuilder::attr_ints(e, "pads", {1, 1, 1, 1});
  b.node("LeakyRelu", {"e"}, {"ea"}, "expand_act");
  b.node("Add", {"a0", "ea"}, {"s"}, "");  // unnamed, as exporters often leave them
  b.node("Conv", {"s", "wr2"}, {"r2"}, "reduce2");
  b.node("LeakyRelu", {"r2"}, {"r2a"}, "reduce2_act");
  auto& e2 = b.node("Conv", {"r2a", "we2"}, {"e2"}, "expand2");
  OnnxBuilder::attr_ints(e2, "pads", {1, 1, 1, 1});
  b.node("LeakyRelu", {"e2"}, {"e2a"}, "expand2_act");
  b.node("Add", {"e2a", "s"}, {"y"}, "");
  const TestModel m{"darknet", b.bytes(), {{"x", seeded_tensor({1, 32, 10, 10}, 7)}}};
  Model model = load_test_model(m);
  const TensorMap want = run_reference(bound_graph(model), m.inputs);
  auto plan = make_plan(bound_graph(model), PlanOptions{});
  EXPECT_EQ(plan->channels_last_convs, 5);
  EXPECT_EQ(count_op(*plan, "Add"), 2);
  EXPECT_EQ(count_op(*plan, "Transpose"), 2);  // x in, y back
  for (const Node& n : plan->graph.nodes)
    if (n.op_type == "Add") {
      EXPECT_EQ(plan->graph.values.at(n.outputs[0]).shape, (Shape{1, 10, 10, 32})) << "adds the NHWC copies";
      EXPECT_NE(n.outputs[0], "y");
    }
  // Five convs deep the sums cancel: float32 rounding in another order moves y by ~1e-4.
  expect_plan_computes(plan, m, want, {1, 3}, "channels-last darknet blocks", 2e-3);
  auto back = plan_with_costly_transposes(bound_graph(model));
  EXPECT_EQ(back->channels_last_convs, 0);
  EXPECT_EQ(count_op(*back, "Transpose"), 0);
  for (const Node& n : back->graph.nodes)
    if (n.op_type == "Add") EXPECT_EQ(back->graph.values.at(n.outputs[0]).shape, (Shape{1, 32, 10, 10}));
  expect_plan_computes(back, m, want, {2}, "the blocks back in NCHW", 2e-3);
}

// A Slice of some channels of a channels-last value slices the copy (its last dim): generated
// starts and ends (negative, past the end, INT64_MAX as exporters write x[:, c:]) on a conv's
// channels-last output, read by a conv and, in some cases, as a graph output (through a
// Transpose back) too. The numbers are the reference's, channels-last and with the convs sent
// back to NCHW by costly Transposes (the Slice goes back with them).
TEST(LayoutF32, ChannelSlicesOfChannelsLastValuesComputeTheReference) {
  std::mt19937 rng(5);
  auto between = [&](int64_t lo, int64_t hi) { return std::uniform_int_distribution<int64_t>(lo, hi)(rng); };
  for (int k = 0; k < 24; ++k) {
    // At least 16 channels kept, so the second conv is one the channels-last rule takes.
    const int64_t channels = between(24, 48);
    const int64_t first = between(0, channels - 16), last = between(first + 16, channels);
    // Spelled as exporters may: a negative start, an end past the dim or INT64_MAX.
    const int64_t start = between(0, 1) ? first - channels : first;
    const int64_t end = last == channels ? (between(0, 1) ? std::numeric_limits<int64_t>::max() : channels + 7) : last;
    const int64_t kept = last - first;
    const bool also_output = between(0, 2) == 0;
    OnnxBuilder b(13);
    b.input("x", kF32, {1, 16, 9, 9}).output("y", kF32, {1, 24, 9, 9});
    if (also_output) b.output("s", kF32, {1, kept, 9, 9});
    weight(b, "w0", {channels, 16, 3, 3}, 1 + k);
    weight(b, "w1", {24, kept, 3, 3}, 40 + k);
    b.initializer_i64("starts", {1}, {start});
    b.initializer_i64("ends", {1}, {end});
    b.initializer_i64("axes", {1}, {between(0, 1) ? 1 : -3});
    OnnxBuilder::attr_ints(b.node("Conv", {"x", "w0"}, {"a"}, "first"), "pads", {1, 1, 1, 1});
    b.node("Slice", {"a", "starts", "ends", "axes"}, {"s"}, "slice");
    OnnxBuilder::attr_ints(b.node("Conv", {"s", "w1"}, {"y"}, "second"), "pads", {1, 1, 1, 1});
    const TestModel m{"slices", b.bytes(), {{"x", seeded_tensor({1, 16, 9, 9}, 9 + k)}}};
    Model model = load_test_model(m);
    const TensorMap want = run_reference(bound_graph(model), m.inputs);
    const std::string what = "channels " + std::to_string(channels) + " slice [" + std::to_string(start) + ", " +
                             std::to_string(end) + ")" + (also_output ? " also an output" : "");
    PlanOptions o;
    o.machine.transpose_flops = 0.01;  // channels-last whatever the Transposes cost
    auto plan = make_plan(bound_graph(model), o);
    EXPECT_EQ(plan->channels_last_convs, 2) << what;
    for (const Node& n : plan->graph.nodes)
      if (n.op_type == "Slice") EXPECT_EQ(plan->graph.values.at(n.outputs[0]).shape, (Shape{1, 9, 9, kept})) << what;
    expect_plan_computes(plan, m, want, {1, 2}, what, 1e-4);
    auto back = plan_with_costly_transposes(bound_graph(model));
    EXPECT_EQ(back->channels_last_convs, 0) << what;
    expect_plan_computes(back, m, want, {2}, what + ", back in NCHW", 1e-4);
  }
}

// A node a tuning record names keeps the layout it was measured in (here the others, left
// too cheap for their Transposes, go back with it).
TEST(LayoutF32, ChosenNodesStayNchw) {
  const TestModel m = conv_block();
  Model model = load_test_model(m);
  PlanOptions options;
  options.choices = {NodeChoice{"conv_a", "gemm", {}}};
  auto plan = make_plan(bound_graph(model), options);
  int seen = 0;
  for (const Node& n : plan->graph.nodes)
    if (n.name == "conv_a") {
      EXPECT_EQ(n.op_type, "Conv");
      ++seen;
    }
  EXPECT_EQ(seen, 1);
  EXPECT_EQ(plan->channels_last_convs, 0);
  PlannedRun run(plan, m.inputs, PlannedRunOptions{true});
  run_serial(run, 7);
  expect_close(run.outputs(), run_reference(bound_graph(model), m.inputs), 1e-4, "plan with a choice");
}

// A conv too cheap for the Transposes it would need, and one with 3 input channels, stay NCHW.
TEST(LayoutF32, CheapConvsStayNchw) {
  OnnxBuilder b(13);
  b.input("x", kF32, {1, 16, 8, 8}).input("img", kF32, {1, 3, 8, 8});
  b.output("y", kF32, {1, 16, 8, 8}).output("z", kF32, {1, 64, 8, 8});
  weight(b, "w", {16, 16, 1, 1}, 1);
  weight(b, "wi", {64, 3, 3, 3}, 2);
  b.node("Conv", {"x", "w"}, {"c"}, "small");
  b.node("Sigmoid", {"c"}, {"y"}, "sigmoid");
  OnnxBuilder::attr_ints(b.node("Conv", {"img", "wi"}, {"z"}, "first_layer"), "pads", {1, 1, 1, 1});
  Model model = model_from_graph(load_onnx_bytes(b.bytes(), "cheap.onnx"));
  auto plan = make_plan(bound_graph(model), PlanOptions{});
  EXPECT_EQ(plan->channels_last_convs, 0);
  EXPECT_EQ(count_op(*plan, "ConvNhwc"), 0);
  EXPECT_EQ(count_op(*plan, "Transpose"), 0);
}

// grove.internal MaxPoolNhwc on float32: every row tile equals MaxPool's reference on the rotated
// tensor (exactly: a maximum rounds nothing). Windows in the padding on either side, a window
// wholly in it, ceil mode, dilation, stride 1 and 3, and channel counts off every vector width;
// each row's inner pixels take one run, the edge pixels one each.
TEST(MaxPoolNhwc, FloatRowsMatchTheReference) {
  struct Case {
    Shape x;
    std::vector<int64_t> kernel, strides, pads, dilations;
    int64_t ceil;
  };
  uint32_t seed = 960;
  for (const Case& c : std::vector<Case>{{{1, 13, 13, 64}, {3, 3}, {2, 2}, {0, 0, 0, 0}, {1, 1}, 1},
                                         {{2, 9, 11, 17}, {3, 3}, {1, 1}, {1, 1, 1, 1}, {1, 1}, 0},
                                         {{1, 8, 10, 33}, {2, 3}, {3, 2}, {1, 2, 1, 2}, {1, 1}, 1},
                                         {{1, 11, 12, 5}, {3, 2}, {2, 1}, {0, 1, 2, 0}, {2, 3}, 0},
                                         {{1, 4, 4, 16}, {5, 5}, {1, 1}, {4, 4, 4, 4}, {1, 1}, 0}}) {
    NodeBuilder node("MaxPoolNhwc", 13, 1);
    node.node.domain = kGroveDomain;
    node.ints("kernel_shape", c.kernel).ints("strides", c.strides).ints("pads", c.pads).ints("dilations", c.dilations);
    node.i("ceil_mode", c.ceil);
    const auto stats = tiletest::check_tiling(node, {tiletest::random_f32(c.x, seed++)}, 0.0);
    EXPECT_GT(stats.tiles, 1u) << shape_str(c.x);
  }
}

// grove.internal GlobalAveragePoolNhwc: every tile (images, channels) equals GlobalAveragePool's
// reference on the rotated tensor, channel counts off every vector width.
TEST(GlobalAveragePoolNhwc, TileRuleMatchesReference) {
  uint32_t seed = 950;
  for (const Shape& x : {Shape{2, 7, 7, 37}, Shape{1, 13, 13, 64}, Shape{3, 1, 1, 5}}) {
    NodeBuilder node("GlobalAveragePoolNhwc", 13, 1);
    node.node.domain = kGroveDomain;
    const auto stats = tiletest::check_tiling(node, {tiletest::random_f32(x, seed++)}, 1e-6);
    EXPECT_GT(stats.tiles, 1u) << shape_str(x);
  }
}

// A network's last pool reads the last conv's channels-last copy and writes the NCHW output
// itself: no Transpose back. Priced so that the Transposes outweigh the conv, both go back.
TEST(LayoutF32, GlobalAveragePoolReadsTheChannelsLastCopy) {
  OnnxBuilder b(13);
  b.input("x", kF32, {1, 32, 9, 9}).output("g", kF32, {1, 64, 1, 1});
  weight(b, "w", {64, 32, 3, 3}, 1);
  OnnxBuilder::attr_ints(b.node("Conv", {"x", "w"}, {"c"}, "conv"), "pads", {1, 1, 1, 1});
  b.node("Relu", {"c"}, {"r"}, "relu");
  b.node("GlobalAveragePool", {"r"}, {"g"}, "gap");
  const TestModel m{"conv_gap", b.bytes(), {{"x", seeded_tensor({1, 32, 9, 9}, 6)}}};
  Model model = load_test_model(m);
  const TensorMap want = run_reference(bound_graph(model), m.inputs);
  auto plan = make_plan(bound_graph(model), PlanOptions{});
  EXPECT_EQ(count_op(*plan, "ConvNhwc"), 1);
  EXPECT_EQ(count_op(*plan, "GlobalAveragePoolNhwc"), 1);
  EXPECT_EQ(count_op(*plan, "Transpose"), 1);  // x in; nothing back
  expect_plan_computes(plan, m, want, {1, 2}, "channels-last conv and pool");
  auto back = plan_with_costly_transposes(bound_graph(model));
  EXPECT_EQ(count_op(*back, "ConvNhwc"), 0);
  EXPECT_EQ(count_op(*back, "GlobalAveragePool"), 1);
  EXPECT_EQ(count_op(*back, "Transpose"), 0);
  expect_plan_computes(back, m, want, {2}, "conv and pool back in NCHW");
}

// A "rider": a first conv (x [1, cin, size, size] -> cout channels, square kernel, stride,
// padding) whose own FLOPs pay for no Transposes. It goes channels-last beside a channels-last
// 1x1 neighbour, but alone it stays NCHW (Transposes priced near zero here). A stem rides only
// where the channels-last conv adds its taps in registers (AVX-512); a Winograd layer rides on
// any ISA, and stays on Winograd from the plan's winograd_nhwc_min_channels input channels or
// where there are no such registers (keeps_winograd). Both plans compute the reference.
void expect_rides_only_beside_others(int64_t cin, int64_t cout, int64_t size, int64_t kernel, int64_t stride,
                                     const std::string& label, bool winograd_layer, double tol = 1e-4,
                                     int64_t winograd_min_channels = kernels::kWinogradNhwcDefaultMinChannels) {
  const bool on_rows = kernels::conv_row_supported(kernels::active_isa(), kernels::Precision::f32);
  const bool rows = winograd_layer || on_rows;
  const bool winograd_mark = winograd_layer && (cin >= winograd_min_channels || !on_rows);
  PlanOptions cheap_moves;
  cheap_moves.machine.transpose_flops = 0.01;
  cheap_moves.machine.winograd_nhwc_min_channels = winograd_min_channels;
  const int64_t pad = kernel / 2, out = (size + 2 * pad - kernel) / stride + 1;
  for (bool neighbour : {false, true}) {
    OnnxBuilder b(13);
    b.input("x", kF32, {1, cin, size, size}).output("y", kF32, {1, cout, out, out});
    weight(b, "wk", {cout, cin, kernel, kernel}, 1);
    weight(b, "w1", {cout, cout, 1, 1}, 2);
    auto& first = b.node("Conv", {"x", "wk"}, {neighbour ? "c" : "y"}, "first");
    OnnxBuilder::attr_ints(first, "pads", {pad, pad, pad, pad});
    OnnxBuilder::attr_ints(first, "strides", {stride, stride});
    if (neighbour) b.node("Conv", {"c", "w1"}, {"y"}, "one");
    const TestModel m{label, b.bytes(), {{"x", seeded_tensor({1, cin, size, size}, 3)}}};
    Model model = load_test_model(m);
    auto plan = make_plan(bound_graph(model), cheap_moves);
    const int expect = neighbour ? (rows ? 2 : 1) : 0;
    EXPECT_EQ(count_op(*plan, "ConvNhwc"), expect) << label << (neighbour ? " beside a 1x1 conv" : " alone");
    EXPECT_EQ(count_op(*plan, "Conv"), (neighbour ? 2 : 1) - expect) << label;
    // A Winograd layer of many channels runs channels-last on Winograd; going back to NCHW
    // drops the mark with the layout.
    // A stem channels-last reads the NCHW image itself: no Transpose before it.
    for (const Node& n : plan->graph.nodes)
      if (n.name == "first") {
        EXPECT_EQ(conv_primitive_choice(n), n.op_type == "ConvNhwc" && winograd_mark ? ConvPrimitive::winograd : ConvPrimitive::unset) << label;
        const bool stem = n.op_type == "ConvNhwc" && cin < 16;
        EXPECT_EQ(reads_x_nchw(n), stem) << label;
        if (stem) EXPECT_EQ(n.inputs[0], "x") << label;
      }
    if (neighbour && expect == 2) EXPECT_EQ(count_op(*plan, "Transpose"), cin < 16 ? 1 : 2) << label;
    expect_plan_computes(plan, m, run_reference(bound_graph(model), m.inputs), {1, 2}, label, tol);
  }
}

// A 3x3 conv of 32 input channels on a 28x28 plane, which the NCHW rule runs on Winograd:
// channels-last it runs only about as fast as on Winograd.
TEST(LayoutF32, FewChannelWinogradConvsGoChannelsLastOnlyBesideOthers) {
  // On Winograd where there are no row registers: its tolerance (see the next test).
  expect_rides_only_beside_others(32, 64, 28, 3, 1, "3x3 conv of 32 channels", true, 1e-3);
}

// The same conv on a machine whose probe found Winograd faster from 16 input channels
// (kernels/conv_probe.h): channels-last on Winograd, on every ISA.
TEST(LayoutF32, FewChannelWinogradConvsStayOnWinogradWhereTheProbeSaysSo) {
  expect_rides_only_beside_others(32, 64, 28, 3, 1, "3x3 conv of 32 channels, Winograd from 16", true, 1e-3, 16);
  // and a count above the layer's keeps it on the row GEMM
  expect_rides_only_beside_others(32, 64, 28, 3, 1, "3x3 conv of 32 channels, Winograd from 48", true, 1e-3, 48);
}

// A 3x3 conv of 64 input channels on a 28x28 plane: channels-last on any ISA, on Winograd
// (whose error is bounded relative to the layer's largest output, not to each output's own:
// kernels/winograd_tester.h; the other cases' per-output 1e-4 is too tight for it).
TEST(LayoutF32, WinogradConvsOfManyChannelsRunChannelsLastOnWinogradOnlyBesideOthers) {
  expect_rides_only_beside_others(64, 64, 28, 3, 1, "3x3 conv of 64 channels", true, 1e-3);
}

// A 3x3 conv of 64 channels on a 14x14 plane (20 Winograd GEMM columns) between two 1x1
// convs: the NCHW rule keeps it off Winograd, but channels-last it runs on Winograd, which
// wins there (docs/layout.md); on a 7x7 plane (6 columns) it stays on the row conv. Both plans
// compute the reference.
TEST(LayoutF32, SmallPlanesRunOnWinogradOnlyChannelsLast) {
  for (int64_t size : {14, 7}) {
    OnnxBuilder b(13);
    b.input("x", kF32, {1, 64, size, size}).output("y", kF32, {1, 64, size, size});
    weight(b, "wa", {64, 64, 1, 1}, 1);
    weight(b, "wk", {64, 64, 3, 3}, 2);
    weight(b, "wb", {64, 64, 1, 1}, 3);
    b.node("Conv", {"x", "wa"}, {"a"}, "before");
    OnnxBuilder::attr_ints(b.node("Conv", {"a", "wk"}, {"k"}, "mid"), "pads", {1, 1, 1, 1});
    b.node("Conv", {"k", "wb"}, {"y"}, "after");
    const std::string label = "3x3 64->64 on " + std::to_string(size) + "x" + std::to_string(size);
    const TestModel m{label, b.bytes(), {{"x", seeded_tensor({1, 64, size, size}, 5)}}};
    Model model = load_test_model(m);
    const Shape x = {1, 64, size, size}, w = {64, 64, 3, 3};
    const Node* conv = nullptr;
    for (const Node& n : bound_graph(model).nodes)
      if (n.name == "mid") conv = &n;
    ASSERT_NE(conv, nullptr);
    EXPECT_FALSE(tiling::conv_node_uses_winograd(*conv, x, w)) << label;
    EXPECT_EQ(tiling::conv_node_uses_winograd_channels_last(*conv, x, w), size == 14) << label;
    // A layer whose transformed weights outgrow half the last-level cache stays on the row
    // GEMM on such a plane (YOLOv3's 512 -> 1024 at 13x13: 75.5 MB), but not on a larger one.
    const Shape wide_x = {1, 512, size * 2 - 1, size * 2 - 1}, wide_w = {1024, 512, 3, 3};
    const int64_t l3 = kernels::cpu_info().l3_bytes, transformed = 36 * 512 * 1024 * 4;
    const Shape small_x = {1, 512, 13, 13};
    EXPECT_EQ(tiling::conv_node_uses_winograd_channels_last(*conv, small_x, wide_w),
              transformed <= (l3 > 0 ? l3 / 2 : int64_t{16} << 20))
        << label;
    if (size == 14) EXPECT_TRUE(tiling::conv_node_uses_winograd_channels_last(*conv, wide_x, wide_w)) << label;
    // Only where the machine's probe found Winograd faster on such planes (kernels/conv_probe.h).
    for (bool small_planes : {true, false}) {
      PlanOptions cheap_moves;
      cheap_moves.machine.transpose_flops = 0.01;
      cheap_moves.machine.winograd_nhwc_small_planes = small_planes;
      auto plan = make_plan(bound_graph(model), cheap_moves);
      ASSERT_EQ(count_op(*plan, "ConvNhwc"), 3) << label;
      for (const Node& n : plan->graph.nodes)
        if (n.name == "mid") EXPECT_EQ(conv_primitive_choice(n), size == 14 && small_planes ? ConvPrimitive::winograd : ConvPrimitive::unset) << label;
      expect_plan_computes(plan, m, run_reference(bound_graph(model), m.inputs), {1, 2}, label, 1e-3);
    }
  }
}

// A stem (3 input channels, 7x7 stride 2): channels-last it gains a fraction of its time.
TEST(LayoutF32, FewChannelStemsGoChannelsLastOnlyBesideOthers) {
  expect_rides_only_beside_others(3, 32, 37, 7, 2, "7x7 stride-2 stem", false);
}

// A few-channel conv whose x is another conv's channels-last output, with no NCHW reader of
// that value: the NCHW value left the graph with its Transpose back, so the conv reads the
// channels-last copy (only an image or an NCHW op's output is read as it is).
TEST(LayoutF32, AStemReadsNchwOnlyWhereTheValueIsStillNchw) {
  OnnxBuilder b(13);
  b.input("x", kF32, {1, 32, 20, 20}).output("y", kF32, {1, 32, 20, 20});
  weight(b, "wa", {8, 32, 1, 1}, 1);
  weight(b, "wb", {32, 8, 3, 3}, 2);
  b.node("Conv", {"x", "wa"}, {"a"}, "squeeze");
  b.node("Relu", {"a"}, {"ar"}, "relu");
  OnnxBuilder::attr_ints(b.node("Conv", {"ar", "wb"}, {"y"}, "expand"), "pads", {1, 1, 1, 1});
  const TestModel m{"squeeze_expand", b.bytes(), {{"x", seeded_tensor({1, 32, 20, 20}, 4)}}};
  Model model = load_test_model(m);
  PlanOptions cheap_moves;  // so the pair stays channels-last
  cheap_moves.machine.transpose_flops = 0.01;
  auto plan = make_plan(bound_graph(model), cheap_moves);
  const bool rows = kernels::conv_row_supported(kernels::active_isa(), kernels::Precision::f32);
  EXPECT_EQ(count_op(*plan, "ConvNhwc"), rows ? 2 : 1);
  for (const Node& n : plan->graph.nodes) EXPECT_FALSE(reads_x_nchw(n)) << n.name;
  expect_plan_computes(plan, m, run_reference(bound_graph(model), m.inputs), {1, 2}, "squeeze then expand");
}

// x [1, 64, 12, 12] -> 1x1 expand (384) + ReLU -> depthwise 3x3 (384) + ReLU -> 1x1 project
// (64) + x: a MobileNetV2 block.
TestModel inverted_residual() {
  OnnxBuilder b(13);
  b.input("x", kF32, {1, 64, 12, 12}).output("y", kF32, {1, 64, 12, 12});
  weight(b, "we", {384, 64, 1, 1}, 1);
  weight(b, "wd", {384, 1, 3, 3}, 2);
  weight(b, "bd", {384}, 3);
  weight(b, "wp", {64, 384, 1, 1}, 4);
  b.node("Conv", {"x", "we"}, {"e"}, "expand");
  b.node("Relu", {"e"}, {"er"}, "expand_relu");
  auto& d = b.node("Conv", {"er", "wd", "bd"}, {"d"}, "depthwise");
  OnnxBuilder::attr_int(d, "group", 384);
  OnnxBuilder::attr_ints(d, "pads", {1, 1, 1, 1});
  b.node("Relu", {"d"}, {"dr"}, "depthwise_relu");
  b.node("Conv", {"dr", "wp"}, {"p"}, "project");
  b.node("Add", {"p", "x"}, {"y"}, "add");
  return {"inverted_residual", b.bytes(), {{"x", seeded_tensor({1, 64, 12, 12}, 5)}}};
}

// The depthwise conv runs channels-last between the two 1x1 convs, so the block needs only the
// Transposes at its ends; priced so that its Transposes outweigh its products, the whole block,
// depthwise conv included, goes back to NCHW.
TEST(LayoutF32, DepthwiseConvsRunChannelsLastBetweenTheirNeighbours) {
  const TestModel m = inverted_residual();
  Model model = load_test_model(m);
  const TensorMap want = run_reference(bound_graph(model), m.inputs);
  PlanOptions apart;
  apart.debug.fuse_expand_depthwise = false;
  auto plan = make_plan(bound_graph(model), apart);
  EXPECT_EQ(plan->channels_last_convs, 3);
  EXPECT_EQ(count_op(*plan, "DepthwiseConvNhwc"), 1);
  EXPECT_EQ(count_op(*plan, "ConvNhwc"), 2);
  EXPECT_EQ(count_op(*plan, "Transpose"), 2);  // x in, y out
  expect_plan_computes(plan, m, want, {1, 3}, "channels-last block");
  auto back = plan_with_costly_transposes(bound_graph(model));
  EXPECT_EQ(back->channels_last_convs, 0);
  EXPECT_EQ(count_op(*back, "DepthwiseConvNhwc"), 0);
  EXPECT_EQ(count_op(*back, "Conv"), 3);
  expect_plan_computes(back, m, want, {2}, "the block back in NCHW");
}

// A plan with fused nodes against the plan that runs them apart: the same FLOPs, the reference's
// outputs on 1-3 workers, and outputs bit for bit the separate plan's in random tile orders
// with poisoned buffers.
template <class PlanPtr>
void expect_fused_as_apart(const PlanPtr& fused, const PlanPtr& separate, const TestModel& m, const TensorMap& want,
                           const char* what) {
  EXPECT_EQ(fused->total_flops, separate->total_flops);
  expect_plan_computes(fused, m, want, {1, 2, 3}, what);
  for (uint32_t seed : {1u, 2u}) {
    PlannedRun one(fused, m.inputs, PlannedRunOptions{true}), two(separate, m.inputs, PlannedRunOptions{true});
    run_serial(one, seed);
    run_serial(two, seed);
    expect_close(one.outputs(), two.outputs(), 0, "fused against apart");
  }
}

// By default the expand conv and the depthwise conv that alone reads it run as one
// ExpandDepthwiseNhwc (passes/fuse_expand_depthwise.cpp): the same FLOPs, and the outputs bit
// for bit those of the plan that runs them apart, in random tile orders with poisoned buffers.
// An expand conv whose output has another reader stays apart.
TEST(LayoutF32, AnExpandConvAndTheDepthwiseConvAfterItRunAsOne) {
  const TestModel m = inverted_residual();
  Model model = load_test_model(m);
  const TensorMap want = run_reference(bound_graph(model), m.inputs);
  PlanOptions apart;
  apart.debug.fuse_expand_depthwise = false;
  for (int threads : {1, 3}) {
    PlanOptions options;
    options.debug.fuse_depthwise_project = false;  // on a CPU with a small L2 the project conv would join
    options.threads = apart.threads = threads;
    auto fused = make_plan(bound_graph(model), options);
    auto separate = make_plan(bound_graph(model), apart);
    EXPECT_EQ(count_op(*fused, "ExpandDepthwiseNhwc"), 1);
    EXPECT_EQ(count_op(*fused, "DepthwiseConvNhwc"), 0);
    EXPECT_EQ(count_op(*fused, "ConvNhwc"), 1);  // the project conv
    expect_fused_as_apart(fused, separate, m, want, "fused block");
  }
  // The expanded value also read by another node: no fusion.
  OnnxBuilder b(13);
  b.input("x", kF32, {1, 64, 12, 12}).output("d", kF32, {1, 384, 12, 12}).output("z", kF32, {1, 384, 12, 12});
  weight(b, "we", {384, 64, 1, 1}, 1);
  weight(b, "wd", {384, 1, 3, 3}, 2);
  b.node("Conv", {"x", "we"}, {"e"}, "expand");
  auto& d = b.node("Conv", {"e", "wd"}, {"d"}, "depthwise");
  OnnxBuilder::attr_int(d, "group", 384);
  OnnxBuilder::attr_ints(d, "pads", {1, 1, 1, 1});
  b.node("Sigmoid", {"e"}, {"z"}, "another_reader");
  const TestModel shared{"shared_expand", b.bytes(), {{"x", seeded_tensor({1, 64, 12, 12}, 7)}}};
  Model two(load_test_model(shared));
  EXPECT_EQ(count_op(*make_plan(bound_graph(two), PlanOptions{}), "ExpandDepthwiseNhwc"), 0);
}

// x [1, 3, 114, 114] -> stem Conv 3x3 stride 2 (32) + Clip -> depthwise 3x3 + Clip -> Conv 1x1
// (16) -> expand Conv 1x1 (96) + Clip -> depthwise 3x3 + Clip -> Conv 1x1 (16) -> Add: a
// MobileNetV2's first blocks, the depthwise outputs 57x57x32 and 57x57x96.
TestModel mobilenet_head() {
  OnnxBuilder b(13);
  b.input("x", kF32, {1, 3, 114, 114}).output("y", kF32, {1, 16, 57, 57});
  weight(b, "ws", {32, 3, 3, 3}, 1);
  weight(b, "wd1", {32, 1, 3, 3}, 2);
  weight(b, "wp1", {16, 32, 1, 1}, 3);
  weight(b, "we2", {96, 16, 1, 1}, 4);
  weight(b, "wd2", {96, 1, 3, 3}, 5);
  weight(b, "wp2", {16, 96, 1, 1}, 6);
  weight(b, "bp2", {16}, 7);
  b.initializer_f32("lo", {}, {0.0f});
  b.initializer_f32("hi", {}, {6.0f});
  auto clip = [&](const std::string& in, const std::string& out) { b.node("Clip", {in, "lo", "hi"}, {out}, out); };
  auto& stem = b.node("Conv", {"x", "ws"}, {"s"}, "stem");
  OnnxBuilder::attr_ints(stem, "strides", {2, 2});
  OnnxBuilder::attr_ints(stem, "pads", {1, 1, 1, 1});
  clip("s", "s6");
  for (const auto& [in, n, c] : std::vector<std::tuple<std::string, std::string, int64_t>>{{"s6", "1", 32}, {"e6", "2", 96}}) {
    auto& d = b.node("Conv", {in, "wd" + n}, {"d" + n}, "depthwise" + n);
    OnnxBuilder::attr_int(d, "group", c);
    OnnxBuilder::attr_ints(d, "pads", {1, 1, 1, 1});
    clip("d" + n, "d6_" + n);
    if (n == "1") {
      b.node("Conv", {"d6_1", "wp1"}, {"p1"}, "project1");
      b.node("Conv", {"p1", "we2"}, {"e"}, "expand2");
      clip("e", "e6");
    }
  }
  b.node("Conv", {"d6_2", "wp2", "bp2"}, {"p2"}, "project2");
  b.node("Add", {"p2", "p1"}, {"y"}, "add");
  return {"mobilenet_head", b.bytes(), {{"x", seeded_tensor({1, 3, 114, 114}, 9)}}};
}

// By default a MobileNet's stem joins the depthwise conv after it where the CPU has the row
// conv, and a block's project conv joins its ExpandDepthwiseNhwc where one image's depthwise
// output outgrows half of L2 (InvertedResidualNhwc, its residual Add too): the same FLOPs, and
// the outputs bit for bit those of the plan that runs them apart, in random tile orders with
// poisoned buffers.
TEST(LayoutF32, AMobileNetsStemAndProjectConvsJoinTheirDepthwiseConvs) {
  const bool rows = kernels::conv_row_supported(kernels::active_isa(), kernels::Precision::f32);
  const int64_t half_l2 = (kernels::cpu_info().l2_bytes > 0 ? kernels::cpu_info().l2_bytes : int64_t{1} << 20) / 2;
  const bool project1 = rows && 57 * 57 * 32 * 4 > half_l2, project2 = 57 * 57 * 96 * 4 > half_l2;
  const TestModel m = mobilenet_head();
  Model model = load_test_model(m);
  const TensorMap want = run_reference(bound_graph(model), m.inputs);
  PlanOptions options, apart;
  options.machine.transpose_flops = apart.machine.transpose_flops = 0.01;  // so the stem goes channels-last
  apart.debug.fuse_expand_depthwise = false;
  for (int threads : {1, 3}) {
    options.threads = apart.threads = threads;
    auto fused = make_plan(bound_graph(model), options);
    auto separate = make_plan(bound_graph(model), apart);
    EXPECT_EQ(count_op(*separate, "DepthwiseConvNhwc"), 2);
    EXPECT_EQ(count_op(*fused, "DepthwiseConvNhwc"), rows ? 0 : 1);
    EXPECT_EQ(count_op(*fused, "InvertedResidualNhwc"), int(project1) + int(project2));
    EXPECT_EQ(count_op(*fused, "ExpandDepthwiseNhwc") + count_op(*fused, "InvertedResidualNhwc"), rows ? 2 : 1);
    expect_fused_as_apart(fused, separate, m, want, "fused blocks");
  }
  options.debug.fuse_depthwise_project = false;
  EXPECT_EQ(count_op(*make_plan(bound_graph(model), options), "InvertedResidualNhwc"), 0);
}

// x [1, 3, 45, 45] -> stem Conv 7x7 stride 2 (32) + Relu -> MaxPool 3x3 stride 2 -> Conv 1x1
// (64) + Relu -> Conv 3x3 (32): ResNet-50's stem, channels-last.
TestModel stem_and_pool(bool pool_output_too) {
  OnnxBuilder b(13);
  b.input("x", kF32, {1, 3, 45, 45}).output("y", kF32, {1, 32, 12, 12});
  if (pool_output_too) b.output("r", kF32, {1, 32, 23, 23});
  weight(b, "ws", {32, 3, 7, 7}, 1);
  weight(b, "bs", {32}, 2);
  weight(b, "w1", {64, 32, 1, 1}, 3);
  weight(b, "w3", {32, 64, 3, 3}, 4);
  auto& stem = b.node("Conv", {"x", "ws", "bs"}, {"s"}, "stem");
  OnnxBuilder::attr_ints(stem, "strides", {2, 2});
  OnnxBuilder::attr_ints(stem, "pads", {3, 3, 3, 3});
  b.node("Relu", {"s"}, {"r"}, "stem_relu");
  auto& pool = b.node("MaxPool", {"r"}, {"p"}, "pool");
  OnnxBuilder::attr_ints(pool, "kernel_shape", {3, 3});
  OnnxBuilder::attr_ints(pool, "strides", {2, 2});
  OnnxBuilder::attr_ints(pool, "pads", {1, 1, 1, 1});
  b.node("Conv", {"p", "w1"}, {"c1"}, "one");
  b.node("Relu", {"c1"}, {"c1r"}, "one_relu");
  OnnxBuilder::attr_ints(b.node("Conv", {"c1r", "w3"}, {"y"}, "three"), "pads", {1, 1, 1, 1});
  return {"stem_and_pool", b.bytes(), {{"x", seeded_tensor({1, 3, 45, 45}, 8)}}};
}

// By default a channels-last conv and the max pool that alone reads it run as one
// ConvMaxPoolNhwc where the CPU has the row conv (passes/fuse_conv_max_pool.cpp): the same
// FLOPs, and the outputs bit for bit those of the plan that runs them apart, in random tile
// orders with poisoned buffers. A conv output that something else reads stays apart.
TEST(LayoutF32, AConvAndTheMaxPoolAfterItRunAsOne) {
  const bool rows = kernels::conv_row_supported(kernels::active_isa(), kernels::Precision::f32);
  const TestModel m = stem_and_pool(false);
  Model model = load_test_model(m);
  const TensorMap want = run_reference(bound_graph(model), m.inputs);
  PlanOptions options, apart;
  options.machine.transpose_flops = apart.machine.transpose_flops = 0.01;  // so the stem goes channels-last
  apart.debug.fuse_conv_max_pool = false;
  for (int threads : {1, 3}) {
    options.threads = apart.threads = threads;
    auto fused = make_plan(bound_graph(model), options);
    auto separate = make_plan(bound_graph(model), apart);
    EXPECT_EQ(count_op(*separate, "MaxPoolNhwc"), rows ? 1 : 0);
    EXPECT_EQ(count_op(*fused, "ConvMaxPoolNhwc"), rows ? 1 : 0);
    EXPECT_EQ(count_op(*fused, "MaxPoolNhwc"), 0);
    expect_fused_as_apart(fused, separate, m, want, "fused stem");
  }
  const TestModel shared = stem_and_pool(true);
  Model two(load_test_model(shared));
  auto plan = make_plan(bound_graph(two), options);
  EXPECT_EQ(count_op(*plan, "ConvMaxPoolNhwc"), 0);
  expect_plan_computes(plan, shared, run_reference(bound_graph(two), shared.inputs), {2}, "stem read twice");
}

// A tuning choice "nhwc" (grove tune) puts a conv channels-last whatever the rule says, even a
// cheap one or a first layer; a grouped conv cannot take it, and the error names the node.
TEST(LayoutF32, AnNhwcChoiceForcesChannelsLast) {
  OnnxBuilder b(13);
  b.input("x", kF32, {1, 16, 8, 8}).input("img", kF32, {1, 3, 8, 8});
  b.output("y", kF32, {1, 16, 8, 8}).output("z", kF32, {1, 64, 8, 8}).output("g", kF32, {1, 16, 8, 8});
  weight(b, "w", {16, 16, 1, 1}, 1);
  weight(b, "wi", {64, 3, 3, 3}, 2);
  weight(b, "wg", {16, 8, 1, 1}, 3);
  b.node("Conv", {"x", "w"}, {"c"}, "small");
  b.node("Sigmoid", {"c"}, {"y"}, "sigmoid");
  OnnxBuilder::attr_ints(b.node("Conv", {"img", "wi"}, {"z"}, "first_layer"), "pads", {1, 1, 1, 1});
  // With a residual fused in, a grouped conv stays grouped (passes/split_grouped_convs.cpp).
  OnnxBuilder::attr_int(b.node("Conv", {"x", "wg"}, {"gc"}, "grouped"), "group", 2);
  b.node("Add", {"gc", "x"}, {"g"}, "residual");
  const TensorMap inputs{{"x", seeded_tensor({1, 16, 8, 8}, 4)}, {"img", seeded_tensor({1, 3, 8, 8}, 5)}};
  Model model = model_from_graph(load_onnx_bytes(b.bytes(), "forced.onnx"));
  PlanOptions options;
  options.choices = {NodeChoice{"small", "nhwc", {}}, NodeChoice{"first_layer", "nhwc", {1, 8, 8, 32}}};
  auto plan = make_plan(bound_graph(model), options);
  EXPECT_EQ(plan->channels_last_convs, 2);
  EXPECT_EQ(count_op(*plan, "ConvNhwc"), 2);
  PlannedRun run(plan, inputs, PlannedRunOptions{true});
  run_serial(run, 8);
  expect_close(run.outputs(), run_reference(bound_graph(model), inputs), 1e-4, "forced channels-last");
  options.choices = {NodeChoice{"grouped", "nhwc", {}}};
  try {
    make_plan(bound_graph(model), options);
    ADD_FAILURE() << "a grouped conv took an nhwc choice";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("grouped"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("one group"), std::string::npos) << e.what();
  }
  // The channels-last Winograd only where Winograd fits: not a 1x1 conv, nor 3 input channels.
  for (const char* node : {"small", "first_layer"})
  for (const char* form : {"winograd_nhwc", "winograd_f2x3_nhwc"}) {
    options.choices = {NodeChoice{node, form, {}}};
    try {
      make_plan(bound_graph(model), options);
      ADD_FAILURE() << node << " took a " << form << " choice";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(node), std::string::npos) << e.what();
      EXPECT_NE(std::string(e.what()).find("Winograd cannot run"), std::string::npos) << e.what();
    }
  }
}

// Two cheap convs linked by a value form a group the cost check sends back to NCHW; when the
// second is chosen "nhwc" the group stays channels-last whole (it reads the first's
// channels-last output: sending the first back alone left that value with no producer).
TEST(LayoutF32, AChosenConvKeepsItsGroupChannelsLast) {
  OnnxBuilder b(13);
  b.input("x", kF32, {1, 16, 8, 8}).output("y", kF32, {1, 32, 8, 8});
  weight(b, "wa", {32, 16, 1, 1}, 1);
  weight(b, "wb", {32, 32, 1, 1}, 2);
  b.node("Conv", {"x", "wa"}, {"a"}, "first");
  b.node("Conv", {"a", "wb"}, {"c"}, "second");
  b.node("Sigmoid", {"c"}, {"y"}, "sigmoid");
  const TensorMap inputs{{"x", seeded_tensor({1, 16, 8, 8}, 6)}};
  Model model = model_from_graph(load_onnx_bytes(b.bytes(), "group.onnx"));
  EXPECT_EQ(make_plan(bound_graph(model), PlanOptions{})->channels_last_convs, 0);  // too cheap by the rule
  PlanOptions options;
  options.choices = {NodeChoice{"second", "nhwc", {}}};
  auto plan = make_plan(bound_graph(model), options);
  EXPECT_EQ(plan->channels_last_convs, 2);
  PlannedRun run(plan, inputs, PlannedRunOptions{true});
  run_serial(run, 9);
  expect_close(run.outputs(), run_reference(bound_graph(model), inputs), 1e-4, "chosen group");
}

}  // namespace
}  // namespace grove
