#include "fuzz/fuzz_common.h"

#include "passes/flops.h"
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

}  // namespace

void load_plan_run(std::string_view onnx_bytes) {
  static Engine engine({.threads = 1, .pin = false});
  const Limits limits = fuzz_limits();
  try {
    Graph g = load_onnx_bytes(onnx_bytes, "fuzz.onnx", limits);
    ShapeMap shapes;
    if (!bind_shapes_of(g, shapes)) return;
    Model model(std::move(g), {}, limits);
    model.bind(shapes);
    if (model.graph().declared_bytes > kMaxDeclaredBytes || graph_flops(model.graph()) > kMaxFlops) return;
    TensorMap inputs;
    for (const ValueDecl& in : model.graph().inputs)
      inputs[in.name] = Tensor(in.dtype, model.graph().bound_inputs.at(in.name));
    // Half the inputs (by length) plan with bf16, so its packing and kernels meet the same
    // hostile shapes (on a CPU without AVX512-BF16 that plan is fp32 again).
    const Precision precision = onnx_bytes.size() % 2 ? Precision::bf16 : Precision::fp32;
    Session session(engine, model, SessionOptions{.precision = precision});
    session.run(inputs);
    model.run_reference(inputs);
  } catch (const Error&) {
  }
}

}  // namespace grove::fuzz
