// float16 and bfloat16 models computed in float32 (graph/passes.h: widen_float16). The
// importer already widens 16-bit float weights; this pass makes the activations follow:
// 16-bit float graph inputs are cast to float32 on entry, every Cast to float16 or bfloat16
// keeps its rounding but hands float32 on (Cast to the 16-bit type, then to float32), and
// 16-bit float graph outputs are cast back on exit. So values are rounded exactly where the
// model rounds them, intermediate results keep float32 precision, and inputs and outputs
// keep their declared dtype.
#include <string>
#include <vector>

#include "ops/op_names.h"
#include "passes/passes.h"

namespace grove {
namespace {

constexpr int64_t kOnnxFloat = 1, kOnnxFloat16 = 10, kOnnxBFloat16 = 16;

bool is_16bit_float(DType dtype) { return dtype == DType::f16 || dtype == DType::bf16; }

Node cast_node(const std::string& name, const std::string& from, const std::string& to, int64_t onnx_type, int opset) {
  Node n;
  n.name = name;
  n.op_type = kCast;
  n.opset = opset;
  n.inputs = {from};
  n.outputs = {to};
  Attribute a;
  a.kind = Attribute::Kind::i;
  a.i = onnx_type;
  n.attrs["to"] = a;
  return n;
}

void rename_uses(std::vector<Node>& nodes, const std::string& from, const std::string& to) {
  for (Node& n : nodes)
    for (std::string& in : n.inputs)
      if (in == from) in = to;
}

bool is_cast_to_half(const Node& n) {
  if (!n.domain.empty() || n.op_type != kCast || !n.has_attr("to")) return false;
  const int64_t to = n.attr_int("to", 0);
  return to == kOnnxFloat16 || to == kOnnxBFloat16;
}

}  // namespace

void widen_float16(Graph& g) {
  bool any = false;
  for (const auto& v : g.inputs) any |= is_16bit_float(v.dtype);
  for (const auto& v : g.outputs) any |= is_16bit_float(v.dtype);
  for (const auto& n : g.nodes) any |= is_cast_to_half(n);
  if (!any) return;
  const int opset = g.opsets.count("") ? g.opsets.at("") : 13;

  std::vector<Node> nodes;
  for (const auto& in : g.inputs) {
    if (!is_16bit_float(in.dtype) || in.kind != ValueKind::tensor) continue;
    const std::string wide = in.name + "__grove_f32";
    rename_uses(g.nodes, in.name, wide);
    nodes.push_back(cast_node(in.name + "__grove_widen", in.name, wide, kOnnxFloat, opset));
  }
  for (Node& n : g.nodes) {
    if (!is_cast_to_half(n)) {
      nodes.push_back(std::move(n));
      continue;
    }
    const std::string wide = n.outputs[0], half = wide + (n.attr_int("to", 0) == kOnnxFloat16 ? "__grove_f16" : "__grove_bf16");
    n.outputs[0] = half;
    const std::string name = n.name;
    nodes.push_back(std::move(n));
    nodes.push_back(cast_node(name + "__grove_widen", half, wide, kOnnxFloat, opset));
  }
  for (const auto& out : g.outputs) {
    if (!is_16bit_float(out.dtype) || out.kind != ValueKind::tensor) continue;
    const std::string wide = out.name + "__grove_f32";
    bool produced = false;
    for (Node& n : nodes)
      for (std::string& o : n.outputs)
        if (o == out.name) o = wide, produced = true;
    if (!produced) continue;  // a graph input or initializer passed straight through
    rename_uses(nodes, out.name, wide);
    nodes.push_back(cast_node(out.name + "__grove_narrow", wide, out.name,
                              out.dtype == DType::f16 ? kOnnxFloat16 : kOnnxBFloat16, opset));
  }
  g.nodes = std::move(nodes);
}

}  // namespace grove
