// Inverted residual blocks (MobileNetV2): a 1x1 conv expands the channels six times, a 3x3
// depthwise conv reads that and nothing else does. Run apart, the expanded tensor (4.8 MB at
// MobileNetV2's first block) is written to memory and read back; fused into one
// grove.internal ExpandDepthwiseNhwc (ops/conv_fused/expand_depthwise.h), a tile computes it band by band
// in cache. A network's stem (a 3x3 stride-2 conv, then a depthwise conv: MobileNetV2's
// features.0 and .1) fuses the same way where the stem runs on the row path. Only
// channels-last float convs with constant weights and nothing the fused rule does not do: the
// expand conv 1x1 without stride or padding or on the row path, no residual on either, no bf16.
#include "graph/node_decisions.h"
#include "kernels/conv_rows.h"
#include "kernels/cpu_info.h"
#include "kernels/isa.h"
#include "ops/conv/channels_last.h"
#include "ops/conv_fused/expand_depthwise.h"
#include "ops/op.h"
#include "ops/op_names.h"
#include "passes/flops.h"
#include "passes/fuse_pairs.h"
#include "passes/passes.h"

namespace grove {
namespace {

bool plain(const Node& n) {
  return n.domain == kGroveDomain && n.outputs.size() == 1 && n.inputs.size() >= 2 && n.inputs.size() <= 3 &&
         !runs_in_bf16(n) && !stores_bf16(n) && conv_primitive_choice(n) == ConvPrimitive::unset;
}

// A float ConvNhwc with constant weights, one group.
bool float_conv(const Graph& g, const Node& e) {
  if (e.op_type != kConvNhwc || !plain(e) || !g.initializers.count(e.inputs[1])) return false;
  const Tensor& w = g.initializers.at(e.inputs[1]);
  return w.rank() == 4 && w.dtype() == DType::f32 && e.attr_int("group", 1) == 1;
}

// The fused rule computes any other expand conv on the row kernel only.
bool is_row_expand(const Graph& g, const Node& e) {
  return float_conv(g, e) && kernels::conv_row_supported(kernels::active_isa(), kernels::Precision::f32);
}

// A float conv whose output pixel p is its input pixel p: 1x1, no stride or padding, x
// channels-last.
bool is_pointwise(const Graph& g, const Node& c) {
  if (!float_conv(g, c) || reads_x_nchw(c)) return false;
  const Tensor& w = g.initializers.at(c.inputs[1]);
  if (w.dim(2) != 1 || w.dim(3) != 1) return false;
  for (const char* a : {"strides", "dilations"})
    for (int64_t v : c.attr_ints(a, {1, 1}))
      if (v != 1) return false;
  for (int64_t p : c.attr_ints("pads", {0, 0, 0, 0}))
    if (p != 0) return false;
  return c.attr_string("auto_pad", "NOTSET") == "NOTSET" || c.attr_string("auto_pad", "") == "VALID";
}

}  // namespace

int fuse_expand_depthwise(Graph& g, const std::set<std::string>& keep) {
  return fuse_pairs(g, keep, [&](const Node& e, const Node& d) -> std::optional<Node> {
    if (d.op_type != kDepthwiseConvNhwc || !plain(d) || reads_x_nchw(d) || d.inputs.size() < 2 ||
        !g.initializers.count(d.inputs[1]) || !(is_pointwise(g, e) || is_row_expand(g, e)))
      return std::nullopt;
    Node f = d;
    f.op_type = kExpandDepthwiseNhwc;
    f.inputs = {e.inputs[0], e.inputs[1], e.inputs.size() > 2 ? e.inputs[2] : "", d.inputs[1],
                d.inputs.size() > 2 ? d.inputs[2] : ""};
    for (const auto& [key, value] : e.attrs) f.attrs[kExpandPrefix + key] = value;
    f.decisions.expand = as_part(e.decisions);
    f.decisions.epilogue.fused_flops = d.decisions.epilogue.fused_flops + node_flops(g, e);
    return f;
  });
}


namespace {

// The project conv of an inverted residual block: pointwise; a residual (input 3) is its own.
bool is_project(const Graph& g, const Node& r) {
  Node plain_part = r;
  if (r.inputs.size() == 4) plain_part.inputs.pop_back();
  return is_pointwise(g, plain_part);
}

// Whether an image's depthwise output would leave cache between the two nodes: more than half
// of L2. Smaller ones stay apart, where the project conv can also cut its output channels.
bool outgrows_l2(const Graph& g, const std::string& value) {
  auto it = g.values.find(value);
  if (it == g.values.end() || it->second.shape.size() != 4) return false;
  const Shape& s = it->second.shape;
  const int64_t l2 = kernels::cpu_info().l2_bytes > 0 ? kernels::cpu_info().l2_bytes : int64_t{1} << 20;
  return s[1] * s[2] * s[3] * int64_t(sizeof(float)) > l2 / 2;
}

}  // namespace

int fuse_depthwise_project(Graph& g, const std::set<std::string>& keep) {
  return fuse_pairs(g, keep, [&](const Node& d, const Node& r) -> std::optional<Node> {
    if (d.op_type != kExpandDepthwiseNhwc || d.domain != kGroveDomain || !is_project(g, r) || !outgrows_l2(g, d.outputs[0]))
      return std::nullopt;
    Node f = d;
    f.op_type = kInvertedResidualNhwc;
    f.outputs = r.outputs;
    f.inputs.resize(kProjectWeightInput, "");
    f.inputs.push_back(r.inputs[1]);
    f.inputs.push_back(r.inputs.size() > 2 ? r.inputs[2] : "");
    if (r.inputs.size() > 3 && !r.inputs[3].empty()) f.inputs.push_back(r.inputs[3]);
    for (const auto& [key, value] : r.attrs) f.attrs[kProjectPrefix + key] = value;
    f.decisions.project = as_part(r.decisions);
    f.decisions.epilogue.fused_flops = node_flops(g, d) + node_flops(g, r);
    return f;
  });
}

}  // namespace grove
