#include "fuzz/fuzz_common.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>

#include "dynamic/slice_subnet.h"
#include "dynamic/subnet_spec.h"
#include "passes/flops.h"
#include "runtime/reference_executor.h"
#include "runtime/session.h"
#include "onnx/import.h"

namespace grove::fuzz {

Limits fuzz_limits() {
  Limits limits;
  limits.max_memory = int64_t{64} << 20;
  limits.max_nodes = 512;
  limits.max_subgraph_depth = 4;
  limits.max_tiles = 20'000;
  return limits;
}

namespace {

// Symbolic or missing dimensions become 1; a model without declared input shapes is
// loaded but not run (there is nothing to bind it to).
bool bind_shapes_of(const Graph& g, ShapeMap& shapes) {
  for (const ValueDecl& in : g.inputs) {
    if (!in.has_shape) return false;
    Shape s;
    for (const Dim& d : in.dims) s.push_back(d.value < 0 ? 1 : d.value);
    shapes[in.name] = s;
  }
  return true;
}

// Work bounded by the limits also bounds time, except for ops that loop over small data
// (a Loop trip count, Range) or do much arithmetic on small tensors (a ConvTranspose of a
// few KiB kept the naive reference busy for most of a minute under ASan; docs/fuzzing.md):
// skip graphs whose declared bytes or FLOPs are still large. Such models are slow, not wrong.
constexpr int64_t kMaxDeclaredBytes = int64_t{16} << 20;
constexpr int64_t kMaxFlops = int64_t{1} << 25;

// A dynamic model's metadata (docs/dynamic.md) is untrusted text too: every sub-net it
// describes is sliced, bound and run on the reference executor.
void slice_and_run_subnets(const Graph& g, const ShapeMap& shapes, const Limits& limits) {
  auto it = g.metadata.find(kSubnetsMetadataKey);
  if (it == g.metadata.end()) return;
  try {
    const DynamicSpec spec = parse_dynamic_spec(it->second);
    for (size_t i = 0; i < spec.subnets.size() && i < 8; ++i) {
      Model sub = model_from_graph(slice_subnet(g, spec, spec.subnets[i]).graph, {}, limits);
      sub.bind(shapes);
      if (bound_graph(sub).declared_bytes > kMaxDeclaredBytes || graph_flops(bound_graph(sub)) > kMaxFlops) continue;
      TensorMap inputs;
      for (const ValueDecl& in : bound_graph(sub).inputs) inputs[in.name] = Tensor(in.dtype, bound_graph(sub).bound_inputs.at(in.name));
      sub.run_reference(inputs);
    }
  } catch (const Error&) {
  }
}

}  // namespace

void load_plan_run(std::string_view onnx_bytes) {
  static Engine engine({.threads = 1, .pin = false});
  const Limits limits = fuzz_limits();
  try {
    Graph g = load_onnx_bytes(onnx_bytes, "fuzz.onnx", limits);
    ShapeMap shapes;
    if (!bind_shapes_of(g, shapes)) return;
    slice_and_run_subnets(g, shapes, limits);
    Model model = model_from_graph(std::move(g), {}, limits);
    model.bind(shapes);
    if (bound_graph(model).declared_bytes > kMaxDeclaredBytes || graph_flops(bound_graph(model)) > kMaxFlops) return;
    TensorMap inputs;
    for (const ValueDecl& in : bound_graph(model).inputs)
      inputs[in.name] = Tensor(in.dtype, bound_graph(model).bound_inputs.at(in.name));
    // Half the inputs (by length) plan with bf16, so its packing and kernels meet the same
    // hostile shapes (on a CPU without AVX512-BF16 that plan is fp32 again).
    const Precision precision = onnx_bytes.size() % 2 ? Precision::bf16 : Precision::fp32;
    Session session(engine, model, SessionOptions{.precision = precision});
    session.run(inputs);
    model.run_reference(inputs);
  } catch (const Error&) {
  }
}

std::string compare_plan_with_reference(std::string_view onnx_bytes, int threads) {
  static Engine one({.threads = 1, .pin = false}), two({.threads = 2, .pin = false}), three({.threads = 3, .pin = false});
  Engine& engine = threads <= 1 ? one : threads == 2 ? two : three;
  const Limits limits = fuzz_limits();
  TensorMap want, got;
  try {
    Graph g = load_onnx_bytes(onnx_bytes, "fuzz.onnx", limits);
    ShapeMap shapes;
    if (!bind_shapes_of(g, shapes)) return "";
    Model model = model_from_graph(g, {}, limits);
    model.bind(shapes);
    if (bound_graph(model).declared_bytes > kMaxDeclaredBytes || graph_flops(bound_graph(model)) > kMaxFlops) return "";
    // Uniform in [-1, 1) from a generator seeded by the model: zeros would hide most errors.
    uint32_t seed = static_cast<uint32_t>(onnx_bytes.size());
    for (char ch : onnx_bytes) seed = seed * 31 + static_cast<uint8_t>(ch);
    TensorMap inputs;
    for (const ValueDecl& in : g.inputs) {
      Tensor t(in.dtype, shapes.at(in.name));
      if (in.dtype == DType::f32)
        for (float& v : t.span<float>()) seed = seed * 1664525u + 1013904223u, v = static_cast<float>(seed >> 8) / 8388608.0f - 1.0f;
      inputs[in.name] = t;
    }
    want = run_reference(g, inputs, limits);
    Session session(engine, model, SessionOptions{.tuning = "off"});
    got = session.run(inputs);
  } catch (const Error& e) {
    if (std::getenv("GROVE_FUZZ_DEBUG")) std::fprintf(stderr, "skip: %s\n", e.what());
    return "";
  }
  if (std::getenv("GROVE_FUZZ_DEBUG")) std::fprintf(stderr, "compared\n");
  for (const auto& [name, w] : want) {
    auto it = got.find(name);
    if (it == got.end()) return "output '" + name + "' is missing";
    const Tensor& t = it->second;
    if (t.shape() != w.shape()) return "output '" + name + "' has shape " + shape_str(t.shape()) + ", the reference " + shape_str(w.shape());
    const std::vector<double> a = t.to_f64(), b = w.to_f64();
    double largest = 0;
    for (double v : b)
      if (std::isfinite(v)) largest = std::max(largest, std::fabs(v));
    for (size_t i = 0; i < b.size(); ++i) {
      const bool both_nan = std::isnan(a[i]) && std::isnan(b[i]);
      if (both_nan || a[i] == b[i] || std::fabs(a[i] - b[i]) <= 1e-3 * std::max(largest, 1.0)) continue;
      return "output '" + name + "' element " + std::to_string(i) + ": " + std::to_string(a[i]) + ", the reference " +
             std::to_string(b[i]) + " (largest " + std::to_string(largest) + ", " + std::to_string(engine.threads()) + " threads)";
    }
  }
  return "";
}

}  // namespace grove::fuzz
