// The plan's choice of arithmetic per node (grove/precision.h): with bf16 asked for and
// available, every Conv, MatMul and Gemm whose products run on the GEMM kernels with constant
// weights is marked (graph/node_decisions.h), "bf16_amx" where the CPU has AMX tiles and
// "bf16" (AVX512-BF16 dot products) otherwise, and so is the fused Attention; their tile rules
// then pack weights to bf16 once and round activations to bf16 as they pack them. Everything
// else (normalisation, softmax, elementwise, reductions) stays float32.
#include "plan/precision.h"

#include <cstdio>
#include <map>

#include "graph/node_decisions.h"
#include "kernels/conv_rows.h"
#include "kernels/gemm.h"
#include "ops/conv/channels_last.h"
#include "ops/op.h"
#include "ops/op_names.h"
#include "passes/passes.h"

namespace grove {

namespace {

bool is_f32(const Graph& g, const std::string& name) {
  auto it = g.values.find(name);
  return it != g.values.end() && it->second.dtype == DType::f32;
}

const Tensor* initializer(const Graph& g, const Node& node, size_t input) {
  if (node.inputs.size() <= input || node.inputs[input].empty()) return nullptr;
  auto it = g.initializers.find(node.inputs[input]);
  return it == g.initializers.end() || it->second.dtype() != DType::f32 ? nullptr : &it->second;
}

// Conv through the im2col GEMM: 1-D or 2-D, and more than one input channel per group (a
// depthwise conv runs a direct loop with nothing to pack). Winograd layers go bf16 too: on AMX
// the im2col GEMM beats fp32 Winograd; on AVX512-BF16 dot products the row conv, which adds
// the taps in registers, measured faster than fp32 Winograd at 2 threads and about even at 1
// (and their x can then be stored bf16). A stem of few input channels stays fp32 on dot
// products: the f32 row conv adds its taps in registers, where bf16 would lay out and round
// every window first (an odd channel count makes no bf16 pairs), and measured slower.
// docs/precision.md has the measurements.
bool conv_on_gemm(const Graph& g, const Node& node, const Tensor& w, bool amx) {
  const size_t rank = w.shape().size();
  const int64_t group = node.attr_int("group", 1);
  if (!(rank == 3 || rank == 4) || !(group == 1 || w.shape()[1] > 1)) return false;
  return amx || !is_few_channel_stem(g, node);
}

bool wants_bf16(const Graph& g, const Node& node, bool amx) {
  if (node.inputs.empty() || !is_f32(g, node.inputs[0]) || node.outputs.empty() || !is_f32(g, node.outputs[0]))
    return false;
  // The fused attention's two GEMMs (Q.K^T and P.V): its operands are activations, packed per tile.
  if (node.domain == kGroveDomain) return node.op_type == kAttention;
  if (!node.domain.empty() && node.domain != "ai.onnx") return false;
  const Tensor* w = initializer(g, node, 1);
  if (!w) return false;
  if (node.op_type == kConv) return conv_on_gemm(g, node, *w, amx);
  return node.op_type == kMatMul || node.op_type == kGemm;
}

// "2 Conv, 1 MatMul", or "none".
std::string count_by_op(const std::map<std::string, int>& by_op) {
  std::string text;
  for (const auto& [op, count] : by_op) text += (text.empty() ? "" : ", ") + std::to_string(count) + " " + op;
  return text.empty() ? "none" : text;
}

// int8 weights: MatMul and Gemm of float activations with a constant float B of rank 2 (the
// projections of a transformer, its LM head).
PrecisionReport int8_weights(Graph& graph) {
  PrecisionReport report;
  report.precision = Precision::int8_weights;
  std::map<std::string, int> by_op;
  for (Node& node : graph.nodes) {
    if (!(node.op_type == kMatMul || node.op_type == kGemm) || !(node.domain.empty() || node.domain == "ai.onnx")) continue;
    const Tensor* w = initializer(graph, node, 1);
    if (!w || w->rank() != 2 || !is_f32(graph, node.inputs[0]) || node.outputs.empty() || !is_f32(graph, node.outputs[0]))
      continue;
    node.decisions.precision = NodePrecision::int8_weights;
    ++report.int8_weight_nodes;
    ++by_op[node.op_type];
  }
  report.note = "int8 weights (a scale per output column) in " + std::to_string(report.int8_weight_nodes) + " nodes (" +
                count_by_op(by_op) + (by_op.empty() ? ")" : "); activations, sums and everything else fp32");
  return report;
}

}  // namespace

PrecisionReport apply_precision(Graph& graph, Precision wanted, double bf16_dot_gain) {
  PrecisionReport report;
  if (wanted == Precision::fp32) return report;
  if (wanted == Precision::int8_weights) return int8_weights(graph);
  if (!kernels::precision_supported(kernels::Precision::bf16, kernels::active_isa())) {
    report.note = "bf16 asked for, but this CPU (or GROVE_ISA) has no AVX512-BF16: running fp32";
    return report;
  }
  // The tile unit where there is one: the same rounding, several times the products per cycle.
  const bool amx = kernels::precision_supported(kernels::Precision::bf16_amx, kernels::active_isa());
  if (!bf16_pays(amx, bf16_dot_gain)) {
    char gain[32];
    std::snprintf(gain, sizeof gain, "%.1fx", bf16_dot_gain);
    report.note = std::string("bf16 asked for, but this CPU's AVX512-BF16 dot products run its GEMM only ") + gain +
                  " as fast as fp32 (measured): running fp32";
    return report;
  }
  report.precision = Precision::bf16;
  std::map<std::string, int> by_op;
  for (Node& node : graph.nodes) {
    if (!wants_bf16(graph, node, amx)) continue;
    node.decisions.precision = amx ? NodePrecision::bf16_amx : NodePrecision::bf16;
    ++report.bf16_nodes;
    ++by_op[node.op_type];
  }
  report.note = std::string(amx ? "bf16 products on AMX tiles" : "bf16 products") + " in " +
                std::to_string(report.bf16_nodes) + " nodes (" + count_by_op(by_op) +
                (by_op.empty() ? ")" : "); everything else fp32");
  return report;
}

void store_bf16_between_convs(Graph& graph, PrecisionReport& report) {
  // AMX convs, and dot-product convs whose x has whole pairs of channels (their kernel reads x's
  // pairs in place) and whose row path holds every tap in registers (a bf16 y keeps no partial
  // sums). Neither is a Winograd layer: bf16 marks none on dot products.
  auto bf16_conv = [&](const Node& n) {
    if (n.op_type != kConvNhwc || n.domain != kGroveDomain) return false;
    if (runs_on_amx(n)) return true;
    if (n.decisions.precision != NodePrecision::bf16 || reads_x_nchw(n)) return false;
    const Shape& x = graph.values.at(n.inputs[0]).shape;
    const Tensor* w = initializer(graph, n, 1);
    return x.size() == 4 && x[3] % 2 == 0 && w && w->rank() == 4 &&
           size_t(w->dim(2) * w->dim(3)) <= kernels::kConvRowsMaxTaps;
  };
  std::map<std::string, bool> only_convs_read;  // value -> every reader is such a conv reading it as x
  for (const Node& n : graph.nodes)
    for (size_t i = 0; i < n.inputs.size(); ++i) {
      if (n.inputs[i].empty()) continue;
      const bool fits = bf16_conv(n) && i == 0;
      auto [it, fresh] = only_convs_read.emplace(n.inputs[i], fits);
      if (!fresh) it->second = it->second && fits;
    }
  for (const ValueDecl& out : graph.outputs) only_convs_read[out.name] = false;
  int stored = 0;
  for (Node& n : graph.nodes) {
    if (!bf16_conv(n) || n.outputs.size() != 1 || !is_f32(graph, n.outputs[0])) continue;
    auto read = only_convs_read.find(n.outputs[0]);
    if (read == only_convs_read.end() || !read->second) continue;
    n.decisions.output_bf16 = true;
    graph.values[n.outputs[0]].dtype = DType::bf16;
    ++stored;
  }
  report.bf16_values = stored;
  if (stored > 0)
    report.note += "; " + std::to_string(stored) + (stored == 1 ? " activation" : " activations") + " between them stored bf16";
}

}  // namespace grove
