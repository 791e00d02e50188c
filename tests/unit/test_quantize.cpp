// The quantization ops: QuantizeLinear's rounding (half to even) and saturation per output
// dtype, per-axis and blocked scales, DequantizeLinear, DynamicQuantizeLinear's range and
// its all-zero input, MatMulInteger / QLinearMatMul against hand sums, and the MatMulInteger
// tile rule (integer GEMM kernel) against the reference over grids, exactly.
#include <cstring>
#include <random>

#include "graph/node_decisions.h"
#include "kernels/isa.h"
#include "ops/op.h"
#include "ops/conv/channels_last.h"
#include "ops/quant_util.h"
#include "op_test_util.h"
#include "tiling_test_util.h"

namespace grove {
namespace {

using optest::f32;
using optest::NodeBuilder;
using optest::run;
using optest::run_all;

template <class T>
Tensor typed(Shape shape, std::vector<T> v) { return Tensor::from<T>(std::move(shape), v); }

template <class T>
std::vector<int64_t> values(const Tensor& t) { return t.to_i64(); }

TEST(QuantizeLinear, RoundsHalfToEvenAndSaturates) {
  Tensor x = f32({8}, {0.5f, 1.5f, 2.5f, -0.5f, -1.5f, 300.0f, -300.0f, 2.4f});
  Tensor scale = Tensor::scalar<float>(1.0f);
  Tensor u8_zp = Tensor::scalar<uint8_t>(10);
  EXPECT_EQ(run(NodeBuilder("QuantizeLinear", 13, 3), {&x, &scale, &u8_zp}).to_i64(),
            (std::vector<int64_t>{10, 12, 12, 10, 8, 255, 0, 12}));
  Tensor i8_zp = Tensor::scalar<int8_t>(-1);
  EXPECT_EQ(run(NodeBuilder("QuantizeLinear", 13, 3), {&x, &scale, &i8_zp}).to_i64(),
            (std::vector<int64_t>{-1, 1, 1, -1, -3, 127, -128, 1}));
  Tensor i16_zp = Tensor::scalar<int16_t>(0);
  Tensor y16 = run(NodeBuilder("QuantizeLinear", 21, 3), {&x, &scale, &i16_zp});
  EXPECT_EQ(y16.dtype(), DType::i16);
  EXPECT_EQ(y16.to_i64(), (std::vector<int64_t>{0, 2, 2, 0, -2, 300, -300, 2}));
  // No zero point: uint8.
  Tensor y = run(NodeBuilder("QuantizeLinear", 13, 2), {&x, &scale});
  EXPECT_EQ(y.dtype(), DType::u8);
  EXPECT_EQ(y.to_i64(), (std::vector<int64_t>{0, 2, 2, 0, 0, 255, 0, 2}));
}

// The branch-free rounding equals std::nearbyint (round half to even) on every half and on
// a spread of other values across the range it is used on.
TEST(QuantizeLinear, RoundHalfEvenMatchesNearbyint) {
  std::mt19937 rng(3);
  std::uniform_real_distribution<float> spread(-1e6f, 1e6f);
  for (int i = -70000; i <= 70000; ++i) {
    float half = static_cast<float>(i) + 0.5f;
    ASSERT_EQ(round_half_even(half), std::nearbyint(half)) << half;
    float v = spread(rng);
    ASSERT_EQ(round_half_even(v), std::nearbyint(v)) << v;
  }
  EXPECT_EQ(saturate_round<int16_t>(1e30f, 0.0f), 32767);
  EXPECT_EQ(saturate_round<uint8_t>(-1e30f, 3.0f), 0);
  EXPECT_EQ(saturate_round<uint8_t>(std::nanf(""), 3.0f), 3);
}

TEST(QuantizeLinear, PerAxisAndBlocked) {
  Tensor x = optest::iota_f32({2, 3, 2});  // 0..11
  Tensor scale = f32({3}, {1.0f, 2.0f, 4.0f});
  Tensor zp = typed<uint8_t>({3}, {0, 1, 2});
  // axis 1: element (i, c, j) uses scale[c].
  EXPECT_EQ(run(NodeBuilder("QuantizeLinear", 13, 3).i("axis", 1), {&x, &scale, &zp}).to_i64(),
            (std::vector<int64_t>{0, 1, 2, 3, 3, 3, 6, 7, 5, 5, 4, 5}));
  // Blocks of 2 along the last axis of a [2, 4] x: scale [2, 2].
  Tensor xb = optest::iota_f32({2, 4});
  Tensor scale_b = f32({2, 2}, {1.0f, 2.0f, 4.0f, 8.0f});
  EXPECT_EQ(run(NodeBuilder("QuantizeLinear", 21, 2).i("axis", 1).i("block_size", 2), {&xb, &scale_b}).to_i64(),
            (std::vector<int64_t>{0, 1, 1, 2, 1, 1, 1, 1}));
  // A scale with the wrong length is a clean error.
  Tensor bad = f32({2}, {1.0f, 1.0f});
  EXPECT_THROW(run(NodeBuilder("QuantizeLinear", 13, 2).i("axis", 1), {&x, &bad}), Error);
}

TEST(QuantizeLinear, ZeroScaleIsAnError) {
  Tensor x = f32({2}, {1.0f, 2.0f});
  Tensor scale = f32({2}, {1.0f, 0.0f});
  try {
    run(NodeBuilder("QuantizeLinear", 13, 2).i("axis", 0), {&x, &scale});
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("node 'n' (QuantizeLinear)"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("non-zero"), std::string::npos) << e.what();
  }
}

TEST(DequantizeLinear, PerAxisInt8AndInt32) {
  Tensor x = typed<int8_t>({2, 2}, {-128, 127, 0, 5});
  Tensor scale = f32({2}, {0.5f, 2.0f});
  Tensor zp = typed<int8_t>({2}, {0, 1});
  Tensor y = run(NodeBuilder("DequantizeLinear", 13, 3).i("axis", 0), {&x, &scale, &zp});
  EXPECT_EQ(y.to_f64(), (std::vector<double>{-64.0, 63.5, -2.0, 8.0}));
  Tensor x32 = typed<int32_t>({2}, {-100000, 7});
  Tensor s = Tensor::scalar<float>(0.25f);
  EXPECT_EQ(run(NodeBuilder("DequantizeLinear", 13, 2), {&x32, &s}).to_f64(), (std::vector<double>{-25000.0, 1.75}));
}

TEST(DynamicQuantizeLinear, RangeHoldsZeroAndAllZeroInputIsExact) {
  Tensor x = f32({4}, {1.0f, 2.0f, 3.0f, 5.1f});  // min clamps to 0
  std::vector<Tensor> out = run_all(NodeBuilder("DynamicQuantizeLinear", 11, 1, 3), {&x});
  float scale = out[1].data<float>()[0];
  EXPECT_FLOAT_EQ(scale, 5.1f / 255.0f);
  EXPECT_EQ(out[2].to_i64(), (std::vector<int64_t>{0}));
  EXPECT_EQ(out[0].to_i64().back(), 255);
  Tensor zeros = f32({3}, {0.0f, 0.0f, 0.0f});
  out = run_all(NodeBuilder("DynamicQuantizeLinear", 11, 1, 3), {&zeros});
  EXPECT_EQ(out[0].to_i64(), (std::vector<int64_t>{0, 0, 0}));
  EXPECT_EQ(out[1].to_f64(), (std::vector<double>{1.0}));
}

// Malformed quantized nodes are clean errors naming the node, never crashes.
TEST(QuantizedOps, BadInputsAreCleanErrors) {
  auto expect_error = [](const Node& node, std::vector<const Tensor*> in, const char* text) {
    try {
      run(node, in);
      ADD_FAILURE() << node.op_type << ": no error";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("node 'n' (" + node.op_type + ")"), std::string::npos) << e.what();
      EXPECT_NE(std::string(e.what()).find(text), std::string::npos) << e.what();
    }
  };
  Tensor a = typed<uint8_t>({2, 3}, {1, 2, 3, 4, 5, 6});
  Tensor b = typed<int8_t>({3, 2}, {1, 2, 3, 4, 5, 6});
  Tensor f = f32({2, 3}, {1, 2, 3, 4, 5, 6});
  Tensor zp_wrong_type = Tensor::scalar<int8_t>(0);
  Tensor zp_wrong_size = typed<uint8_t>({3}, {0, 0, 0});
  Tensor b_bad_k = typed<int8_t>({4, 2}, {1, 2, 3, 4, 5, 6, 7, 8});
  expect_error(NodeBuilder("MatMulInteger", 10, 2), {&f, &b}, "float32");
  expect_error(NodeBuilder("MatMulInteger", 10, 3), {&a, &b, &zp_wrong_type}, "a_zero_point");
  expect_error(NodeBuilder("MatMulInteger", 10, 3), {&a, &b, &zp_wrong_size}, "a_zero_point");
  expect_error(NodeBuilder("MatMulInteger", 10, 2), {&a, &b_bad_k}, "inner dimensions");
  Tensor scale = Tensor::scalar<float>(1.0f);
  Tensor scale3 = f32({3}, {1, 1, 1});
  expect_error(NodeBuilder("QuantizeLinear", 13, 2).i("axis", 5), {&f, &scale3}, "axis");  // ignored for one scale
  expect_error(NodeBuilder("QuantizeLinear", 13, 2).i("axis", 0), {&f, &scale3}, "scale");
  Tensor blocked = f32({2, 1}, {1, 1});
  expect_error(NodeBuilder("QuantizeLinear", 21, 2).i("axis", 1).i("block_size", 2), {&f, &blocked}, "blocked scale");
  Tensor nan_x = f32({2}, {1.0f, std::nanf("")});
  expect_error(NodeBuilder("DynamicQuantizeLinear", 11, 1, 3), {&nan_x}, "NaN");
  Tensor x4 = typed<uint8_t>({1, 2, 4, 4}, std::vector<uint8_t>(32, 1));
  Tensor w4 = typed<int8_t>({3, 2, 3, 3}, std::vector<int8_t>(54, 1));
  Tensor w_zp_bad = typed<int8_t>({2}, {0, 0});
  expect_error(NodeBuilder("ConvInteger", 10, 4), {&x4, &w4, nullptr, &w_zp_bad}, "w_zero_point");
}

TEST(MatMulInteger, PerRowAndPerColumnZeroPoints) {
  Tensor a = typed<uint8_t>({2, 3}, {1, 2, 3, 4, 5, 6});
  Tensor b = typed<int8_t>({3, 2}, {1, -1, 2, -2, 3, -3});
  Tensor za = typed<uint8_t>({2}, {1, 4});
  Tensor zb = typed<int8_t>({2}, {0, -1});
  // Rows of A - za: [0 1 2], [0 1 2]; columns of B - zb: [1 2 3], [0 -1 -2].
  Tensor y = run(NodeBuilder("MatMulInteger", 10, 4), {&a, &b, &za, &zb});
  EXPECT_EQ(y.dtype(), DType::i32);
  EXPECT_EQ(y.to_i64(), (std::vector<int64_t>{8, -5, 8, -5}));
}

TEST(QLinearMatMul, RequantizesWithRoundingAndSaturation) {
  Tensor a = typed<uint8_t>({1, 2}, {3, 5});
  Tensor b = typed<uint8_t>({2, 2}, {1, 200, 1, 200});
  Tensor one = Tensor::scalar<float>(1.0f), half = Tensor::scalar<float>(0.5f);
  Tensor zero = Tensor::scalar<uint8_t>(0), y_zp = Tensor::scalar<uint8_t>(1);
  // Sums 8 and 1600, times 0.5 / 1: 4 + 1 = 5, 800 saturates to 255.
  Tensor y = run(NodeBuilder("QLinearMatMul", 10, 8), {&a, &half, &zero, &b, &one, &zero, &one, &y_zp});
  EXPECT_EQ(y.to_i64(), (std::vector<int64_t>{5, 255}));
}

Tensor random_bytes(DType dtype, Shape shape, uint32_t seed) {
  Tensor t(dtype, std::move(shape));
  std::mt19937 rng(seed);
  for (size_t i = 0; i < t.bytes(); ++i) reinterpret_cast<uint8_t*>(t.raw())[i] = static_cast<uint8_t>(rng());
  return t;
}

TEST(MatMulInteger, TileRuleMatchesReferenceExactly) {
  struct Case { Shape a, b; DType at, bt; Shape za, zb; };
  const std::vector<Case> cases = {
      {{7, 33}, {33, 19}, DType::u8, DType::i8, {}, {}},
      {{13, 5}, {5, 17}, DType::u8, DType::u8, {1}, {17}},
      {{2, 9, 20}, {20, 3}, DType::i8, DType::i8, {9}, {}},   // batched A, 2-D B
      {{3, 1, 6, 11}, {2, 11, 5}, DType::u8, DType::i8, {}, {1}},  // broadcast batch dims
      {{11}, {11, 7}, DType::u8, DType::i8, {}, {}},          // 1-D A
      {{4, 11}, {11}, DType::u8, DType::u8, {}, {}},          // 1-D B
  };
  uint32_t seed = 1;
  for (const Case& c : cases) {
    std::vector<Tensor> in = {random_bytes(c.at, c.a, seed++), random_bytes(c.bt, c.b, seed++)};
    in.push_back(c.za.empty() ? Tensor() : random_bytes(c.at, c.za, seed++));
    in.push_back(c.zb.empty() ? Tensor() : random_bytes(c.bt, c.zb, seed++));
    auto stats = tiletest::check_tiling(NodeBuilder("MatMulInteger", 10, 4), in, 0.0);
    EXPECT_GT(stats.tiles, 1u) << shape_str(c.a) << " x " << shape_str(c.b);
  }
}

}  // namespace
}  // namespace grove

namespace grove {
namespace {

// check_tiling poisons only float inputs; this poisons the bytes of integer inputs outside
// what `needs` names, so a tile that reads past its needs gets a wrong sum.
void check_needs_cover_reads(const Node& node, const std::vector<Tensor>& inputs, const std::vector<int64_t>& sizes) {
  std::vector<const Tensor*> whole;
  for (const Tensor& t : inputs) whole.push_back(t.empty() ? nullptr : &t);
  const Tensor want = evaluate_node(node, whole).at(0);
  std::mt19937 rng(5);
  for (const Region& tile : tiletest::grid(want.shape(), sizes)) {
    std::vector<Region> needs = tiletest::needs_of(node, inputs, tile);
    std::vector<Tensor> bad;
    std::vector<const Tensor*> in;
    for (size_t i = 0; i < inputs.size(); ++i) {
      if (inputs[i].empty() || inputs[i].rank() == 0) {  // a scalar's region is {} whether read or not
        bad.push_back(inputs[i]);
        continue;
      }
      Tensor p = inputs[i].clone();
      for (size_t b = 0; b < p.bytes(); ++b) reinterpret_cast<uint8_t*>(p.raw())[b] = static_cast<uint8_t>(rng());
      if (!needs[i].empty()) tiling::insert_region(p, needs[i], tiling::extract_region(inputs[i], needs[i]));
      bad.push_back(std::move(p));
    }
    for (const Tensor& t : bad) in.push_back(t.empty() ? nullptr : &t);
    Tensor got(want.dtype(), want.shape());
    std::vector<Tensor*> out = {&got};
    TileScratch scratch;
    find_tile_rule(node)->run_tile(node, in, out, tile, nullptr, scratch);
    EXPECT_EQ(tiling::extract_region(got, tile).to_i64(), tiling::extract_region(want, tile).to_i64())
        << node.op_type << " tile " << region_str(tile);
  }
}

// Per output channel: scales step, 2 step, ... and int32 biases in [-1000, 1000].
Tensor channel_scales(int64_t m, float step) {
  std::vector<float> v;
  for (int64_t i = 0; i < m; ++i) v.push_back(step * static_cast<float>(i + 1));
  return f32({m}, v);
}
Tensor random_bias(int64_t m, uint32_t seed) {
  Tensor bias(DType::i32, {m});
  std::mt19937 rng(seed);
  for (int32_t& v : bias.span<int32_t>()) v = static_cast<int32_t>(rng() % 2001) - 1000;
  return bias;
}

TEST(ConvInteger, TileRuleMatchesReferenceExactly) {
  struct Case { Shape x, w; DType xt, wt; Shape w_zero; int64_t group, stride, pad, dilation; };
  const std::vector<Case> cases = {
      {{2, 3, 9, 7}, {5, 3, 3, 3}, DType::u8, DType::i8, {5}, 1, 1, 1, 1},
      {{1, 4, 8, 8}, {6, 2, 3, 3}, DType::u8, DType::u8, {}, 2, 2, 1, 1},
      {{1, 8, 10, 9}, {8, 1, 3, 3}, DType::i8, DType::i8, {1}, 8, 1, 2, 2},  // depthwise, dilated
      {{3, 16, 5, 5}, {33, 16, 1, 1}, DType::u8, DType::i8, {}, 1, 1, 0, 1},
      {{2, 6, 11, 9}, {6, 1, 3, 3}, DType::u8, DType::i8, {6}, 6, 2, 1, 1},  // depthwise, stride 2
      // On VNNI CPUs the 8-bit kernel with per-row offsets: uint8 W (ONNX Runtime's dynamic
      // quantization) read straight (1x1) and through windows, int8 x, per-channel zero points.
      {{2, 16, 6, 6}, {20, 16, 1, 1}, DType::u8, DType::u8, {20}, 1, 1, 0, 1},
      {{1, 5, 7, 7}, {9, 5, 3, 3}, DType::i8, DType::u8, {}, 1, 1, 1, 1},
      {{1, 4, 9, 9}, {30, 4, 3, 3}, DType::u8, DType::u8, {1}, 1, 1, 2, 2},
      // Rows of windows past the band a tile lays out at once (128 KiB): one row per band.
      {{1, 64, 4, 240}, {16, 64, 3, 3}, DType::u8, DType::u8, {}, 1, 1, 1, 1},
  };
  uint32_t seed = 100;
  for (const Case& c : cases) {
    NodeBuilder node("ConvInteger", 10, 4);
    node.i("group", c.group).ints("strides", {c.stride, c.stride}).ints("pads", {c.pad, c.pad, c.pad, c.pad});
    node.ints("dilations", {c.dilation, c.dilation});
    std::vector<Tensor> in = {random_bytes(c.xt, c.x, seed++), random_bytes(c.wt, c.w, seed++),
                              random_bytes(c.xt, {}, seed++),
                              c.w_zero.empty() ? Tensor() : random_bytes(c.wt, c.w_zero, seed++)};
    auto stats = tiletest::check_tiling(node, in, 0.0);
    EXPECT_GT(stats.tiles, 1u) << shape_str(c.x);
    check_needs_cover_reads(node, in, {1, 0, 2, 0});
  }
}

}  // namespace
}  // namespace grove

namespace grove {
namespace {

TEST(QLinearConv, TileRuleMatchesReferenceExactly) {
  struct Case { Shape x, w; DType xt, wt; int64_t group, stride, pad; bool bias; };
  const std::vector<Case> cases = {
      {{2, 3, 9, 7}, {5, 3, 3, 3}, DType::u8, DType::i8, 1, 1, 1, true},
      {{1, 4, 8, 8}, {6, 2, 3, 3}, DType::i8, DType::i8, 2, 2, 1, false},
      {{1, 6, 7, 7}, {6, 1, 3, 3}, DType::u8, DType::u8, 6, 1, 1, true},  // depthwise
  };
  uint32_t seed = 300;
  for (const Case& c : cases) {
    NodeBuilder node("QLinearConv", 10, 9);
    node.i("group", c.group).ints("strides", {c.stride, c.stride}).ints("pads", {c.pad, c.pad, c.pad, c.pad});
    const int64_t m = c.w[0];
    const Tensor bias = random_bias(m, seed);
    std::vector<Tensor> in = {random_bytes(c.xt, c.x, seed++), Tensor::scalar<float>(0.05f), random_bytes(c.xt, {}, seed++),
                              random_bytes(c.wt, c.w, seed++), channel_scales(m, 0.01f), random_bytes(c.wt, {m}, seed++),
                              Tensor::scalar<float>(0.7f), random_bytes(c.xt, {}, seed++), c.bias ? bias : Tensor()};
    auto stats = tiletest::check_tiling(node, in, 0.0);
    EXPECT_GT(stats.tiles, 1u) << shape_str(c.x);
    check_needs_cover_reads(node, in, {1, 0, 2, 0});
  }
}

// grove.internal QLinearConvNhwc (passes/layout_int8.cpp): channels-last x and y, every tile
// equal to QLinearConv's reference on the rotated tensors. The cases take each way the rule
// lays windows out: 1x1 stride 1 straight from x, whole window rows, padded and dilated taps,
// an int8 x (XOR 0x80), a first layer with 3 channels; channel cuts need M > 32; a weight
// zero point that is not 0 runs the reference.
TEST(QLinearConvNhwc, TileRuleMatchesReferenceExactly) {
  struct Case { Shape x, w; DType xt, yt; int64_t stride, pad, dilation; bool relu, w_zero; };
  const std::vector<Case> cases = {
      {{2, 6, 5, 8}, {40, 8, 1, 1}, DType::u8, DType::u8, 1, 0, 1, false, false},
      {{1, 9, 7, 12}, {36, 12, 3, 3}, DType::u8, DType::u8, 1, 1, 1, true, false},
      {{1, 11, 9, 5}, {33, 5, 3, 3}, DType::i8, DType::i8, 2, 1, 1, false, false},
      {{1, 12, 12, 3}, {8, 3, 7, 7}, DType::u8, DType::u8, 2, 3, 1, true, false},
      {{2, 8, 9, 4}, {9, 4, 3, 3}, DType::u8, DType::i8, 1, 2, 2, false, false},
      {{1, 6, 6, 6}, {40, 6, 1, 1}, DType::u8, DType::u8, 2, 0, 1, false, false},
      {{1, 5, 5, 4}, {6, 4, 3, 3}, DType::u8, DType::u8, 1, 1, 1, false, true},
  };
  uint32_t seed = 700;
  for (const Case& c : cases) {
    NodeBuilder node("QLinearConvNhwc", 13, 9);
    node.node.domain = kGroveDomain;
    node.ints("strides", {c.stride, c.stride}).ints("pads", {c.pad, c.pad, c.pad, c.pad});
    node.ints("dilations", {c.dilation, c.dilation});
    if (c.relu) node.node.decisions.epilogue.activation = FusedActivation::relu;
    const int64_t m = c.w[0];
    const Tensor bias = random_bias(m, seed);
    Tensor w_zero = c.w_zero ? random_bytes(DType::i8, {m}, seed++) : Tensor(DType::i8, {m});
    if (!c.w_zero) std::memset(w_zero.raw(), 0, w_zero.bytes());
    std::vector<Tensor> in = {random_bytes(c.xt, c.x, seed++), Tensor::scalar<float>(0.05f), random_bytes(c.xt, {}, seed++),
                              random_bytes(DType::i8, c.w, seed++), channel_scales(m, 0.002f), w_zero,
                              Tensor::scalar<float>(0.3f), random_bytes(c.yt, {}, seed++), bias};
    auto stats = tiletest::check_tiling(node, in, 0.0);
    EXPECT_GT(stats.tiles, 1u) << shape_str(c.x);
    check_needs_cover_reads(node, in, {1, 2, 0, m > 32 ? 32 : 0});
    // The same conv with a residual QLinearAdd fused after it (the add's Relu on odd cases).
    std::vector<const Tensor*> whole;
    for (const Tensor& t : in) whole.push_back(t.empty() ? nullptr : &t);
    const Shape y = evaluate_node(node, whole).at(0).shape();
    Node fused = node;
    for (const char* name : {"r", "r_scale", "r_zero", "c_scale", "c_zero", "z_scale", "z_zero"}) fused.inputs.push_back(name);
    if (seed % 2) fused.decisions.epilogue.residual_activation = FusedActivation::relu;
    in.push_back(random_bytes(c.yt, y, seed++));
    in.push_back(Tensor::scalar<float>(0.04f));
    in.push_back(random_bytes(c.yt, {}, seed++));
    in.push_back(Tensor::scalar<float>(0.3f));  // the conv's y_scale, as the add reads it
    in.push_back(in[7]);
    in.push_back(Tensor::scalar<float>(0.05f));
    in.push_back(random_bytes(c.yt, {}, seed++));
    tiletest::check_tiling(fused, in, 0.0);
    check_needs_cover_reads(fused, in, {1, 2, 0, m > 32 ? 32 : 0});
  }
}

// A 1x1 stride-1 conv padded only at the bottom: its extra output rows read no row past x
// (the kernel reads x in place only where output pixel p is input pixel p).
TEST(QLinearConvNhwc, OneByOneWithBottomPaddingReadsNoRowPastTheInput) {
  NodeBuilder node("QLinearConvNhwc", 13, 9);
  node.node.domain = kGroveDomain;
  node.ints("pads", {0, 0, 2, 0});
  uint32_t seed = 77;
  const int64_t m = 40;
  Tensor w_zero(DType::i8, {m});
  std::memset(w_zero.raw(), 0, w_zero.bytes());
  std::vector<Tensor> in = {random_bytes(DType::u8, {1, 5, 6, 8}, seed++), Tensor::scalar<float>(0.05f),
                            random_bytes(DType::u8, {}, seed++), random_bytes(DType::i8, {m, 8, 1, 1}, seed++),
                            channel_scales(m, 0.002f), w_zero, Tensor::scalar<float>(0.3f),
                            random_bytes(DType::u8, {}, seed++), random_bias(m, seed)};
  tiletest::check_tiling(node, in, 0.0);
  check_needs_cover_reads(node, in, {1, 2, 0, 0});
}

// grove.internal MaxPoolNhwc: MaxPool on channels-last bytes or floats, every tile equal to
// MaxPool's reference on the rotated tensor (channel counts off every vector width, and bytes
// past one 64-byte block of channels).
TEST(MaxPoolNhwc, TileRuleMatchesReferenceExactly) {
  struct Case { Shape x; DType t; int64_t kernel, stride, pad, dilation, ceil; };
  const std::vector<Case> cases = {
      {{2, 11, 9, 5}, DType::u8, 3, 2, 1, 1, 0},
      {{1, 8, 8, 16}, DType::i8, 2, 2, 0, 1, 0},
      {{1, 9, 10, 3}, DType::u8, 3, 1, 1, 2, 0},
      {{1, 10, 10, 4}, DType::i8, 3, 2, 0, 1, 1},
      {{1, 9, 8, 70}, DType::u8, 3, 2, 1, 1, 0},
      {{1, 6, 7, 128}, DType::i8, 3, 1, 1, 1, 0},
      {{2, 11, 9, 37}, DType::f32, 3, 2, 1, 1, 1},
      {{1, 9, 10, 5}, DType::f32, 3, 1, 1, 2, 0},
      {{1, 7, 7, 64}, DType::f32, 3, 1, 1, 1, 0},
  };
  uint32_t seed = 900;
  for (const Case& c : cases) {
    NodeBuilder node("MaxPoolNhwc", 13, 1);
    node.node.domain = kGroveDomain;
    node.ints("kernel_shape", {c.kernel, c.kernel}).ints("strides", {c.stride, c.stride});
    node.ints("pads", {c.pad, c.pad, c.pad, c.pad}).ints("dilations", {c.dilation, c.dilation}).i("ceil_mode", c.ceil);
    std::vector<Tensor> in = {c.t == DType::f32 ? tiletest::random_f32(c.x, seed++) : random_bytes(c.t, c.x, seed++)};
    auto stats = tiletest::check_tiling(node, in, 0.0);
    EXPECT_GT(stats.tiles, 1u) << shape_str(c.x);
    check_needs_cover_reads(node, in, {1, 2, 0, 0});
  }
}

TEST(QLinearConvNhwc, RotationsMoveChannelsLast) {
  Tensor t = random_bytes(DType::u8, {2, 3, 4, 5}, 9);
  Tensor r = nchw_to_nhwc(t);
  ASSERT_EQ(r.shape(), (Shape{2, 4, 5, 3}));
  for (int64_t n = 0; n < 2; ++n)
    for (int64_t c = 0; c < 3; ++c)
      for (int64_t h = 0; h < 4; ++h)
        for (int64_t w = 0; w < 5; ++w)
          ASSERT_EQ(r.data<uint8_t>()[((n * 4 + h) * 5 + w) * 3 + c], t.data<uint8_t>()[((n * 3 + c) * 4 + h) * 5 + w]);
  EXPECT_EQ(nhwc_to_nchw(r).to_i64(), t.to_i64());
}

}  // namespace
}  // namespace grove

namespace grove {
namespace {

// Symmetric int8 weights (zero points 0): where the CPU has AVX512_VNNI the prepared weights
// take the 8-bit kernel (kernels/qgemm.h), through byte windows or, for a 1x1 stride-1 conv,
// straight from x; uint8 and int8 x, groups, padding, and a fused Relu (passes/fuse_qdq.cpp).
TEST(QLinearConv, SymmetricWeightsMatchReferenceExactly) {
  struct Case { Shape x, w; DType xt; int64_t group, stride, pad; bool relu; int64_t pad_bottom = -1; };
  const std::vector<Case> cases = {
      {{2, 3, 9, 7}, {5, 3, 3, 3}, DType::u8, 1, 1, 1, false},
      // 1x1 padded only at the bottom: output rows past x, which a read in place would overrun.
      {{1, 16, 6, 5}, {20, 16, 1, 1}, DType::u8, 1, 1, 0, false, 2},
      {{1, 4, 8, 8}, {6, 2, 3, 3}, DType::i8, 2, 2, 1, true},
      {{2, 19, 6, 5}, {33, 19, 1, 1}, DType::u8, 1, 1, 0, true},   // 1x1: windows straight from x
      {{1, 16, 7, 7}, {20, 16, 1, 1}, DType::i8, 1, 2, 0, false},  // 1x1 stride 2: byte windows
      {{1, 5, 12, 11}, {7, 5, 5, 5}, DType::u8, 1, 1, 2, true},
  };
  uint32_t seed = 900;
  for (const Case& c : cases) {
    NodeBuilder node("QLinearConv", 10, 9);
    node.i("group", c.group).ints("strides", {c.stride, c.stride});
    node.ints("pads", {c.pad, c.pad, c.pad_bottom >= 0 ? c.pad_bottom : c.pad, c.pad});
    if (c.relu) node.epilogue("Relu", FusedActivation::relu);
    const int64_t m = c.w[0];
    const Tensor bias = random_bias(m, seed);
    Tensor w_zero(DType::i8, {m});
    std::fill_n(w_zero.data<int8_t>(), m, int8_t{0});
    std::vector<Tensor> in = {random_bytes(c.xt, c.x, seed++), Tensor::scalar<float>(0.05f), random_bytes(c.xt, {}, seed++),
                              random_bytes(DType::i8, c.w, seed++), channel_scales(m, 0.002f), w_zero,
                              Tensor::scalar<float>(0.3f), random_bytes(c.xt, {}, seed++), bias};
    auto stats = tiletest::check_tiling(node, in, 0.0);
    EXPECT_GT(stats.tiles, 1u) << shape_str(c.x);
  }
}

// Symmetric int8 B (zero points 0, scale per column or per tensor): where the CPU has
// AVX512_VNNI the prepared B takes the 8-bit kernel with per-column requantization; uint8
// and int8 a, batched a, k not a multiple of 4, an int8 y, and a per-row a scale (int16 path).
TEST(QLinearMatMul, SymmetricWeightsMatchReferenceExactly) {
  struct Case { Shape a, b; DType at, yt; bool per_row_a; };
  const std::vector<Case> cases = {
      {{7, 36}, {36, 19}, DType::u8, DType::u8, false},
      {{2, 29, 22}, {22, 40}, DType::i8, DType::i8, false},
      {{3, 17, 64}, {64, 33}, DType::u8, DType::i8, false},
      {{9, 20}, {20, 17}, DType::u8, DType::u8, true},
      // Weights outweighing the activations: cut by columns on a VNNI CPU (qlinear_cuttable),
      // a's rows read in place (uint8, k a multiple of 4), copied, and on the int16 path.
      {{5, 48}, {48, 100}, DType::u8, DType::u8, false},
      {{1, 6, 30}, {30, 70}, DType::i8, DType::u8, false},
      {{4, 24}, {24, 80}, DType::u8, DType::u8, true},
  };
  uint32_t seed = 800;
  for (const Case& c : cases) {
    const int64_t m = c.a[c.a.size() - 2], n = c.b.back();
    std::vector<float> cols;
    for (int64_t j = 0; j < n; ++j) cols.push_back(0.002f * static_cast<float>(j + 3));
    Tensor a_scale = Tensor::scalar<float>(0.02f), a_zero = random_bytes(c.at, {}, seed++);
    if (c.per_row_a) {
      std::vector<float> rows;
      for (int64_t i = 0; i < m; ++i) rows.push_back(0.01f * static_cast<float>(i + 1));
      a_scale = f32({m}, rows), a_zero = random_bytes(c.at, {m}, seed++);
    }
    Tensor b_zero(DType::i8, {n});
    std::fill_n(b_zero.data<int8_t>(), n, int8_t{0});
    std::vector<Tensor> in = {random_bytes(c.at, c.a, seed++), a_scale, a_zero, random_bytes(DType::i8, c.b, seed++),
                              f32({n}, cols), b_zero, Tensor::scalar<float>(0.4f), random_bytes(c.yt, {}, seed++)};
    auto stats = tiletest::check_tiling(NodeBuilder("QLinearMatMul", 10, 8), in, 0.0);
    EXPECT_GT(stats.tiles, 1u) << shape_str(c.a);
    if (kernels::isa_supports_avx512_vnni() && numel(c.b) > numel(c.a))
      EXPECT_EQ(tiletest::cuttable_of(NodeBuilder("QLinearMatMul", 10, 8), in).back(), 32) << shape_str(c.a);
  }
}

TEST(QLinearMatMul, TileRuleMatchesReferenceExactly) {
  struct Case { Shape a, b; DType at, bt; bool per_row_col; };
  const std::vector<Case> cases = {
      {{7, 33}, {33, 19}, DType::u8, DType::i8, true},
      {{2, 9, 20}, {20, 5}, DType::i8, DType::i8, false},
      {{3, 1, 6, 11}, {2, 11, 5}, DType::u8, DType::u8, false},
  };
  uint32_t seed = 700;
  for (const Case& c : cases) {
    const int64_t m = c.a[c.a.size() - 2], n = c.b.back();
    Tensor a_scale = Tensor::scalar<float>(0.02f), b_scale = Tensor::scalar<float>(0.03f);
    Tensor a_zero = random_bytes(c.at, {}, seed++), b_zero = random_bytes(c.bt, {}, seed++);
    if (c.per_row_col) {
      std::vector<float> rows, cols;
      for (int64_t i = 0; i < m; ++i) rows.push_back(0.01f * static_cast<float>(i + 1));
      for (int64_t j = 0; j < n; ++j) cols.push_back(0.002f * static_cast<float>(j + 3));
      a_scale = f32({m}, rows), b_scale = f32({n}, cols);
      a_zero = random_bytes(c.at, {m}, seed++), b_zero = random_bytes(c.bt, {n}, seed++);
    }
    std::vector<Tensor> in = {random_bytes(c.at, c.a, seed++), a_scale, a_zero, random_bytes(c.bt, c.b, seed++),
                              b_scale, b_zero, Tensor::scalar<float>(0.9f), random_bytes(DType::u8, {}, seed++)};
    auto stats = tiletest::check_tiling(NodeBuilder("QLinearMatMul", 10, 8), in, 0.0);
    EXPECT_GT(stats.tiles, 1u) << shape_str(c.a);
  }
}

}  // namespace
}  // namespace grove
