// Inverted residual blocks (MobileNetV2): a 1x1 conv expands the channels six times, a 3x3
// depthwise conv reads that and nothing else does. Run apart, the expanded tensor (4.8 MB at
// MobileNetV2's first block) is written to memory and read back; fused into one
// grove.internal ExpandDepthwiseNhwc (ops/expand_depthwise.h), a tile computes it band by band
// in cache. Only channels-last float convs with constant weights and nothing the fused rule
// does not do: the expand conv 1x1 without stride or padding, no residual on either, no bf16.
#include "graph/choice_attrs.h"
#include "graph/epilogue_attrs.h"
#include "graph/precision_attr.h"
#include "ops/channels_last.h"
#include "ops/expand_depthwise.h"
#include "ops/op.h"
#include "passes/flops.h"
#include "passes/fuse_pairs.h"
#include "passes/passes.h"

namespace grove {
namespace {

bool plain(const Node& n) {
  return n.domain == kGroveDomain && n.outputs.size() == 1 && n.inputs.size() >= 2 && n.inputs.size() <= 3 &&
         !runs_in_bf16(n) && !stores_bf16(n) && conv_primitive_choice(n).empty() && !reads_x_nchw(n);
}

bool is_pointwise_expand(const Graph& g, const Node& e) {
  if (e.op_type != "ConvNhwc" || !plain(e) || !g.initializers.count(e.inputs[1])) return false;
  const Tensor& w = g.initializers.at(e.inputs[1]);
  if (w.rank() != 4 || w.dim(2) != 1 || w.dim(3) != 1 || w.dtype() != DType::f32 || e.attr_int("group", 1) != 1)
    return false;
  for (const char* a : {"strides", "dilations"})
    for (int64_t v : e.attr_ints(a, {1, 1}))
      if (v != 1) return false;
  for (int64_t p : e.attr_ints("pads", {0, 0, 0, 0}))
    if (p != 0) return false;
  return e.attr_string("auto_pad", "NOTSET") == "NOTSET" || e.attr_string("auto_pad", "") == "VALID";
}

}  // namespace

int fuse_expand_depthwise(Graph& g, const std::set<std::string>& keep) {
  return fuse_pairs(g, keep, [&](const Node& e, const Node& d) -> std::optional<Node> {
    if (d.op_type != "DepthwiseConvNhwc" || !plain(d) || d.inputs.size() < 2 || !g.initializers.count(d.inputs[1]) ||
        !is_pointwise_expand(g, e))
      return std::nullopt;
    Node f = d;
    f.op_type = "ExpandDepthwiseNhwc";
    f.inputs = {e.inputs[0], e.inputs[1], e.inputs.size() > 2 ? e.inputs[2] : "", d.inputs[1],
                d.inputs.size() > 2 ? d.inputs[2] : ""};
    for (const auto& [key, value] : e.attrs) f.attrs[kExpandPrefix + key] = value;
    Attribute& flops = f.attrs[kAttrFusedFlops];
    flops.kind = Attribute::Kind::i;
    flops.i = d.attr_int(kAttrFusedFlops, 0) + node_flops(g, e);
    return f;
  });
}

}  // namespace grove
