#include "ops/expand_depthwise.h"

#include <cstring>
#include <vector>

#include "ops/evaluate.h"
#include "ops/op.h"

namespace grove {

Node expand_part(const Node& fused, const std::string& mid) {
  Node e;
  e.op_type = "ConvNhwc";
  e.domain = kGroveDomain;
  e.opset = fused.opset;
  e.name = fused.name + "/expand";
  e.inputs = {fused.inputs.size() > 0 ? fused.inputs[0] : "", fused.inputs.size() > 1 ? fused.inputs[1] : "",
              fused.inputs.size() > 2 ? fused.inputs[2] : ""};
  e.outputs = {mid};
  const size_t prefix = std::strlen(kExpandPrefix);
  for (const auto& [key, value] : fused.attrs)
    if (key.compare(0, prefix, kExpandPrefix) == 0) e.attrs[key.substr(prefix)] = value;
  return e;
}

Node depthwise_part(const Node& fused, const std::string& mid) {
  Node d;
  d.op_type = "DepthwiseConvNhwc";
  d.domain = kGroveDomain;
  d.opset = fused.opset;
  d.name = fused.name;
  d.inputs = {mid, fused.inputs.size() > 3 ? fused.inputs[3] : "", fused.inputs.size() > 4 ? fused.inputs[4] : ""};
  d.outputs = fused.outputs;
  for (const auto& [key, value] : fused.attrs)
    if (key.compare(0, std::strlen(kExpandPrefix), kExpandPrefix) != 0) d.attrs[key] = value;
  return d;
}

namespace {

void check_inputs(const Node& node, size_t count) {
  if (count < 4 || count > 5) throw Error(node.describe() + ": takes x, We, Be, Wd and Bd");
}

void infer(const Node& node, std::span<const ValueInfo> in, std::span<ValueInfo> out) {
  check_inputs(node, in.size());
  const ValueInfo none{DType::undefined, {}, nullptr, false};
  std::vector<ValueInfo> e_in = {in[0], in[1], in.size() > 2 ? in[2] : none};
  const std::vector<ValueInfo> mid = infer_node(expand_part(node), e_in);
  std::vector<ValueInfo> d_in = {mid.at(0), in[3], in.size() > 4 ? in[4] : none};
  d_in[0].data = nullptr;
  out[0] = infer_node(depthwise_part(node), d_in).at(0);
}

void reference(const Node& node, std::span<const Tensor* const> in, std::span<Tensor* const> out) {
  check_inputs(node, in.size());
  const std::vector<const Tensor*> e_in = {in[0], in[1], in.size() > 2 ? in[2] : nullptr};
  const std::vector<Tensor> mid = evaluate_node(expand_part(node), e_in);
  const std::vector<const Tensor*> d_in = {&mid.at(0), in[3], in.size() > 4 ? in[4] : nullptr};
  const std::vector<Tensor> y = evaluate_node(depthwise_part(node), d_in);
  if (y.at(0).shape() != out[0]->shape() || y[0].dtype() != out[0]->dtype())
    throw Error(node.describe() + ": output shape does not match");
  std::memcpy(out[0]->raw(), y[0].raw(), y[0].bytes());
}

}  // namespace

void register_expand_depthwise_op(OpRegistry& r) { r.add_internal("ExpandDepthwiseNhwc", OpDef{&infer, &reference}); }

}  // namespace grove
