// NaN and +-Inf through the ops whose kernels compare: Relu, Clip, LeakyRelu, HardSigmoid,
// HardSwish, Max, Min, MaxPool, GlobalMaxPool, ReduceMax/Min, ArgMax and a Conv with a fused
// Relu or Clip. Each gives ONNX Runtime's values (docs/correctness.md: NaN propagates) on the
// reference executor and on the tile runtime at 1 and 2 workers. A kernel that compares with
// its operands the wrong way round turns NaN into 0 or into the clip bound, which these catch.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <limits>

#include "plan_test_util.h"
#include "runtime/reference_executor.h"
#include "runtime/session.h"

namespace grove {
namespace {

using namespace grove::test;

constexpr float kNan = std::numeric_limits<float>::quiet_NaN();
constexpr float kInf = std::numeric_limits<float>::infinity();

// NaN equals NaN here; everything else must be bit-equal in value.
void expect_values(const Tensor& got, const std::vector<float>& want, const std::string& what) {
  ASSERT_EQ(got.numel(), static_cast<int64_t>(want.size())) << what;
  for (size_t i = 0; i < want.size(); ++i) {
    const float g = got.data<float>()[i];
    if (std::isnan(want[i])) EXPECT_TRUE(std::isnan(g)) << what << ": element " << i << " is " << g << ", not NaN";
    else EXPECT_EQ(g, want[i]) << what << ": element " << i;
  }
}

// The output `y` of the model on the reference and on the tile runtime (1 and 2 workers).
void expect_everywhere(const std::string& bytes, const TensorMap& inputs, const std::vector<float>& want,
                       const std::string& what) {
  const Graph g = load_onnx_bytes(bytes, what + ".onnx");
  expect_values(model_from_graph(g).run_reference(inputs).at("y"), want, what + " (reference)");
  for (int threads : {1, 2}) {
    Engine engine(EngineOptions{.threads = threads, .pin = false});
    Session session(engine, model_from_graph(g));
    expect_values(session.run(inputs).at("y"), want, what + " (tile runtime, " + std::to_string(threads) + " workers)");
  }
}

// 32 values (two AVX-512 vectors) with NaN and +-Inf at lanes of both vectors and the tail.
std::vector<float> special_values() {
  std::vector<float> v(32);
  for (size_t i = 0; i < v.size(); ++i) v[i] = static_cast<float>(i % 7) - 3.0f;
  v[0] = kNan, v[5] = kInf, v[9] = -kInf, v[17] = kNan, v[30] = -kInf, v[31] = kNan;
  return v;
}

std::string unary_model(const std::string& op, int opset = 13, std::function<void(onnx::NodeProto&)> attrs = {}) {
  OnnxBuilder b(opset);
  b.input("x", kF32, {2, 16}).output("y", kF32, {2, 16});
  auto& n = b.node(op, {"x"}, {"y"}, "op");
  if (attrs) attrs(n);
  return b.bytes();
}

template <class F>
std::vector<float> map(const std::vector<float>& x, F f) {
  std::vector<float> y;
  for (float v : x) y.push_back(f(v));
  return y;
}

TEST(NanPropagation, ActivationsKeepNanAndMapInfAsOnnxRuntime) {
  const std::vector<float> x = special_values();
  const TensorMap in{{"x", Tensor::from<float>({2, 16}, x)}};
  expect_everywhere(unary_model("Relu"), in, map(x, [](float v) { return std::isnan(v) ? kNan : v < 0 ? 0.0f : v; }),
                    "relu");
  expect_everywhere(unary_model("Clip", 6, [](onnx::NodeProto& n) {
                      OnnxBuilder::attr_float(n, "min", -1.0f);
                      OnnxBuilder::attr_float(n, "max", 2.0f);
                    }),
                    in, map(x, [](float v) { return std::isnan(v) ? kNan : std::clamp(v, -1.0f, 2.0f); }), "clip");
  expect_everywhere(unary_model("LeakyRelu", 13, [](onnx::NodeProto& n) { OnnxBuilder::attr_float(n, "alpha", 0.5f); }),
                    in, map(x, [](float v) { return v < 0 ? 0.5f * v : v; }), "leaky_relu");
  expect_everywhere(unary_model("HardSigmoid"), in,
                    map(x, [](float v) { return std::isnan(v) ? kNan : std::clamp(0.2f * v + 0.5f, 0.0f, 1.0f); }),
                    "hard_sigmoid");
  expect_everywhere(unary_model("HardSwish", 14), in,
                    map(x, [](float v) { return std::isnan(v) ? kNan : v * std::clamp(v / 6.0f + 0.5f, 0.0f, 1.0f); }),
                    "hard_swish");
}

TEST(NanPropagation, MaxAndMinTakeNanFromEitherOperand) {
  const std::vector<float> a = {kNan, 1, kNan, kInf, -kInf, 2, 3, -kInf};
  const std::vector<float> b = {1, kNan, kNan, 1, 1, -kInf, kInf, kNan};
  for (const char* op : {"Max", "Min"}) {
    OnnxBuilder m(13);
    m.input("a", kF32, {8}).input("b", kF32, {8}).output("y", kF32, {8});
    m.node(op, {"a", "b"}, {"y"}, "op");
    const bool max = std::string(op) == "Max";
    std::vector<float> want;
    for (size_t i = 0; i < a.size(); ++i)
      want.push_back(std::isnan(a[i]) || std::isnan(b[i]) ? kNan : max ? std::max(a[i], b[i]) : std::min(a[i], b[i]));
    expect_everywhere(m.bytes(), {{"a", Tensor::from<float>({8}, a)}, {"b", Tensor::from<float>({8}, b)}}, want, op);
  }
}

// A 1x1x4x20 plane: NaN at (1, 3) and (2, 17), +Inf at (0, 9), -Inf everywhere in row 3.
std::vector<float> pool_plane() {
  std::vector<float> x(80);
  for (size_t i = 0; i < x.size(); ++i) x[i] = static_cast<float>((i * 37) % 11) - 5.0f;
  x[1 * 20 + 3] = kNan, x[2 * 20 + 17] = kNan, x[9] = kInf;
  for (size_t c = 0; c < 20; ++c) x[3 * 20 + c] = -kInf;
  return x;
}

TEST(NanPropagation, MaxPoolWindowWithNanIsNan) {
  const std::vector<float> x = pool_plane();
  for (int64_t stride : {1, 2}) {
    OnnxBuilder b(12);
    const int64_t oh = (4 + 2 - 3) / stride + 1, ow = (20 + 2 - 3) / stride + 1;
    b.input("x", kF32, {1, 1, 4, 20}).output("y", kF32, {1, 1, oh, ow});
    auto& n = b.node("MaxPool", {"x"}, {"y"}, "pool");
    OnnxBuilder::attr_ints(n, "kernel_shape", {3, 3});
    OnnxBuilder::attr_ints(n, "strides", {stride, stride});
    OnnxBuilder::attr_ints(n, "pads", {1, 1, 1, 1});
    std::vector<float> want;
    for (int64_t oy = 0; oy < oh; ++oy)
      for (int64_t ox = 0; ox < ow; ++ox) {
        float best = -std::numeric_limits<float>::max();
        bool nan = false;
        for (int64_t iy = oy * stride - 1; iy < oy * stride + 2; ++iy)
          for (int64_t ix = ox * stride - 1; ix < ox * stride + 2; ++ix) {
            if (iy < 0 || iy >= 4 || ix < 0 || ix >= 20) continue;
            const float v = x[static_cast<size_t>(iy * 20 + ix)];
            nan |= std::isnan(v);
            if (v > best) best = v;
          }
        want.push_back(nan ? kNan : best);
      }
    expect_everywhere(b.bytes(), {{"x", Tensor::from<float>({1, 1, 4, 20}, x)}}, want,
                      "maxpool_s" + std::to_string(stride));
  }
}

TEST(NanPropagation, GlobalMaxPoolAndReductionsOfNanAreNan) {
  std::vector<float> x(2 * 3 * 8);
  for (size_t i = 0; i < x.size(); ++i) x[i] = static_cast<float>(i % 5) - 2.0f;
  x[8 + 5] = kNan;      // plane 1
  x[16 + 0] = kInf;     // plane 2
  x[40 + 7] = kNan;     // plane 5, its last element
  x[24 + 1] = -kInf;    // plane 3
  const TensorMap in{{"x", Tensor::from<float>({2, 3, 8}, x)}};
  std::vector<float> want_max, want_min, want_arg;
  for (size_t p = 0; p < 6; ++p) {
    float mx = -kInf, mn = kInf;
    int64_t arg = 0;
    bool nan = false;
    for (size_t k = 0; k < 8; ++k) {
      const float v = x[p * 8 + k];
      if (std::isnan(v) && !nan) nan = true, arg = static_cast<int64_t>(k);
      if (!nan && v > x[p * 8 + static_cast<size_t>(arg)]) arg = static_cast<int64_t>(k);
      mx = std::max(mx, v), mn = std::min(mn, v);
    }
    want_max.push_back(nan ? kNan : mx), want_min.push_back(nan ? kNan : mn);
    want_arg.push_back(static_cast<float>(arg));
  }
  {
    OnnxBuilder b(13);
    b.input("x", kF32, {2, 3, 8}).output("y", kF32, {2, 3, 1});
    b.node("GlobalMaxPool", {"x"}, {"y"}, "gmp");
    expect_everywhere(b.bytes(), in, want_max, "global_max_pool");
  }
  for (const char* op : {"ReduceMax", "ReduceMin"}) {
    OnnxBuilder b(13);
    b.input("x", kF32, {2, 3, 8}).output("y", kF32, {2, 3, 1});
    OnnxBuilder::attr_ints(b.node(op, {"x"}, {"y"}, "reduce"), "axes", {2});
    expect_everywhere(b.bytes(), in, std::string(op) == "ReduceMax" ? want_max : want_min, op);
  }
  {
    // ArgMax: the first NaN wins, as numpy's argmax; the indices come out as float for the check.
    OnnxBuilder b(13);
    b.input("x", kF32, {2, 3, 8}).output("y", kF32, {2, 3, 1});
    OnnxBuilder::attr_int(b.node("ArgMax", {"x"}, {"i"}, "arg"), "axis", 2);
    OnnxBuilder::attr_int(b.node("Cast", {"i"}, {"y"}, "cast"), "to", kF32);
    expect_everywhere(b.bytes(), in, want_arg, "argmax");
  }
}

// Conv then Relu or Clip, which the passes fuse into the conv's epilogue: NaN and Inf times the
// weights' zeros are NaN, and the activation must keep every NaN. Three convs reach the GEMM,
// direct and depthwise kernels: 1x1, 3x3 at stride 2, and 3x3 depthwise (Winograd is left out:
// its transforms spread a NaN over a whole tile, see docs/correctness.md). The tile runtime's
// output must match the reference's element for element.
TEST(NanPropagation, ConvWithFusedActivationKeepsNan) {
  const int64_t c = 16, h = 6, w = 9;
  std::vector<float> x(static_cast<size_t>(c * h * w));
  for (size_t i = 0; i < x.size(); ++i) x[i] = static_cast<float>(static_cast<int64_t>(i % 9) - 4);
  x[3 * h * w + 2 * w + 4] = kNan;  // channel 3, (2, 4)
  x[10 * h * w + 5 * w + 8] = kInf;  // channel 10, (5, 8): a corner
  x[12 * h * w + 1 * w + 1] = -kInf;
  struct Form {
    const char* name;
    int64_t kernel, stride, group;
  };
  for (const Form& f : {Form{"1x1", 1, 1, 1}, Form{"3x3s2", 3, 2, 1}, Form{"dw3x3", 3, 1, c}})
    for (const char* act : {"Relu", "Clip"}) {
      const int64_t cin = c / f.group, k2 = f.kernel * f.kernel;
      std::vector<float> wt(static_cast<size_t>(c * cin * k2), 0.0f);
      // Output k takes input channel k (or its only one) at the centre tap, 0.5 at the others.
      for (int64_t k = 0; k < c; ++k)
        for (int64_t i = 0; i < cin * k2; ++i)
          wt[static_cast<size_t>(k * cin * k2 + i)] = i == ((f.group == 1 ? k : 0) * k2 + k2 / 2) ? 1.0f : 0.0f;
      const int64_t pad = f.kernel / 2, oh = (h + 2 * pad - f.kernel) / f.stride + 1, ow = (w + 2 * pad - f.kernel) / f.stride + 1;
      OnnxBuilder b(13);
      b.input("x", kF32, {1, c, h, w}).output("y", kF32, {1, c, oh, ow});
      b.initializer_f32("w", {c, cin, f.kernel, f.kernel}, wt);
      auto& conv = b.node("Conv", {"x", "w"}, {"t"}, "conv");
      OnnxBuilder::attr_ints(conv, "pads", {pad, pad, pad, pad});
      OnnxBuilder::attr_ints(conv, "strides", {f.stride, f.stride});
      OnnxBuilder::attr_int(conv, "group", f.group);
      if (std::string(act) == "Relu") {
        b.node("Relu", {"t"}, {"y"}, "act");
      } else {
        b.initializer_f32("lo", {}, {0.0f});
        b.initializer_f32("hi", {}, {6.0f});
        b.node("Clip", {"t", "lo", "hi"}, {"y"}, "act");
      }
      const std::string what = std::string("conv_") + f.name + "_" + act;
      const TensorMap in{{"x", Tensor::from<float>({1, c, h, w}, x)}};
      const Tensor want = model_from_graph(load_onnx_bytes(b.bytes(), what + ".onnx")).run_reference(in).at("y");
      const float* wp = want.data<float>();
      // Channel 3's output where the NaN sits (at stride 2, output (1, 2) covers input (2, 4)).
      EXPECT_TRUE(std::isnan(wp[(3 * oh + 2 / f.stride) * ow + 4 / f.stride])) << what << ": reference";
      expect_everywhere(b.bytes(), in, std::vector<float>(wp, wp + want.numel()), what);
    }
}

}  // namespace
}  // namespace grove
