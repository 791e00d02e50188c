// Single-thread convolution throughput, grove's Conv tile rule against a oneDNN convolution
// primitive, for every distinct conv shape of ResNet-50 and VGG-16 at batch 1.
//
//   build-x/bench/grove_bench_conv                 (about 2 minutes; prints a markdown table)
//
// grove: the Conv TileRule exactly as the planner uses it (prepare once = weights packed or
// Winograd-transformed, then run_tile over the whole output), NCHW in and out, so the path is
// the one tile_conv.cpp chooses (Winograd F(4x4,3x3), im2col GEMM, 1x1 GEMM, the direct
// kernel for few input channels). For 3x3 stride-1 shapes and for the stems the im2col path is
// also timed (the plan's choice "gemm") for the ratio.
// oneDNN: forward_inference, convolution_auto, every memory format `any` (its blocked
// layouts); weights reordered once outside the timing, and the activations are created in
// the layout oneDNN chose, outside the timing: as inside a network, where each library keeps
// its own activation layout (grove NCHW, oneDNN nChw16c), neither side pays a reorder.
// FLOPs are direct-conv FLOPs (2 Cout Ho Wo Cin kh kw) for both, so Winograd's saving shows
// as a higher effective GFLOP/s. GFLOP/s from CPU time; median of the repetitions.
//
//   build-x/bench/grove_bench_conv primitives [reps]
//
// times, for the convs of at most 64 input channels and a kernel wider than 1, the rule's path,
// the im2col GEMM and the direct kernel interleaved run by run (median of `reps`, default 30).
#include <benchmark/benchmark.h>

#include <omp.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <dnnl.hpp>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "bench_nodes.h"
#include "bench_table.h"
#include "graph/node_decisions.h"
#include "graph/graph.h"
#include "graph/tensor.h"
#include "ops/evaluate.h"
#include "ops/conv/tile_conv_winograd.h"
#include "ops/tiling.h"

namespace {

using namespace grove;

struct ConvShape {
  const char* model;
  int64_t cin, cout, size, kernel, stride, pad;  // square input plane of `size`
  int64_t out() const { return (size + 2 * pad - kernel) / stride + 1; }
  double flops() const { return 2.0 * double(cout) * out() * out() * double(cin) * kernel * kernel; }
  std::string text() const {
    return std::to_string(cin) + "->" + std::to_string(cout) + " " + std::to_string(kernel) + "x" +
           std::to_string(kernel) + " s" + std::to_string(stride) + " " + std::to_string(size) + "x" +
           std::to_string(size);
  }
};

// Every distinct conv of torchvision's ResNet-50 (stride on the 3x3) and VGG-16, 224 x 224 input.
const std::vector<ConvShape> kShapes = {
    {"ResNet-50", 3, 64, 224, 7, 2, 3},     {"ResNet-50", 64, 64, 56, 1, 1, 0},     {"ResNet-50", 64, 64, 56, 3, 1, 1},
    {"ResNet-50", 64, 256, 56, 1, 1, 0},    {"ResNet-50", 256, 64, 56, 1, 1, 0},    {"ResNet-50", 256, 128, 56, 1, 1, 0},
    {"ResNet-50", 128, 128, 56, 3, 2, 1},   {"ResNet-50", 128, 512, 28, 1, 1, 0},   {"ResNet-50", 256, 512, 56, 1, 2, 0},
    {"ResNet-50", 512, 128, 28, 1, 1, 0},   {"ResNet-50", 128, 128, 28, 3, 1, 1},   {"ResNet-50", 512, 256, 28, 1, 1, 0},
    {"ResNet-50", 256, 256, 28, 3, 2, 1},   {"ResNet-50", 256, 1024, 14, 1, 1, 0},  {"ResNet-50", 512, 1024, 28, 1, 2, 0},
    {"ResNet-50", 1024, 256, 14, 1, 1, 0},  {"ResNet-50", 256, 256, 14, 3, 1, 1},   {"ResNet-50", 1024, 512, 14, 1, 1, 0},
    {"ResNet-50", 512, 512, 14, 3, 2, 1},   {"ResNet-50", 512, 2048, 7, 1, 1, 0},   {"ResNet-50", 1024, 2048, 14, 1, 2, 0},
    {"ResNet-50", 2048, 512, 7, 1, 1, 0},   {"ResNet-50", 512, 512, 7, 3, 1, 1},    {"VGG-16", 3, 64, 224, 3, 1, 1},
    {"VGG-16", 64, 64, 224, 3, 1, 1},       {"VGG-16", 64, 128, 112, 3, 1, 1},      {"VGG-16", 128, 128, 112, 3, 1, 1},
    {"VGG-16", 128, 256, 56, 3, 1, 1},      {"VGG-16", 256, 256, 56, 3, 1, 1},      {"VGG-16", 256, 512, 28, 3, 1, 1},
    {"VGG-16", 512, 512, 28, 3, 1, 1},      {"VGG-16", 512, 512, 14, 3, 1, 1},
    // MobileNetV2's 1x1 convs with few channels (expand / project), memory-heavy for a GEMM.
    {"MobileNetV2", 16, 96, 112, 1, 1, 0},  {"MobileNetV2", 96, 24, 56, 1, 1, 0},   {"MobileNetV2", 24, 144, 56, 1, 1, 0},
    {"MobileNetV2", 144, 24, 56, 1, 1, 0},  {"MobileNetV2", 32, 192, 28, 1, 1, 0},
    // SqueezeNet 1.1's stem (GoogLeNet's is ResNet-50's) and its 3x3 expand convs: few input
    // channels, where Winograd's transforms and im2col's copies weigh most.
    {"SqueezeNet", 3, 64, 224, 3, 2, 0},    {"SqueezeNet", 16, 64, 55, 3, 1, 1},    {"SqueezeNet", 32, 128, 27, 3, 1, 1},
    {"SqueezeNet", 48, 192, 13, 3, 1, 1},   {"SqueezeNet", 64, 256, 13, 3, 1, 1},
};

using bench::ints_attr;
using bench::random_tensor;

bool winograd_shape(const ConvShape& s) { return s.kernel == 3 && s.stride == 1; }
bool direct_shape(const ConvShape& s) { return s.cin <= 4 && s.stride >= 2; }  // the rule's choice
bool few_channels(const ConvShape& s) { return s.cin <= 64; }  // the direct kernel timed too

// The path tile_conv.cpp takes for this shape, by rule or with the choice "gemm".
const char* path_of(const ConvShape& s, bool by_rule) {
  if (by_rule && direct_shape(s)) return "direct";
  if (s.kernel == 1) return "gemm 1x1";
  const size_t k = size_t(s.kernel), st = size_t(s.stride), out = size_t(s.out());
  const kernels::Conv2dShape shape = {.channels = size_t(s.cin), .in_h = size_t(s.size), .in_w = size_t(s.size),
                                      .out_h = out, .out_w = out, .kernel_h = k, .kernel_w = k, .stride_h = st,
                                      .stride_w = st, .pad_top = size_t(s.pad), .pad_left = size_t(s.pad)};
  return by_rule && tiling::winograd_by_rule(shape, 1, s.cout) ? "winograd" : "im2col";
}

void set_flops(benchmark::State& state, const ConvShape& s) {
  state.counters["GFLOP/s"] = benchmark::Counter(s.flops() * double(state.iterations()) / 1e9, benchmark::Counter::kIsRate);
}

// grove's Conv tile rule on the whole output, its primitive by rule (empty) or as the plan would
// choose it ("gemm": the im2col GEMM, "direct"), ready to run.
struct GroveConv {
  Node node;
  Tensor x, w, b, y;
  const TileRule* rule = nullptr;
  std::shared_ptr<const void> prepared;

  GroveConv(const ConvShape& s, const std::string& primitive) {
    node.name = "conv";
    node.op_type = "Conv";
    node.opset = 11;
    node.inputs = {"x", "w", "b"};
    node.outputs = {"y"};
    node.attrs["strides"] = ints_attr({s.stride, s.stride});
    node.attrs["pads"] = ints_attr({s.pad, s.pad, s.pad, s.pad});
    node.attrs["kernel_shape"] = ints_attr({s.kernel, s.kernel});
    if (!primitive.empty()) node.decisions.conv = parse_conv_primitive(primitive).value();
    x = random_tensor({1, s.cin, s.size, s.size}, 1);
    w = random_tensor({s.cout, s.cin, s.kernel, s.kernel}, 2);
    b = random_tensor({s.cout}, 3);
    const std::vector<ValueInfo> infos = {
        {DType::f32, x.shape(), nullptr, true}, {DType::f32, w.shape(), &w, true}, {DType::f32, b.shape(), &b, true}};
    y = Tensor(DType::f32, infer_node(node, infos)[0].shape);
    rule = find_tile_rule(node);
    const std::vector<const Tensor*> constants = {nullptr, &w, &b};
    prepared = rule->prepare(node, infos, constants);
  }

  void run() {
    Region region;
    for (int64_t d : y.shape()) region.push_back({0, d});
    const std::vector<const Tensor*> in = {&x, &w, &b};
    std::vector<Tensor*> out = {&y};
    rule->run_tile(node, in, out, region, prepared.get(), scratch);
  }
  TileScratch scratch;  // one worker's, kept across the runs
};

// The primitives side by side, run after run in turn, so that each sees the same machine
// state (the VM's speed moves between runs): median GFLOP/s of each.
int run_primitives(int reps) {
  std::printf("| model | conv (Cin->Cout k s input) | rule's path | rule GFLOP/s | im2col GFLOP/s | direct GFLOP/s |\n");
  std::printf("|---|---|---|---:|---:|---:|\n");
  for (const ConvShape& s : kShapes) {
    if (!few_channels(s) || s.kernel == 1) continue;
    std::vector<GroveConv> convs;
    for (const char* p : {"", "gemm", "direct"}) convs.emplace_back(s, p);
    std::vector<std::vector<double>> ms(convs.size());
    for (auto& c : convs) c.run();
    for (int i = 0; i < reps; ++i)
      for (size_t v = 0; v < convs.size(); ++v) {
        const auto t0 = std::chrono::steady_clock::now();
        convs[v].run();
        ms[v].push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
      }
    auto gflops = [&](std::vector<double>& v) {
      std::sort(v.begin(), v.end());
      return s.flops() / v[v.size() / 2] / 1e6;
    };
    std::printf("| %s | %s | %s | %.1f | %.1f | %.1f |\n", s.model, s.text().c_str(), path_of(s, true), gflops(ms[0]),
                gflops(ms[1]), gflops(ms[2]));
    std::fflush(stdout);
  }
  return 0;
}

void run_grove(benchmark::State& state, const ConvShape& s, const std::string& primitive) {
  GroveConv conv(s, primitive);
  for (auto _ : state) {
    conv.run();
    benchmark::ClobberMemory();
  }
  set_flops(state, s);
  state.SetLabel(primitive == "direct" ? "direct" : path_of(s, primitive.empty()));
}

void run_dnnl(benchmark::State& state, const ConvShape& s) {
  using namespace dnnl;
  using tag = memory::format_tag;
  using dt = memory::data_type;
  engine eng(engine::kind::cpu, 0);
  stream strm(eng);
  const memory::dims src_dims = {1, s.cin, s.size, s.size}, wei_dims = {s.cout, s.cin, s.kernel, s.kernel},
                     bias_dims = {s.cout}, dst_dims = {1, s.cout, s.out(), s.out()};
  const memory::dims strides = {s.stride, s.stride}, pads = {s.pad, s.pad};
  const convolution_forward::desc desc(prop_kind::forward_inference, algorithm::convolution_auto,
                                       memory::desc(src_dims, dt::f32, tag::any), memory::desc(wei_dims, dt::f32, tag::any),
                                       memory::desc(bias_dims, dt::f32, tag::any), memory::desc(dst_dims, dt::f32, tag::any),
                                       strides, pads, pads);
  const convolution_forward::primitive_desc pd(desc, eng);
  Tensor x = random_tensor({1, s.cin, s.size, s.size}, 1), w = random_tensor({s.cout, s.cin, s.kernel, s.kernel}, 2),
         b = random_tensor({s.cout}, 3);
  memory user_src({src_dims, dt::f32, tag::nchw}, eng, x.data<float>());
  memory user_wei({wei_dims, dt::f32, tag::oihw}, eng, w.data<float>());
  memory bias({bias_dims, dt::f32, tag::x}, eng, b.data<float>());
  memory src(pd.src_desc(), eng), wei(pd.weights_desc(), eng), dst(pd.dst_desc(), eng);
  reorder(user_src, src).execute(strm, user_src, src);
  reorder(user_wei, wei).execute(strm, user_wei, wei);
  strm.wait();
  convolution_forward conv(pd);
  const std::unordered_map<int, memory> args = {
      {DNNL_ARG_SRC, src}, {DNNL_ARG_WEIGHTS, wei}, {DNNL_ARG_BIAS, bias}, {DNNL_ARG_DST, dst}};
  for (auto _ : state) {
    conv.execute(strm, args);
    strm.wait();
    benchmark::ClobberMemory();
  }
  set_flops(state, s);
  state.SetLabel(pd.impl_info_str());
}

// grove and oneDNN alternate shape by shape, so both see the same machine load.
void register_shapes() {
  for (size_t i = 0; i < kShapes.size(); ++i) {
    const ConvShape& s = kShapes[i];
    auto reg = [&](const std::string& name, auto fn) {
      benchmark::RegisterBenchmark(name.c_str(), fn)->Arg(int64_t(i))->Unit(benchmark::kMillisecond)->MinTime(0.2)->Repetitions(3)
          ->ReportAggregatesOnly(true);
    };
    reg("grove", [s](benchmark::State& st) { run_grove(st, s, ""); });
    if (winograd_shape(s) || direct_shape(s)) reg("grove_im2col", [s](benchmark::State& st) { run_grove(st, s, "gemm"); });
    if (few_channels(s) && !direct_shape(s)) reg("grove_direct", [s](benchmark::State& st) { run_grove(st, s, "direct"); });
    reg("onednn", [s](benchmark::State& st) { run_dnnl(st, s); });
  }
}

}  // namespace

int main(int argc, char** argv) {
  omp_set_num_threads(1);  // oneDNN's OpenMP runtime would use every core; grove's tile runs on one
  if (argc > 1 && std::string(argv[1]) == "primitives") return run_primitives(argc > 2 ? std::max(1, std::atoi(argv[2])) : 30);
  register_shapes();
  grove::bench::TableReporter reporter;
  if (!grove::bench::run_benchmarks(argc, argv, reporter)) return 1;

  std::printf("\nGFLOP/s = direct-conv FLOPs (2 Cout Ho Wo Cin kh kw) / CPU time, batch 1, one thread; median.\n\n");
  std::printf("| model | conv (Cin->Cout k s input) | grove path | grove GFLOP/s | oneDNN GFLOP/s | grove/oneDNN | im2col GFLOP/s | path/im2col | direct GFLOP/s |\n");
  std::printf("|---|---|---|---:|---:|---:|---:|---:|---:|\n");
  double log_sum = 0.0;
  std::map<std::string, std::pair<double, int>> per_model;
  int count = 0;
  for (size_t i = 0; i < kShapes.size(); ++i) {
    const std::string key = std::to_string(i);
    if (!reporter.gflops.count(key)) continue;
    std::map<std::string, double>& row = reporter.gflops[key];
    const ConvShape& s = kShapes[i];
    const double grove = row["grove"], dnnl = row["onednn"], ratio = dnnl > 0 ? grove / dnnl : 0.0;
    std::string im2col = "", speedup = "";
    if (row.count("grove_im2col") && reporter.labels[key]["grove"] != "im2col") {
      im2col = std::to_string(row["grove_im2col"]).substr(0, 5);
      char text[32];
      std::snprintf(text, sizeof text, "%.2f", grove / row["grove_im2col"]);
      speedup = text;
    }
    const std::string direct = row.count("grove_direct") ? std::to_string(row["grove_direct"]).substr(0, 5) : "";
    std::printf("| %s | %s | %s | %.1f | %.1f | %.2f | %s | %s | %s |\n", s.model, s.text().c_str(),
                reporter.labels[key]["grove"].c_str(), grove, dnnl, ratio, im2col.c_str(), speedup.c_str(), direct.c_str());
    if (ratio > 0) {
      log_sum += std::log(ratio), ++count;
      per_model[s.model].first += std::log(ratio), ++per_model[s.model].second;
    }
  }
  for (auto& [model, acc] : per_model)
    std::printf("\nGeometric mean grove/oneDNN, %s: %.2f", model.c_str(), std::exp(acc.first / acc.second));
  if (count) std::printf("\nGeometric mean grove/oneDNN, all %d shapes: %.2f\n", count, std::exp(log_sum / count));
  return 0;
}
