// QDQ fusion (passes/fuse_qdq.cpp) on a quantized residual block written the way
// `grove quantize` and ONNX Runtime's quantizer write one:
//   x -> Q -> DQ -> Conv(DQ(W1), DQ(B1)) -> Relu -> Q -> DQ -> Conv(DQ(W2), DQ(B2)) -> Q -> DQ -+
//              \-------------------------------------------------------------------------- Add -> Relu -> Q -> DQ -> y
// Which nodes fuse, which do not (a float bias, a per-channel activation scale), and that the
// fused graph computes what the float chain computes: within one output step (the integer
// sums are exact, the float chain rounds its sums), on the reference and on the tiles.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>

#include "graph/node_decisions.h"
#include "kernels/isa.h"
#include "passes/passes.h"
#include "plan_test_util.h"
#include "runtime/reference_executor.h"

namespace grove {
namespace {

using namespace grove::test;

std::map<std::string, int> labels(const Graph& g) {
  std::map<std::string, int> h;
  for (const auto& n : g.nodes) ++h[op_label(n)];
  return h;
}

void scalar_qparams(OnnxBuilder& b, const std::string& name, float scale, uint8_t zero) {
  b.initializer_f32(name + "_s", {}, {scale});
  b.initializer_raw(name + "_z", onnx::TensorProto::UINT8, {}, &zero, 1);
}

// Q then DQ of `value` with the scalar parameters `qp`: the float output is value + "_dq".
void qdq(OnnxBuilder& b, const std::string& value, const std::string& qp) {
  b.node("QuantizeLinear", {value, qp + "_s", qp + "_z"}, {value + "_q"}, value + "_quantize");
  b.node("DequantizeLinear", {value + "_q", qp + "_s", qp + "_z"}, {value + "_dq"}, value + "_dequantize");
}

// int8 per-channel weights and, when `int_bias`, an int32 bias at x_scale * w_scale.
void conv_weights(OnnxBuilder& b, const std::string& name, int64_t cout, int64_t cin, float x_scale, uint32_t seed,
                  bool int_bias) {
  std::vector<int8_t> w(static_cast<size_t>(cout * cin * 9));
  std::vector<float> ws(static_cast<size_t>(cout));
  std::vector<int8_t> wz(static_cast<size_t>(cout), 0);
  std::mt19937 rng(seed);
  for (auto& v : w) v = static_cast<int8_t>(static_cast<int>(rng() % 255) - 127);
  for (int64_t c = 0; c < cout; ++c) ws[static_cast<size_t>(c)] = 0.004f + 0.001f * static_cast<float>(c);
  b.initializer_raw(name + "_wq", onnx::TensorProto::INT8, {cout, cin, 3, 3}, w.data(), w.size());
  b.initializer_f32(name + "_ws", {cout}, ws);
  b.initializer_raw(name + "_wz", onnx::TensorProto::INT8, {cout}, wz.data(), wz.size());
  OnnxBuilder::attr_int(b.node("DequantizeLinear", {name + "_wq", name + "_ws", name + "_wz"}, {name + "_w"}, name + "_wdq"),
                        "axis", 0);
  if (int_bias) {
    std::vector<int32_t> bq(static_cast<size_t>(cout));
    std::vector<float> bs(static_cast<size_t>(cout));
    for (int64_t c = 0; c < cout; ++c) {
      bq[static_cast<size_t>(c)] = static_cast<int32_t>(rng() % 2001) - 1000;
      bs[static_cast<size_t>(c)] = x_scale * ws[static_cast<size_t>(c)];
    }
    b.initializer_raw(name + "_bq", onnx::TensorProto::INT32, {cout}, bq.data(), bq.size() * 4);
    b.initializer_f32(name + "_bs", {cout}, bs);
    OnnxBuilder::attr_int(b.node("DequantizeLinear", {name + "_bq", name + "_bs"}, {name + "_b"}, name + "_bdq"), "axis", 0);
  } else {
    weight(b, name + "_b", {cout}, seed + 1);
  }
}

// x -> Q -> DQ -> Conv(3x3, 8 -> 8) -> Relu -> Q -> DQ: h_dq, the start of both test models.
void first_conv(OnnxBuilder& b, bool int_bias) {
  scalar_qparams(b, "in", 0.02f, 128);
  scalar_qparams(b, "h", 0.03f, 0);
  qdq(b, "x", "in");
  conv_weights(b, "conv1", 8, 8, 0.02f, 1, int_bias);
  OnnxBuilder::attr_ints(b.node("Conv", {"x_dq", "conv1_w", "conv1_b"}, {"c1"}, "conv1"), "pads", {1, 1, 1, 1});
  b.node("Relu", {"c1"}, {"h"}, "relu1");
  qdq(b, "h", "h");
}

TestModel residual_block(bool int_bias) {
  OnnxBuilder b(13);
  const Shape x{2, 8, 10, 12};
  b.input("x", kF32, x).output("y", kF32, x);
  scalar_qparams(b, "c2", 0.05f, 131);
  scalar_qparams(b, "out", 0.04f, 0);
  first_conv(b, int_bias);
  conv_weights(b, "conv2", 8, 8, 0.03f, 2, int_bias);
  OnnxBuilder::attr_ints(b.node("Conv", {"h_dq", "conv2_w", "conv2_b"}, {"c2"}, "conv2"), "pads", {1, 1, 1, 1});
  qdq(b, "c2", "c2");
  b.node("Add", {"c2_dq", "x_dq"}, {"s"}, "add");
  b.node("Relu", {"s"}, {"r"}, "relu2");
  qdq(b, "r", "out");
  b.node("Identity", {"r_dq"}, {"y"}, "out");
  return {"qdq_block", b.bytes(), {{"x", seeded_tensor(x, 7)}}};
}

TEST(FuseQdq, FusesConvsAndTheResidualAdd) {
  Model model = load_test_model(residual_block(true));
  if (kernels::isa_supports_avx512_vnni()) {
    // passes/layout_int8.cpp: both convs channels-last, one Transpose in, one out, and the
    // residual add in the second conv's epilogue.
    EXPECT_EQ(labels(bound_graph(model)),
              (std::map<std::string, int>{{"QuantizeLinear", 1},
                                          {"Transpose", 2},
                                          {"QLinearConvNhwc+Relu", 1},
                                          {"QLinearConvNhwc+Add+Relu", 1},
                                          {"DequantizeLinear", 1},
                                          {"Identity", 1}}));
    return;
  }
  EXPECT_EQ(labels(bound_graph(model)),
            (std::map<std::string, int>{{"QuantizeLinear", 1},
                                        {"QLinearConv+Relu", 1},
                                        {"QLinearConv", 1},
                                        {"QLinearAdd+DequantizeLinear+Add+Relu+QuantizeLinear", 1},
                                        {"DequantizeLinear", 1},
                                        {"Identity", 1}}));
}

TEST(FuseQdq, ChannelsLastTilesEqualTheNchwReference) {
  // On a VNNI CPU the block runs channels-last; its tiles must give QLinearConv's bytes, which
  // the reference computes on NCHW tensors.
  TestModel m = residual_block(true);
  Model model = load_test_model(m);
  const TensorMap want = run_reference(bound_graph(model), m.inputs);
  for (int k : {1, 3, 8}) {
    PlanOptions o;
    o.tiles_per_op = k;
    PlannedRun run(make_plan(bound_graph(model), o), m.inputs, PlannedRunOptions{true});
    run_serial(run, 5);
    EXPECT_EQ(run.outputs().at("y").to_f64(), want.at("y").to_f64()) << "tiles k=" << k;
  }
}

TEST(FuseQdq, FloatBiasKeepsTheFloatConv) {
  // A float bias has no exact integer form: the Convs stay float (their weights folded to
  // float constants), the Add still fuses.
  Model model = load_test_model(residual_block(false));
  const auto l = labels(bound_graph(model));
  EXPECT_EQ(l.count("QLinearConv"), 0u);
  EXPECT_EQ(l.count("QLinearConv+Relu"), 0u);
  EXPECT_EQ(l.at("QLinearAdd+DequantizeLinear+Add+Relu+QuantizeLinear"), 1);
}

TEST(FuseQdq, FusedGraphMatchesTheFloatChain) {
  for (bool int_bias : {true, false}) {
    TestModel m = residual_block(int_bias);
    TensorMap chain = run_reference(unfused_graph(m), m.inputs);
    Model model = load_test_model(m);
    // y is a multiple of out's scale 0.04. A sum the float chain rounds across a quantization
    // boundary differs by one step, and a step in h can move c2 and y by one more: two steps
    // at most, and rarely.
    auto check = [&](const TensorMap& got, const std::string& what) {
      const Tensor &g = got.at("y"), &w = chain.at("y");
      ASSERT_EQ(g.shape(), w.shape());
      int64_t differ = 0;
      for (int64_t i = 0; i < w.numel(); ++i) {
        const float d = std::fabs(g.data<float>()[i] - w.data<float>()[i]);
        ASSERT_LE(d, 0.0801f) << what << " at " << i;
        differ += d > 0;
      }
      EXPECT_LE(differ, w.numel() / 20) << what;
    };
    check(run_reference(bound_graph(model), m.inputs), "reference, fused");
    for (int k : {0, 1, 3, 7}) {
      PlanOptions o;
      o.tiles_per_op = k;
      PlannedRun run(make_plan(bound_graph(model), o), m.inputs, PlannedRunOptions{true});
      run_serial(run, 3);
      check(run.outputs(), "tiles k=" + std::to_string(k));
    }
  }
}

// conv -> Relu -> Q -> DQ -> MaxPool -> Q -> DQ -> conv: the MaxPool between two quantized
// convs, with one scale and zero point around it, pools the bytes (channels-last on VNNI).
TestModel conv_pool_conv() {
  OnnxBuilder b(13);
  const Shape x{1, 8, 11, 13};
  b.input("x", kF32, x).output("y", kF32, {1, 8, 6, 7});
  scalar_qparams(b, "out", 0.05f, 120);
  first_conv(b, true);
  onnx::NodeProto& pool = b.node("MaxPool", {"h_dq"}, {"p"}, "pool");
  OnnxBuilder::attr_ints(pool, "kernel_shape", {3, 3});
  OnnxBuilder::attr_ints(pool, "strides", {2, 2});
  OnnxBuilder::attr_ints(pool, "pads", {1, 1, 1, 1});
  qdq(b, "p", "h");
  conv_weights(b, "conv2", 8, 8, 0.03f, 2, true);
  OnnxBuilder::attr_ints(b.node("Conv", {"p_dq", "conv2_w", "conv2_b"}, {"c2"}, "conv2"), "pads", {1, 1, 1, 1});
  qdq(b, "c2", "out");
  b.node("Identity", {"c2_dq"}, {"y"}, "out");
  return {"qdq_pool", b.bytes(), {{"x", seeded_tensor(x, 8)}}};
}

TEST(FuseQdq, MaxPoolBetweenQuantizedConvsPoolsBytes) {
  TestModel m = conv_pool_conv();
  Model model = load_test_model(m);
  const auto l = labels(bound_graph(model));
  if (kernels::isa_supports_avx512_vnni()) {
    EXPECT_EQ(l.count("MaxPoolNhwc+DequantizeLinear+MaxPool+QuantizeLinear"), 1u);
    EXPECT_EQ(l.count("MaxPool"), 0u);
    EXPECT_EQ(l.at("Transpose"), 2);  // x in, the last conv's output back
  }
  const TensorMap want = run_reference(bound_graph(model), m.inputs);
  const TensorMap chain = run_reference(unfused_graph(m), m.inputs);
  for (int k : {1, 4}) {
    PlanOptions o;
    o.tiles_per_op = k;
    PlannedRun run(make_plan(bound_graph(model), o), m.inputs, PlannedRunOptions{true});
    run_serial(run, 6);
    EXPECT_EQ(run.outputs().at("y").to_f64(), want.at("y").to_f64()) << "tiles k=" << k;
  }
  // Against the float chain: a step where a rounded sum crosses a boundary, as for the convs alone.
  const Tensor &g = want.at("y"), &c = chain.at("y");
  int64_t differ = 0;
  for (int64_t i = 0; i < c.numel(); ++i) {
    const float d = std::fabs(g.data<float>()[i] - c.data<float>()[i]);
    ASSERT_LE(d, 0.1001f) << i;
    differ += d > 0;
  }
  EXPECT_LE(differ, c.numel() / 10);
}

TEST(FuseQdq, LoneConvStaysNchw) {
  // One quantized conv between float ops: channels-last would only add two Transposes.
  OnnxBuilder b(13);
  const Shape x{1, 8, 9, 9};
  b.input("x", kF32, x).output("y", kF32, x);
  first_conv(b, true);
  b.node("Identity", {"h_dq"}, {"y"}, "out");
  TestModel m{"qdq_lone_conv", b.bytes(), {{"x", seeded_tensor(x, 9)}}};
  Model model = load_test_model(m);
  EXPECT_EQ(labels(bound_graph(model)), (std::map<std::string, int>{{"QuantizeLinear", 1},
                                                               {"QLinearConv+Relu", 1},
                                                               {"DequantizeLinear", 1},
                                                               {"Identity", 1}}));
}

// A QDQ transformer's linear layer: QLinearMatMul's bytes dequantized, then the float bias
// Add and torch's erf GELU (Div, Erf, Add, Mul, Mul): all of it one DequantizeLinear with a
// fused bias and activation (fuse_epilogue.cpp), and a plain bias Add the same without GELU.
TestModel qdq_linear_gelu() {
  OnnxBuilder b(13);
  const Shape x{2, 5, 24};
  b.input("x", kF32, x).output("y", kF32, {2, 5, 40}).output("z", kF32, {2, 5, 40});
  scalar_qparams(b, "in", 0.02f, 128);
  scalar_qparams(b, "mm", 0.05f, 120);
  qdq(b, "x", "in");
  std::vector<int8_t> w(24 * 40);
  std::mt19937 rng(4);
  for (auto& v : w) v = static_cast<int8_t>(static_cast<int>(rng() % 255) - 127);
  b.initializer_raw("wq", onnx::TensorProto::INT8, {24, 40}, w.data(), w.size());
  b.initializer_f32("ws", {}, {0.004f});
  b.node("DequantizeLinear", {"wq", "ws"}, {"w"}, "wdq");
  b.node("MatMul", {"x_dq", "w"}, {"m"}, "matmul");
  qdq(b, "m", "mm");
  weight(b, "bias", {40}, 5);
  b.node("Add", {"m_dq", "bias"}, {"h"}, "bias_add");
  b.initializer_f32("sqrt2", {}, {1.41421356f});
  b.initializer_f32("one", {}, {1.0f});
  b.initializer_f32("half", {}, {0.5f});
  b.node("Div", {"h", "sqrt2"}, {"g1"}, "gelu_div");
  b.node("Erf", {"g1"}, {"g2"}, "gelu_erf");
  b.node("Add", {"g2", "one"}, {"g3"}, "gelu_add");
  b.node("Mul", {"h", "g3"}, {"g4"}, "gelu_mul");
  b.node("Mul", {"g4", "half"}, {"y"}, "gelu_half");
  weight(b, "bias2", {40}, 6);
  b.node("DequantizeLinear", {"m_q", "mm_s", "mm_z"}, {"m_dq2"}, "m_dequantize2");  // each reader its own DQ
  b.node("Add", {"m_dq2", "bias2"}, {"z"}, "bias_only");
  return {"qdq_linear_gelu", b.bytes(), {{"x", seeded_tensor(x, 10)}}};
}

TEST(FuseQdq, DequantizeTakesTheBiasAndGelu) {
  TestModel m = qdq_linear_gelu();
  Model model = load_test_model(m);
  const auto l = labels(bound_graph(model));
  EXPECT_EQ(l.count("Erf"), 0u);
  EXPECT_EQ(l.count("Add"), 0u);
  EXPECT_EQ(l.at("DequantizeLinear+Bias+Gelu"), 1);
  EXPECT_EQ(l.at("DequantizeLinear+Bias"), 1);
  const TensorMap chain = run_reference(unfused_graph(m), m.inputs);
  const TensorMap want = run_reference(bound_graph(model), m.inputs);
  for (const char* out : {"y", "z"})
    for (int64_t i = 0; i < chain.at(out).numel(); ++i)
      ASSERT_NEAR(want.at(out).data<float>()[i], chain.at(out).data<float>()[i], 1e-5) << out << " at " << i;
  for (int k : {1, 3, 16}) {  // 16 also cuts the columns (the bias offset)
    PlanOptions o;
    o.tiles_per_op = k;
    PlannedRun run(make_plan(bound_graph(model), o), m.inputs, PlannedRunOptions{true});
    run_serial(run, 7);
    for (const char* out : {"y", "z"})
      for (int64_t i = 0; i < want.at(out).numel(); ++i)
        ASSERT_NEAR(run.outputs().at(out).data<float>()[i], want.at(out).data<float>()[i], 1e-5) << out << " tiles k=" << k;
  }
}

TEST(FuseQdq, QuantizedAddIsBitExactWithTheChain) {
  // The Add alone: DQ, DQ -> Add -> Relu -> Q, fused and not, on every byte pair of a grid.
  OnnxBuilder b(13);
  b.input("a", onnx::TensorProto::UINT8, {1, 2, 256, 33}).input("c", onnx::TensorProto::UINT8, {1, 2, 256, 33});
  b.output("y", onnx::TensorProto::UINT8, {1, 2, 256, 33});
  scalar_qparams(b, "pa", 0.013f, 121);
  scalar_qparams(b, "pc", 0.0071f, 3);
  scalar_qparams(b, "py", 0.021f, 17);
  b.node("DequantizeLinear", {"a", "pa_s", "pa_z"}, {"fa"}, "dqa");
  b.node("DequantizeLinear", {"c", "pc_s", "pc_z"}, {"fc"}, "dqc");
  b.node("Add", {"fa", "fc"}, {"s"}, "add");
  b.node("Relu", {"s"}, {"r"}, "relu");
  b.node("QuantizeLinear", {"r", "py_s", "py_z"}, {"y"}, "q");
  Tensor a(DType::u8, {1, 2, 256, 33}), c(DType::u8, {1, 2, 256, 33});
  for (int64_t i = 0; i < a.numel(); ++i) {
    a.data<uint8_t>()[i] = static_cast<uint8_t>(i % 256);
    c.data<uint8_t>()[i] = static_cast<uint8_t>((i / 256) * 7 % 256);
  }
  TestModel m{"qadd", b.bytes(), {{"a", a}, {"c", c}}};
  TensorMap chain = run_reference(unfused_graph(m), m.inputs);
  Model model = load_test_model(m);
  EXPECT_EQ(labels(bound_graph(model)), (std::map<std::string, int>{{"QLinearAdd+DequantizeLinear+Add+Relu+QuantizeLinear", 1}}));
  EXPECT_EQ(run_reference(bound_graph(model), m.inputs).at("y").to_i64(), chain.at("y").to_i64());
  for (int k : {1, 5}) {
    PlanOptions o;
    o.tiles_per_op = k;
    PlannedRun run(make_plan(bound_graph(model), o), m.inputs, PlannedRunOptions{true});
    run_serial(run, 4);
    EXPECT_EQ(run.outputs().at("y").to_i64(), chain.at("y").to_i64()) << "tiles k=" << k;
  }
}

}  // namespace
// ONNX Runtime's dynamic quantization: DynamicQuantizeLinear -> ConvInteger (uint8 W with a
// zero point) -> Cast -> Mul(x_scale * w_scale) -> Add(bias [C,1,1]) -> Relu becomes one
// ConvIntegerScaled, bit-equal to the chain on the reference and in tiles (the 8-bit kernel
// with per-row offsets on VNNI CPUs, the int16 path elsewhere). Without the Add it still fuses.
TEST(FuseQdq, DynamicQuantizationChainIsOneConvBitExact) {
  for (bool with_bias : {true, false}) {
    OnnxBuilder b(13);
    const Shape x{1, 6, 9, 11};
    b.input("x", kF32, x).output("y", kF32, {1, 10, 9, 11});
    std::vector<uint8_t> w(10 * 6 * 9);
    std::mt19937 rng(5);
    for (auto& v : w) v = static_cast<uint8_t>(rng() % 256);
    const uint8_t wz = 119;
    b.initializer_raw("w", onnx::TensorProto::UINT8, {10, 6, 3, 3}, w.data(), w.size());
    b.initializer_raw("wz", onnx::TensorProto::UINT8, {}, &wz, 1);
    b.initializer_f32("ws", {}, {0.0037f});
    b.node("DynamicQuantizeLinear", {"x"}, {"xq", "xs", "xz"}, "dql");
    OnnxBuilder::attr_ints(b.node("ConvInteger", {"xq", "w", "xz", "wz"}, {"sums"}, "conv"), "pads", {1, 1, 1, 1});
    OnnxBuilder::attr_int(b.node("Cast", {"sums"}, {"f"}, "cast"), "to", onnx::TensorProto::FLOAT);
    b.node("Mul", {"xs", "ws"}, {"scale"}, "scale");  // after the conv, as ORT's tool writes it
    b.node("Mul", {"f", "scale"}, {"scaled"}, "mul");
    if (with_bias) {
      weight(b, "bias", {10, 1, 1}, 3);
      b.node("Add", {"scaled", "bias"}, {"biased"}, "add");
    }
    b.node("Relu", {with_bias ? "biased" : "scaled"}, {"y"}, "relu");
    TestModel m{"dynamic_conv", b.bytes(), {{"x", seeded_tensor(x, 9)}}};
    const TensorMap chain = run_reference(unfused_graph(m), m.inputs);
    Model model = load_test_model(m);
    const std::string label = with_bias ? "ConvIntegerScaled+Cast+Mul+Add+Relu" : "ConvIntegerScaled+Cast+Mul+Relu";
    EXPECT_EQ(labels(bound_graph(model)).count(label), 1u) << with_bias;
    auto bits = [](const Tensor& t) {
      std::vector<uint32_t> v(static_cast<size_t>(t.numel()));
      std::memcpy(v.data(), t.raw(), t.bytes());
      return v;
    };
    EXPECT_EQ(bits(run_reference(bound_graph(model), m.inputs).at("y")), bits(chain.at("y")));
    for (int k : {1, 4}) {
      PlanOptions o;
      o.tiles_per_op = k;
      PlannedRun run(make_plan(bound_graph(model), o), m.inputs, PlannedRunOptions{true});
      run_serial(run, 4);
      EXPECT_EQ(bits(run.outputs().at("y")), bits(chain.at("y"))) << "tiles k=" << k << " bias " << with_bias;
    }
  }
}

// A classifier's last Gemm on 8-bit x and int8 weights, writing float (fuse_qdq.cpp
// gemm_on_integers): MatMulInteger and float steps on the n outputs, within the float chain's
// rounding of the sums, and the tiles bit for bit equal to the fused graph's reference.
TEST(FuseQdq, ClassifierGemmRunsOnIntegerSums) {
  for (bool trans_b : {true, false})
    for (bool with_bias : {true, false}) {
      OnnxBuilder b(13);
      const int64_t m = 3, k = 70, n = 40;
      b.input("x", kF32, {m, k}).output("y", kF32, {m, n});
      scalar_qparams(b, "in", 0.02f, 128);
      qdq(b, "x", "in");
      std::mt19937 rng(trans_b * 2 + with_bias);
      std::vector<int8_t> w(static_cast<size_t>(k * n));
      for (auto& v : w) v = static_cast<int8_t>(static_cast<int>(rng() % 255) - 127);
      std::vector<float> ws(static_cast<size_t>(n));
      for (int64_t j = 0; j < n; ++j) ws[static_cast<size_t>(j)] = 0.003f + 0.0005f * static_cast<float>(j);
      const std::vector<int8_t> wz(static_cast<size_t>(n), 0);
      b.initializer_raw("wq", onnx::TensorProto::INT8, trans_b ? Shape{n, k} : Shape{k, n}, w.data(), w.size());
      b.initializer_f32("ws", {n}, ws);
      b.initializer_raw("wz", onnx::TensorProto::INT8, {n}, wz.data(), wz.size());
      OnnxBuilder::attr_int(b.node("DequantizeLinear", {"wq", "ws", "wz"}, {"w"}, "wdq"), "axis", trans_b ? 0 : 1);
      if (with_bias) {
        std::vector<int32_t> bq(static_cast<size_t>(n));
        std::vector<float> bs(static_cast<size_t>(n));
        for (int64_t j = 0; j < n; ++j)
          bq[static_cast<size_t>(j)] = static_cast<int32_t>(rng() % 4001) - 2000, bs[static_cast<size_t>(j)] = 0.02f * ws[static_cast<size_t>(j)];
        b.initializer_raw("bq", onnx::TensorProto::INT32, {n}, bq.data(), bq.size() * 4);
        b.initializer_f32("bs", {n}, bs);
        OnnxBuilder::attr_int(b.node("DequantizeLinear", {"bq", "bs"}, {"bias"}, "bdq"), "axis", 0);
      }
      auto& fc = with_bias ? b.node("Gemm", {"x_dq", "w", "bias"}, {"y"}, "fc") : b.node("Gemm", {"x_dq", "w"}, {"y"}, "fc");
      OnnxBuilder::attr_int(fc, "transB", trans_b);
      TestModel t{"qdq_gemm", b.bytes(), {{"x", seeded_tensor({m, k}, 4)}}};
      const TensorMap chain = run_reference(unfused_graph(t), t.inputs);
      Model model = load_test_model(t);
      const auto l = labels(bound_graph(model));
      EXPECT_EQ(l.count("Gemm"), 0u);
      EXPECT_EQ(l.count("MatMulInteger"), 1u);
      const Tensor want = chain.at("y"), fused = run_reference(bound_graph(model), t.inputs).at("y");
      ASSERT_EQ(fused.shape(), want.shape());
      for (int64_t i = 0; i < want.numel(); ++i)
        ASSERT_NEAR(fused.data<float>()[i], want.data<float>()[i], 1e-4f * (1 + std::fabs(want.data<float>()[i])))
            << "transB " << trans_b << " bias " << with_bias << " at " << i;
      for (int tiles : {1, 4}) {
        PlanOptions o;
        o.tiles_per_op = tiles;
        PlannedRun run(make_plan(bound_graph(model), o), t.inputs, PlannedRunOptions{true});
        run_serial(run, 2);
        const TensorMap outputs = run.outputs();  // by value: hold it while reading
        ASSERT_EQ(std::memcmp(outputs.at("y").raw(), fused.raw(), fused.bytes()), 0) << "tiles " << tiles << " transB " << trans_b;
      }
    }
}

}  // namespace grove
