#include "profile/sampled_layers.h"

#include <iterator>

#include "grove/model.h"
#include "ops/op_names.h"
#include "profile/small_graphs.h"
#include "runtime/model.h"

namespace grove::profile {

tune::ConvConfig sample_conv(std::mt19937_64& rng) {
  static constexpr int64_t kPlanes[] = {7, 10, 13, 14, 19, 20, 26, 28, 38, 40, 52, 56, 76, 80, 104, 112};
  auto channels = [&] { return int64_t{8} << (rng() % 7); };
  for (;;) {
    tune::ConvConfig c;
    c.cin = channels() * (rng() % 3 == 0 ? 3 : 2) / 2;
    c.cout = channels() * (rng() % 3 == 0 ? 3 : 2) / 2;
    const uint64_t k = rng() % 20;
    c.kernel_h = c.kernel_w = k < 9 ? 1 : k < 18 ? 3 : k < 19 ? 5 : 7;
    c.stride_h = c.stride_w = (c.kernel_h > 1 ? rng() % 4 == 0 : rng() % 10 == 0) ? 2 : 1;
    c.in_h = c.in_w = kPlanes[rng() % std::size(kPlanes)];
    const int64_t pad = c.kernel_h / 2;
    c.out_h = c.out_w = (c.in_h + 2 * pad - c.kernel_h) / c.stride_h + 1;
    const double flops = 2.0 * double(c.out_h * c.out_w * c.cout * c.cin * c.kernel_h * c.kernel_w);
    if (c.out_h >= 1 && flops >= 2e6 && flops <= 1e9) return c;
  }
}

tune::ConvConfig sample_stem(std::mt19937_64& rng) {
  static constexpr int64_t kPlanes[] = {56, 64, 96, 112, 128, 160, 192, 224, 256, 299, 320, 416};
  static constexpr int64_t kIn[] = {3, 3, 3, 1, 4};
  static constexpr int64_t kOut[] = {8, 16, 24, 32, 48, 64, 96};
  static constexpr int64_t kKernels[] = {3, 3, 5, 7};
  for (;;) {
    tune::ConvConfig c;
    c.cin = kIn[rng() % std::size(kIn)];
    c.cout = kOut[rng() % std::size(kOut)];
    c.kernel_h = c.kernel_w = kKernels[rng() % std::size(kKernels)];
    c.stride_h = c.stride_w = rng() % 4 == 0 ? 1 : 2;
    c.in_h = c.in_w = kPlanes[rng() % std::size(kPlanes)];
    const int64_t pad = c.kernel_h / 2;
    c.out_h = c.out_w = (c.in_h + 2 * pad - c.kernel_h) / c.stride_h + 1;
    const double flops = 2.0 * double(c.out_h * c.out_w * c.cout * c.cin * c.kernel_h * c.kernel_w);
    if (flops >= 2e6 && flops <= 1e9) return c;
  }
}

namespace {

// Values in [-1, 1): the times do not depend on them.
Tensor uniform_tensor(const Shape& shape, std::mt19937_64& rng) {
  Tensor t(DType::f32, shape);
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  for (int64_t i = 0; i < t.numel(); ++i) t.data<float>()[i] = u(rng);
  return t;
}

Graph conv_graph(const tune::ConvConfig& c, std::mt19937_64& rng) {
  Graph g = one_input_graph("sampled_conv", {c.batch, c.cin, c.in_h, c.in_w});
  g.initializers["w"] = uniform_tensor({c.cout, c.cin, c.kernel_h, c.kernel_w}, rng);
  g.initializers["b"] = uniform_tensor({c.cout}, rng);
  Node conv = opset13_node("conv", kConv, {"x", "w", "b"}, {"c"});
  const int64_t pad = c.kernel_h / 2;
  set_ints(conv, "kernel_shape", {c.kernel_h, c.kernel_w});
  set_ints(conv, "strides", {c.stride_h, c.stride_w});
  set_ints(conv, "pads", {pad, pad, pad, pad});
  g.nodes.push_back(std::move(conv));
  g.nodes.push_back(opset13_node("relu", kRelu, {"c"}, {"y"}));
  return g;
}

}  // namespace

tune::ConvConfig sample_layer(int i, bool stems_only, std::mt19937_64& rng) {
  return stems_only || i % 8 == 0 ? sample_stem(rng) : sample_conv(rng);
}

std::vector<TunedNode> profile_layer(Engine& engine, const tune::ConvConfig& c, std::mt19937_64& rng,
                                     const ProfileSettings& settings, const Limits& limits) {
  const Graph g = conv_graph(c, rng);
  const ShapeMap shapes = {{"x", Shape{c.batch, c.cin, c.in_h, c.in_w}}};
  const TensorMap inputs = {{"x", uniform_tensor(shapes.at("x"), rng)}};
  auto make_session = [&](const std::vector<NodeChoice>& choices) {
    return std::make_unique<Session>(engine, model_from_graph(g, shapes, limits),
                                     SessionOptions{.tuning = "off", .choices = choices});
  };
  return profile_nodes(engine, make_session, inputs, shapes, settings);
}

}  // namespace grove::profile
