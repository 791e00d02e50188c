// grove tune --sample N --dataset FILE.csv: the performance model's data from a sampled space of
// conv layers (paper 003 profiles many configurations, not only the layers of the models at
// hand), every eighth a network's stem (--sample-stems: stems only). Each sample is a one-conv
// model (Conv + bias, then ReLU) built in memory and profiled
// like a model's conv (cli/tune_profile.h): every candidate primitive and grid, inside the
// model, rows appended to the dataset as grove tune --dataset writes them.
#include <chrono>
#include <cmath>
#include <cstdio>
#include <iterator>
#include <random>

#include "cli/commands.h"
#include "cli/format.h"
#include "cli/inputs.h"
#include "cli/tune_profile.h"
#include "grove/model.h"
#include "ops/op_names.h"
#include "runtime/session.h"
#include "tune/conv_candidates.h"

namespace grove::cli {
namespace {

using Clock = std::chrono::steady_clock;

// Sizes as CNNs have them: channels from 8 to 512 (whole and half powers of two), square planes
// from 7 to 112, kernels 1x1 and 3x3 most of the time, stride 2 on a quarter of the wider
// kernels; at least 2 MFLOPs (smaller layers are all overhead) and at most 1 GFLOP (the
// profile's time).
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

// A network's first conv, on an image: 1, 3 or 4 channels in, a 3x3 to 7x7 kernel, stride 2
// most of the time, on the planes images come in. The direct kernel competes only here.
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

Node conv_node(const tune::ConvConfig& c) {
  Node n;
  n.name = "conv";
  n.op_type = kConv;
  n.opset = 13;
  n.inputs = {"x", "w", "b"};
  n.outputs = {"c"};
  auto ints = [&](const char* key, std::vector<int64_t> v) {
    Attribute& a = n.attrs[key];
    a.kind = Attribute::Kind::ints;
    a.ints = std::move(v);
  };
  const int64_t pad = c.kernel_h / 2;
  ints("kernel_shape", {c.kernel_h, c.kernel_w});
  ints("strides", {c.stride_h, c.stride_w});
  ints("pads", {pad, pad, pad, pad});
  return n;
}

Graph conv_graph(const tune::ConvConfig& c, std::mt19937_64& rng) {
  Graph g;
  g.name = "sampled_conv";
  g.opsets[""] = 13;
  ValueDecl x{"x", DType::f32, {}, true};
  for (int64_t d : {c.batch, c.cin, c.in_h, c.in_w}) x.dims.push_back(Dim{d, ""});
  g.inputs.push_back(x);
  g.initializers["w"] = random_tensor(DType::f32, {c.cout, c.cin, c.kernel_h, c.kernel_w}, rng);
  g.initializers["b"] = random_tensor(DType::f32, {c.cout}, rng);
  g.nodes.push_back(conv_node(c));
  Node relu;
  relu.name = "relu";
  relu.op_type = kRelu;
  relu.opset = 13;
  relu.inputs = {"c"};
  relu.outputs = {"y"};
  g.nodes.push_back(relu);
  g.outputs.push_back(ValueDecl{"y", DType::f32, {}, false});
  return g;
}

}  // namespace

int run_tune_sample(const TuneOptions& o) {
  if (!o.model.empty()) throw Error("tune: --sample profiles sampled conv layers; give no model with it");
  if (o.dataset.empty()) throw Error("tune: --sample needs --dataset FILE.csv to append the measurements to");
  const auto t0 = Clock::now();
  std::mt19937_64 rng(o.seed);
  Engine engine({.threads = o.threads});
  ProfileSettings settings;
  settings.runs = o.runs;
  settings.passes = o.passes;
  settings.progress = false;
  size_t rows = 0;
  for (int i = 0; i < o.sample; ++i) {
    // Every eighth layer a stem, the first among them: CNNs have fewer, but the direct kernel
    // has no other layers to learn from, and a calibration of a few layers needs one.
    const tune::ConvConfig c = o.sample_stems || i % 8 == 0 ? sample_stem(rng) : sample_conv(rng);
    const Graph g = conv_graph(c, rng);
    const ShapeMap shapes = {{"x", Shape{c.batch, c.cin, c.in_h, c.in_w}}};
    const TensorMap inputs = {{"x", random_tensor(DType::f32, shapes.at("x"), rng)}};
    auto make_session = [&](const std::vector<NodeChoice>& choices) {
      return std::make_unique<Session>(engine, model_from_graph(g, shapes, o.limits),
                                       SessionOptions{.tuning = "off", .choices = choices});
    };
    const auto ts = Clock::now();
    const std::vector<TunedNode> nodes = profile_nodes(engine, make_session, inputs, shapes, settings);
    size_t measured = 0;
    for (const TunedNode& t : nodes)
      for (const TuneCandidate& k : t.candidates) measured += t.conv && k.us > 0;
    rows += measured;
    write_dataset(o.dataset, nodes, engine.threads());
    if (!o.quiet)
      std::fprintf(stderr, "tune: sample %d/%d: %lld->%lld %lldx%lld/%lld on %lldx%lld, %zu candidates, %s\n", i + 1,
                   o.sample, (long long)c.cin, (long long)c.cout, (long long)c.kernel_h, (long long)c.kernel_w,
                   (long long)c.stride_h, (long long)c.in_h, (long long)c.in_w, measured,
                   milliseconds(std::chrono::duration<double>(Clock::now() - ts).count()).c_str());
  }
  std::printf("sampled %d conv layers on %d threads: %zu measured candidates appended to %s in %s\n", o.sample,
              engine.threads(), rows, o.dataset.c_str(),
              milliseconds(std::chrono::duration<double>(Clock::now() - t0).count()).c_str());
  return 0;
}

}  // namespace grove::cli
