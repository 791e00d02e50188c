#include "ops/conv_fused/expand_depthwise.h"

#include <cstring>
#include <vector>

#include "ops/evaluate.h"
#include "ops/op.h"
#include "ops/op_util.h"

namespace grove {

namespace {

bool prefixed(const std::string& key, const char* prefix) { return key.compare(0, std::strlen(prefix), prefix) == 0; }

std::string input(const Node& fused, size_t i) { return i < fused.inputs.size() ? fused.inputs[i] : ""; }

// The attributes under `prefix`, without it.
void copy_prefixed(const Node& fused, const char* prefix, Node& to) {
  for (const auto& [key, value] : fused.attrs)
    if (prefixed(key, prefix)) to.attrs[key.substr(std::strlen(prefix))] = value;
}

// A grove.internal node of `fused`'s opset.
Node part(const Node& fused, const char* op_type, const std::string& name) {
  Node n;
  n.op_type = op_type;
  n.domain = kGroveDomain;
  n.opset = fused.opset;
  n.name = name;
  return n;
}

}  // namespace

bool has_project(const Node& fused) { return fused.op_type == "InvertedResidualNhwc"; }

Node expand_part(const Node& fused, const std::string& mid) {
  Node e = part(fused, "ConvNhwc", fused.name + "/expand");
  e.inputs = {input(fused, 0), input(fused, 1), input(fused, 2)};
  e.outputs = {mid};
  copy_prefixed(fused, kExpandPrefix, e);
  // Each part runs with what was decided for it; the depthwise conv's are the node's own.
  if (fused.decisions.expand) static_cast<Decisions&>(e.decisions) = *fused.decisions.expand;
  return e;
}

Node depthwise_part(const Node& fused, const std::string& mid, const std::string& out) {
  Node d = part(fused, "DepthwiseConvNhwc", fused.name);
  d.inputs = {mid, input(fused, 3), input(fused, 4)};
  d.outputs = has_project(fused) ? std::vector<std::string>{out.empty() ? "depthwise" : out} : fused.outputs;
  for (const auto& [key, value] : fused.attrs)
    if (!prefixed(key, kExpandPrefix) && !prefixed(key, kProjectPrefix)) d.attrs[key] = value;
  static_cast<Decisions&>(d.decisions) = fused.decisions;
  return d;
}

Node project_part(const Node& fused, const std::string& in) {
  Node p = part(fused, "ConvNhwc", fused.name + "/project");
  p.inputs = {in, input(fused, kProjectWeightInput), input(fused, kProjectBiasInput)};
  if (!input(fused, kProjectResidualInput).empty()) p.inputs.push_back(input(fused, kProjectResidualInput));
  p.outputs = fused.outputs;
  copy_prefixed(fused, kProjectPrefix, p);
  if (fused.decisions.project) static_cast<Decisions&>(p.decisions) = *fused.decisions.project;
  return p;
}

namespace {

void expand_depthwise_check_inputs(const Node& node, size_t count) {
  if (has_project(node) && (count < 6 || count > 8))
    throw Error(node.describe() + ": takes x, We, Be, Wd, Bd, Wp, Bp and a residual");
  if (!has_project(node) && (count < 4 || count > 5)) throw Error(node.describe() + ": takes x, We, Be, Wd and Bd");
}

const ValueInfo kNone{DType::undefined, {}, nullptr, false};

void expand_depthwise_infer(const Node& node, std::span<const ValueInfo> in, std::span<ValueInfo> out) {
  expand_depthwise_check_inputs(node, in.size());
  auto at = [&](size_t i) { return i < in.size() ? in[i] : kNone; };
  std::vector<ValueInfo> e_in = {in[0], in[1], at(2)};
  const std::vector<ValueInfo> mid = infer_node(expand_part(node), e_in);
  std::vector<ValueInfo> d_in = {mid.at(0), in[3], at(4)};
  d_in[0].data = nullptr;
  std::vector<ValueInfo> d_out = infer_node(depthwise_part(node), d_in);
  if (!has_project(node)) {
    out[0] = d_out.at(0);
    return;
  }
  d_out[0].data = nullptr;
  std::vector<ValueInfo> p_in = {d_out[0], in[kProjectWeightInput], at(kProjectBiasInput)};
  if (at(kProjectResidualInput).present) p_in.push_back(in[kProjectResidualInput]);
  out[0] = infer_node(project_part(node), p_in).at(0);
}

void expand_depthwise_reference(const Node& node, std::span<const Tensor* const> in, std::span<Tensor* const> out) {
  expand_depthwise_check_inputs(node, in.size());
  auto at = [&](size_t i) { return i < in.size() ? in[i] : nullptr; };
  const std::vector<const Tensor*> e_in = {in[0], in[1], at(2)};
  const std::vector<Tensor> mid = evaluate_node(expand_part(node), e_in);
  const std::vector<const Tensor*> d_in = {&mid.at(0), in[3], at(4)};
  std::vector<Tensor> y = evaluate_node(depthwise_part(node), d_in);
  if (has_project(node)) {
    std::vector<const Tensor*> p_in = {&y.at(0), in[kProjectWeightInput], at(kProjectBiasInput)};
    if (at(kProjectResidualInput)) p_in.push_back(in[kProjectResidualInput]);
    y = evaluate_node(project_part(node), p_in);
  }
  if (y.at(0).shape() != out[0]->shape() || y[0].dtype() != out[0]->dtype())
    throw Error(node.describe() + ": output shape does not match");
  std::memcpy(out[0]->raw(), y[0].raw(), y[0].bytes());
}

}  // namespace

void register_expand_depthwise_op(OpRegistry& r) {
  // The depthwise taps; the expand conv's FLOPs are the fused epilogue's.
  r.add_internal("ExpandDepthwiseNhwc", {.infer = &expand_depthwise_infer,
                                         .reference = &expand_depthwise_reference,
                                         .flops = [](const Node&, std::span<const ValueInfo> in, std::span<const ValueInfo> out) { return conv_products(in, out, 3); },
                                         .traits = kChannelsLast});
  // The expand, depthwise and project convs' FLOPs are all the fused epilogue's.
  r.add_internal("InvertedResidualNhwc",
                 {.infer = &expand_depthwise_infer, .reference = &expand_depthwise_reference, .flops = [](const Node&, std::span<const ValueInfo>, std::span<const ValueInfo>) { return int64_t{0}; }, .traits = kChannelsLast});
}

}  // namespace grove
