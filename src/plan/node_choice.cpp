#include "plan/node_choice.h"

#include <map>

#include "graph/node_decisions.h"
#include "kernels/conv_nchwc.h"
#include "ops/op_names.h"
#include "ops/conv/tile_conv_winograd.h"
#include "passes/passes.h"

namespace grove {

void apply_primitive_choices(Graph& graph, const std::vector<NodeChoice>& choices, DecisionSource source) {
  if (choices.empty()) return;
  std::map<std::string, size_t> index;
  for (size_t n = 0; n < graph.nodes.size(); ++n) index.emplace(graph.nodes[n].name, n);
  std::map<std::string, int> seen;
  for (const NodeChoice& c : choices) {
    auto it = index.find(c.node);
    if (it == index.end()) throw Error("plan: a choice names node '" + c.node + "', which the model does not have");
    if (seen[c.node]++) throw Error("plan: node '" + c.node + "' has two choices");
    if (c.primitive.empty()) continue;
    Node& node = graph.nodes[it->second];
    if (node.op_type != kConv || !node.domain.empty() || node.inputs.size() < 2)
      throw Error(node.describe() + ": a primitive choice ('" + c.primitive + "') is for Conv nodes only");
    const ConvPrimitive primitive = primitive_named(node, c.primitive);
    if (primitive == ConvPrimitive::winograd) {
      auto x = graph.values.find(node.inputs[0]), w = graph.values.find(node.inputs[1]);
      if (x == graph.values.end() || w == graph.values.end() ||
          !tiling::conv_node_fits_winograd(node, x->second.shape, w->second.shape))
        throw Error(node.describe() + ": Winograd cannot run this conv (3x3, stride 1, one group only)");
    } else if (primitive == ConvPrimitive::direct) {
      auto x = graph.values.find(node.inputs[0]), w = graph.values.find(node.inputs[1]);
      if (x == graph.values.end() || w == graph.values.end() ||
          !tiling::conv_node_fits_direct(node, x->second.shape, w->second.shape))
        throw Error(node.describe() + ": the direct kernel cannot run this conv (2-D, one group, no dilation, kernel width up to 16)");
    } else if (channels_last_choice(primitive)) {
      if (!can_run_channels_last(graph, node))
        throw Error(node.describe() + ": channels-last runs float 2-D convs of one group, or depthwise, with constant weights only");
      auto x = graph.values.find(node.inputs[0]), w = graph.values.find(node.inputs[1]);
      if (primitive != ConvPrimitive::nhwc && (x == graph.values.end() || w == graph.values.end() ||
                                             node.attr_int("group", 1) != 1 ||
                                             !tiling::conv_node_fits_winograd(node, x->second.shape, w->second.shape)))
        throw Error(node.describe() + ": Winograd cannot run this conv (3x3, stride 1, one group only)");
    } else if (primitive == ConvPrimitive::nchwc) {
      const int64_t block = int64_t(kernels::conv_nchwc_block(kernels::active_isa()));
      if (!can_run_nchwc(graph, node, block))
        throw Error(node.describe() + ": the channel-blocked conv cannot run it (float32, 2-D, one group or depthwise, no dilation, "
                    "both channel counts multiples of " + std::to_string(block) + ", constant weights)");
    }
    apply_primitive_choices_to_node(node, primitive, source);
  }
}

void apply_primitive_choices_to_node(Node& node, ConvPrimitive primitive, DecisionSource source) {
  node.decisions.conv = primitive;
  node.decisions.conv_source = source;
}

ConvPrimitive primitive_named(const Node& node, const std::string& name) {
  const std::optional<ConvPrimitive> p = parse_conv_primitive(name);
  if (!p)
    throw Error(node.describe() + ": unknown conv primitive '" + name +
                "' (gemm, winograd, direct, nhwc, nchwc, winograd_nhwc or winograd_f2x3_nhwc)");
  return *p;
}

Shape fit_choice_extent(const Node& node, const Shape& out_shape, const std::vector<int64_t>& blocks,
                         const Shape& extent) {
  auto bad = [&](const std::string& why) { return Error(node.describe() + ": the chosen tile extent " + shape_str(extent) + " " + why); };
  if (extent.size() != out_shape.size()) throw bad("has the wrong rank for output " + shape_str(out_shape));
  Shape fitted = out_shape;
  for (size_t d = 0; d < extent.size(); ++d) {
    if (extent[d] < 0) throw bad("is negative");
    if (extent[d] == 0 || extent[d] >= out_shape[d]) continue;  // uncut
    fitted[d] = extent[d];
    if (blocks[d] == 0) throw bad("cuts dim " + std::to_string(d) + ", which this op's tiles may not cut");
    if (extent[d] % blocks[d] != 0)
      throw bad("cuts dim " + std::to_string(d) + " off its blocks of " + std::to_string(blocks[d]));
  }
  return fitted;
}

}  // namespace grove
