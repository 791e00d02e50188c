// Single-thread bf16 convolution on AMX, per distinct channels-last conv of ResNet-50 at batch
// 1: grove's ConvNhwc tile rule with float activations and with bfloat16 activations (x, y and
// the residual as the plan stores them between AMX convs), and a oneDNN bf16 convolution
// (bf16 source and destination, its own blocked layouts, created outside the timing) as the
// ceiling this CPU's tile unit allows.
//
//   build-x/bench/grove_bench_conv_nhwc_bf16 [reps]     (AMX CPUs only; about a minute)
//
// Each shape: the three run interleaved, `reps` rounds (default 30), median time per run; oneDNN
// pinned to one thread like grove's tile.
//
//   build-x/bench/grove_bench_conv_nhwc_bf16 f32 [reps]
//
// does the same in float32 on any AVX-512 or AVX2 CPU: grove's fp32 ConvNhwc rule against oneDNN's
// f32 convolution in its own layouts and in plain NHWC (grove's activation layout).
//
//   build-x/bench/grove_bench_conv_nhwc_bf16 dot [reps]
//
// times grove's fp32 and AVX512-BF16 dot-product (no AMX) rules against oneDNN's bf16
// convolution, on CPUs with AVX512-BF16.
//
//   build-x/bench/grove_bench_conv_nhwc_bf16 taps [reps]
//
// times kernels/conv_rows.h alone with one tap per microkernel call against all taps in one
// call (AVX-512 CPUs), the measurement behind conv_rows_taps_per_call.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <dnnl.hpp>
#include <omp.h>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include "bench_nodes.h"
#include "graph/node_decisions.h"
#include "graph/tensor.h"
#include "kernels/bf16.h"
#include "kernels/conv_rows.h"
#include "kernels/gemm.h"
#include "ops/evaluate.h"
#include "ops/op.h"
#include "ops/tiling.h"

namespace {

using namespace grove;
using Clock = std::chrono::steady_clock;

struct Shape2 {
  int64_t cin, cout, size, kernel, stride, pad;
  bool residual;
  int64_t out() const { return (size + 2 * pad - kernel) / stride + 1; }
  double flops() const { return 2.0 * double(cout) * double(out() * out()) * double(cin * kernel * kernel); }
};

// ResNet-50's channels-last convs (the 3-channel stem stays NCHW); residual where a block's
// last 1x1 conv adds its shortcut.
const std::vector<Shape2> kShapes = {
    {64, 64, 56, 1, 1, 0, false},    {64, 64, 56, 3, 1, 1, false},    {64, 256, 56, 1, 1, 0, true},
    {256, 64, 56, 1, 1, 0, false},   {256, 128, 56, 1, 1, 0, false},  {128, 128, 56, 3, 2, 1, false},
    {128, 512, 28, 1, 1, 0, true},   {256, 512, 56, 1, 2, 0, false},  {512, 128, 28, 1, 1, 0, false},
    {128, 128, 28, 3, 1, 1, false},  {256, 256, 14, 3, 1, 1, false},  {256, 1024, 14, 1, 1, 0, true},
    {1024, 256, 14, 1, 1, 0, false}, {512, 512, 7, 3, 1, 1, false},   {512, 2048, 7, 1, 1, 0, true},
    {2048, 512, 7, 1, 1, 0, false},  {256, 256, 28, 3, 2, 1, false},  {512, 1024, 28, 1, 2, 0, false},
    {512, 512, 14, 3, 2, 1, false},  {1024, 2048, 14, 1, 2, 0, false},
};

// The f32 mode also times the channels-last 3x3 convs of few channels in SqueezeNet 1.1 and
// GoogLeNet, where the taps' partial sums cost most, and the stems of SqueezeNet, ResNet-50 and
// GoogLeNet, and MobileNetV2 on 3 channels.
const std::vector<Shape2> kFewChannelShapes = {
    {16, 64, 55, 3, 1, 1, false},  {32, 128, 27, 3, 1, 1, false}, {48, 192, 13, 3, 1, 1, false},
    {64, 256, 13, 3, 1, 1, false}, {16, 32, 28, 3, 1, 1, false},  {96, 128, 28, 3, 1, 1, false},
    {16, 48, 14, 3, 1, 1, false},  {112, 224, 14, 3, 1, 1, false}, {3, 64, 224, 3, 2, 0, false},
    {3, 64, 224, 7, 2, 3, false},  {3, 32, 224, 3, 2, 1, false},
};

Tensor as_bf16(const Tensor& t) {
  Tensor out(DType::bf16, t.shape());
  auto* bits = reinterpret_cast<uint16_t*>(out.raw());
  const float* v = t.data<float>();
  for (int64_t i = 0; i < t.numel(); ++i) bits[i] = kernels::bf16_bits(v[i]);
  return out;
}

using bench::ints_attr;
using bench::random_tensor;

// One way of running a shape: a closure timed per call.
struct Runner {
  std::function<void()> run;
  std::vector<double> ms;
};

// precision: the unit the node's products run on.
Runner grove_runner(const Shape2& s, bool bf16_storage, NodePrecision precision = NodePrecision::bf16_amx) {
  auto node = std::make_shared<Node>();
  node->name = "conv";
  node->op_type = "ConvNhwc";
  node->domain = kGroveDomain;
  node->opset = 13;
  node->inputs = {"x", "w", "b"};
  if (s.residual) node->inputs.push_back("r");
  node->outputs = {"y"};
  node->attrs["strides"] = ints_attr({s.stride, s.stride});
  node->attrs["pads"] = ints_attr({s.pad, s.pad, s.pad, s.pad});
  node->decisions.epilogue.activation = FusedActivation::relu;
  node->decisions.epilogue.fused = s.residual ? "Add+Relu" : "Relu";
  node->decisions.precision = precision;
  node->decisions.output_bf16 = bf16_storage;
  auto x = std::make_shared<Tensor>(random_tensor({1, s.size, s.size, s.cin}, 1));
  auto r = std::make_shared<Tensor>(random_tensor({1, s.out(), s.out(), s.cout}, 4));
  if (bf16_storage) *x = as_bf16(*x), *r = as_bf16(*r);
  auto w = std::make_shared<Tensor>(random_tensor({s.cout, s.cin, s.kernel, s.kernel}, 2));
  auto b = std::make_shared<Tensor>(random_tensor({s.cout}, 3));
  std::vector<ValueInfo> infos = {{x->dtype(), x->shape(), nullptr, true},
                                  {DType::f32, w->shape(), w.get(), true},
                                  {DType::f32, b->shape(), b.get(), true}};
  if (s.residual) infos.push_back({r->dtype(), r->shape(), nullptr, true});
  const std::vector<ValueInfo> out_infos = infer_node(*node, infos);
  auto y = std::make_shared<Tensor>(out_infos[0].dtype, out_infos[0].shape);
  const TileRule* rule = find_tile_rule(*node);
  std::vector<const Tensor*> constants = {nullptr, w.get(), b.get()};
  if (s.residual) constants.push_back(nullptr);
  std::shared_ptr<const void> prepared = rule->prepare(*node, infos, constants);
  Region region;
  for (int64_t d : y->shape()) region.push_back({0, d});
  auto scratch = std::make_shared<TileScratch>();  // one worker's, kept across the runs
  return {[=] {
            std::vector<const Tensor*> in = {x.get(), w.get(), b.get()};
            if (s.residual) in.push_back(r.get());
            std::vector<Tensor*> out = {y.get()};
            rule->run_tile(*node, in, out, region, prepared.get(), *scratch);
          },
          {}};
}

Runner dnnl_runner(const Shape2& s, dnnl::engine& eng, dnnl::stream& strm,
                   dnnl::memory::data_type type = dnnl::memory::data_type::bf16,
                   dnnl::memory::format_tag act = dnnl::memory::format_tag::any) {
  using namespace dnnl;
  using tag = memory::format_tag;
  using dt = memory::data_type;
  const memory::dims src = {1, s.cin, s.size, s.size}, wei = {s.cout, s.cin, s.kernel, s.kernel}, bias = {s.cout},
                     dst = {1, s.cout, s.out(), s.out()};
  const convolution_forward::desc desc(prop_kind::forward_inference, algorithm::convolution_direct,
                                       memory::desc(src, type, act), memory::desc(wei, type, tag::any),
                                       memory::desc(bias, dt::f32, tag::x), memory::desc(dst, type, act),
                                       {s.stride, s.stride}, {s.pad, s.pad}, {s.pad, s.pad});
  post_ops ops;
  if (s.residual) ops.append_sum(1.0f);
  ops.append_eltwise(1.0f, algorithm::eltwise_relu, 0.0f, 0.0f);
  primitive_attr attr;
  attr.set_post_ops(ops);
  auto pd = std::make_shared<convolution_forward::primitive_desc>(desc, attr, eng);
  auto prim = std::make_shared<convolution_forward>(*pd);
  auto m_src = std::make_shared<memory>(pd->src_desc(), eng), m_wei = std::make_shared<memory>(pd->weights_desc(), eng);
  auto m_bias = std::make_shared<memory>(pd->bias_desc(), eng), m_dst = std::make_shared<memory>(pd->dst_desc(), eng);
  std::memset(m_src->get_data_handle(), 0x3f, pd->src_desc().get_size());
  std::memset(m_wei->get_data_handle(), 0x3c, pd->weights_desc().get_size());
  std::memset(m_bias->get_data_handle(), 0, pd->bias_desc().get_size());
  std::memset(m_dst->get_data_handle(), 0x3f, pd->dst_desc().get_size());
  std::fprintf(stderr, "  oneDNN: %s\n", pd->impl_info_str());
  return {[=, &strm] {
            prim->execute(strm, {{DNNL_ARG_SRC, *m_src}, {DNNL_ARG_WEIGHTS, *m_wei}, {DNNL_ARG_BIAS, *m_bias},
                                 {DNNL_ARG_DST, *m_dst}});
            strm.wait();
          },
          {}};
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

// Each runner once (warm-up: packing, page faults), then `reps` rounds of all of them in turn;
// GFLOP/s of each from its median time.
std::vector<double> gflops_interleaved(const Shape2& s, std::vector<Runner> runners, int reps) {
  for (auto& r : runners) r.run();
  for (int i = 0; i < reps; ++i)
    for (auto& r : runners) {
      const auto t0 = Clock::now();
      r.run();
      r.ms.push_back(std::chrono::duration<double, std::milli>(Clock::now() - t0).count());
    }
  std::vector<double> g;
  for (const Runner& r : runners) g.push_back(s.flops() / median(r.ms) / 1e6);
  return g;
}

}  // namespace

// grove fp32 against oneDNN f32, in its chosen layouts and in NHWC.
int run_f32(int reps) {
  dnnl::engine eng(dnnl::engine::kind::cpu, 0);
  dnnl::stream strm(eng);
  using dt = dnnl::memory::data_type;
  using tag = dnnl::memory::format_tag;
  std::printf("| conv (Cin->Cout k s plane) | grove f32 GFLOP/s | oneDNN f32 any GFLOP/s | oneDNN f32 nhwc GFLOP/s | grove / oneDNN any |\n");
  std::printf("|---|---:|---:|---:|---:|\n");
  std::vector<Shape2> shapes = kShapes;
  shapes.insert(shapes.end(), kFewChannelShapes.begin(), kFewChannelShapes.end());
  for (const Shape2& s : shapes) {
    const std::vector<double> g = gflops_interleaved(
        s, {grove_runner(s, false, NodePrecision::f32), dnnl_runner(s, eng, strm, dt::f32, tag::any),
            dnnl_runner(s, eng, strm, dt::f32, tag::nhwc)},
        reps);
    std::printf("| %ld->%ld %ldx%ld s%ld %ldx%ld%s | %.0f | %.0f | %.0f | %.2f |\n", long(s.cin), long(s.cout),
                long(s.kernel), long(s.kernel), long(s.stride), long(s.size), long(s.size), s.residual ? " +r" : "", g[0],
                g[1], g[2], g[0] / g[1]);
    std::fflush(stdout);
  }
  return 0;
}

// AVX512-BF16 without AMX (Zen 4/5): grove fp32, grove's dot-product bf16 (float activations,
// as the plan runs it there) and oneDNN's bf16 convolution in its own layouts.
int run_dot(int reps) {
  dnnl::engine eng(dnnl::engine::kind::cpu, 0);
  dnnl::stream strm(eng);
  std::printf("| conv (Cin->Cout k s plane) | grove f32 GFLOP/s | grove bf16 dot GFLOP/s | oneDNN bf16 GFLOP/s | grove bf16 / f32 |\n");
  std::printf("|---|---:|---:|---:|---:|\n");
  std::vector<Shape2> shapes = kShapes;
  shapes.push_back({3, 64, 224, 7, 2, 3, false});
  for (const Shape2& s : shapes) {
    const std::vector<double> g = gflops_interleaved(
        s, {grove_runner(s, false, NodePrecision::f32), grove_runner(s, false, NodePrecision::bf16), dnnl_runner(s, eng, strm)}, reps);
    std::printf("| %ld->%ld %ldx%ld s%ld %ldx%ld%s | %.0f | %.0f | %.0f | %.2f |\n", long(s.cin), long(s.cout),
                long(s.kernel), long(s.kernel), long(s.stride), long(s.size), long(s.size), s.residual ? " +r" : "", g[0],
                g[1], g[2], g[1] / g[0]);
    std::fflush(stdout);
  }
  return 0;
}

// conv_rows alone (kernels/conv_rows.h), its taps one per microkernel call against all in one
// call, interleaved; 3x3 stride 1 on padded rows of the shapes that decide the rule.
int run_taps(int reps) {
  struct Taps { size_t c, m, size; };
  std::printf("| conv (Cin->Cout 3x3 plane) | weights per panel KiB | 1 tap per call GFLOP/s | all taps GFLOP/s | all / 1 | default |\n");
  std::printf("|---|---:|---:|---:|---:|---:|\n");
  for (Taps s : {Taps{16, 64, 55}, Taps{32, 128, 27}, Taps{64, 64, 56}, Taps{128, 128, 28}, Taps{256, 256, 14},
                 Taps{384, 384, 14}, Taps{512, 512, 7}, Taps{512, 512, 14}, Taps{1024, 256, 7}}) {
    const size_t wp = s.size + 2, taps = 9, k = taps * s.c;
    const Tensor xt = random_tensor({int64_t((s.size + 2) * wp * s.c)}, 1), wt = random_tensor({int64_t(k * s.m)}, 2);
    const float *x = xt.data<float>(), *w = wt.data<float>();
    std::vector<float> y(s.size * s.size * s.m);
    const kernels::PackedB packed = kernels::pack_b(w, k, s.m, s.m, kernels::BLayout::k_by_n, kernels::active_isa());
    kernels::ConvRowCall call;
    call.x = x, call.tap_row_floats = wp * s.c, call.channels = s.c, call.kernel_h = call.kernel_w = 3;
    call.out_w = s.size, call.rows = s.size, call.row_step_floats = wp * s.c;
    call.w = &packed, call.n = s.m, call.y = y.data(), call.y_stride = s.m;
    std::vector<double> one, all;
    for (int r = 0; r < reps; ++r)
      for (size_t per_call : {size_t{1}, taps}) {
        call.taps_per_call = per_call;
        const auto t0 = Clock::now();
        kernels::conv_rows(call);
        (per_call == 1 ? one : all).push_back(std::chrono::duration<double, std::milli>(Clock::now() - t0).count());
      }
    std::sort(one.begin(), one.end());
    std::sort(all.begin(), all.end());
    const double flops = 2.0 * double(k) * double(s.m) * double(s.size * s.size), a = one[one.size() / 2], b = all[all.size() / 2];
    std::printf("| %zu->%zu %zux%zu | %zu | %.0f | %.0f | %.2f | %zu |\n", s.c, s.m, s.size, s.size, k * packed.nr * 4 / 1024,
                flops / a / 1e6, flops / b / 1e6, a / b, kernels::conv_rows_taps_per_call(s.c, taps, packed.nr));
    std::fflush(stdout);
  }
  return 0;
}

int main(int argc, char** argv) {
  omp_set_num_threads(1);  // oneDNN's OpenMP runtime would use every core; grove's tile runs on one
  if (argc > 1 && std::string(argv[1]) == "f32") return run_f32(argc > 2 ? std::max(1, std::atoi(argv[2])) : 30);
  if (argc > 1 && std::string(argv[1]) == "dot") {
    if (!kernels::precision_supported(kernels::Precision::bf16, kernels::active_isa())) {
      std::fprintf(stderr, "grove_bench_conv_nhwc_bf16 dot: this CPU has no AVX512-BF16\n");
      return 1;
    }
    return run_dot(argc > 2 ? std::max(1, std::atoi(argv[2])) : 30);
  }
  if (argc > 1 && std::string(argv[1]) == "taps") {
    if (!kernels::conv_row_supported(kernels::active_isa(), kernels::Precision::f32)) {
      std::fprintf(stderr, "grove_bench_conv_nhwc_bf16 taps: conv_rows needs AVX-512\n");
      return 1;
    }
    return run_taps(argc > 2 ? std::max(1, std::atoi(argv[2])) : 41);
  }
  if (!kernels::precision_supported(kernels::Precision::bf16_amx, kernels::active_isa())) {
    std::fprintf(stderr, "grove_bench_conv_nhwc_bf16: this CPU has no AMX-BF16\n");
    return 1;
  }
  const int reps = argc > 1 ? std::max(1, std::atoi(argv[1])) : 30;
  dnnl::engine eng(dnnl::engine::kind::cpu, 0);
  dnnl::stream strm(eng);
  std::printf("| conv (Cin->Cout k s plane) | f32 act GFLOP/s | bf16 act GFLOP/s | oneDNN bf16 GFLOP/s | bf16 act / f32 act |\n");
  std::printf("|---|---:|---:|---:|---:|\n");
  for (const Shape2& s : kShapes) {
    const std::vector<double> g =
        gflops_interleaved(s, {grove_runner(s, false), grove_runner(s, true), dnnl_runner(s, eng, strm)}, reps);
    std::printf("| %ld->%ld %ldx%ld s%ld %ldx%ld%s | %.0f | %.0f | %.0f | %.2f |\n", long(s.cin), long(s.cout),
                long(s.kernel), long(s.kernel), long(s.stride), long(s.size), long(s.size), s.residual ? " +r" : "", g[0],
                g[1], g[2], g[1] / g[0]);
    std::fflush(stdout);
  }
  return 0;
}
