// Float convolutions to the channel-blocked layout: each Conv a choice runs "nchwc"
// (graph/node_decisions.h, from a tuning record or the performance model) becomes grove.internal
// ConvNchwc, reading a blocked copy of x (and of a fused residual) and writing a blocked y,
// with a reorder back to NCHW for every other reader. A reorder is a Reshape, which the plan
// makes a view, and one tiled Transpose, so a layout change is an edge of the tile graph, not
// a barrier. It runs after the channels-last pass: an x that is the Transpose of a
// channels-last value is blocked straight from that value, and a reader's channels-last copy
// of y is made straight from the blocked y, one Transpose of b-float runs each way instead of
// two through NCHW. A conv whose inputs already have a blocked copy reads it, so a chain of
// such convs (a ResNet's blocks, their residual Adds and Relus fused in) stays blocked from
// its first conv to its last; the reorders no one reads are removed as dead.
#include <map>

#include "graph/node_decisions.h"
#include "ops/conv/channels_blocked.h"
#include "ops/op.h"
#include "ops/op_names.h"
#include "passes/graph_lookup.h"
#include "passes/layout_nodes.h"
#include "passes/passes.h"

namespace grove {
namespace {

Node reshape_node(Graph& g, const std::string& name, const std::string& from, const std::string& to, const Shape& shape) {
  const std::string shape_name = name + "/shape";
  const Tensor& t = g.initializers[shape_name] =
      Tensor::from<int64_t>({int64_t(shape.size())}, std::vector<int64_t>(shape.begin(), shape.end()));
  g.values[shape_name] = ValueInfo{t.dtype(), t.shape(), &t, true};
  Node r;
  r.name = name;
  r.op_type = kReshape;
  r.opset = 14;
  r.inputs = {from, shape_name};
  r.outputs = {to};
  return r;
}

bool is_transpose(const Node& n, const std::vector<int64_t>& perm) {
  return n.op_type == kTranspose && n.domain.empty() && n.inputs.size() == 1 && n.outputs.size() == 1 &&
         n.attr_ints("perm", {}) == perm;
}

}  // namespace

bool can_run_nchwc(const Graph& g, const Node& n, int64_t block) {
  if (n.op_type != kConv || !n.domain.empty() || n.inputs.size() < 2 || n.outputs.size() != 1) return false;
  const ValueInfo *x = info(g, n.inputs[0]), *y = info(g, n.outputs[0]);
  auto w = g.initializers.find(n.inputs[1]);
  if (!f32_4d(x) || !f32_4d(y) || w == g.initializers.end() || w->second.dtype() != DType::f32) return false;
  if (n.inputs.size() > 2 && !n.inputs[2].empty() && !info(g, n.inputs[2])) return false;
  if (n.inputs.size() > kEpilogueResidualInput && !n.inputs[kEpilogueResidualInput].empty() &&
      !f32_4d(info(g, n.inputs[kEpilogueResidualInput])))
    return false;
  return conv_fits_nchwc(n, x->shape, w->second.shape(), block);
}

int to_blocked_f32(Graph& g, int64_t block) {
  std::map<std::string, std::string> blocked;  // NCHW value -> its blocked copy
  std::vector<Node> out;
  int converted = 0;
  std::map<std::string, std::string> nhwc_source;  // NCHW value -> the channels-last value it is the Transpose of
  for (const Node& n : g.nodes)
    if (is_transpose(n, {0, 3, 1, 2}) && f32_4d(info(g, n.inputs[0]))) nhwc_source[n.outputs[0]] = n.inputs[0];
  auto blocked_copy = [&](const std::string& value) {
    auto it = blocked.find(value);
    if (it != blocked.end()) return it->second;
    const ValueInfo v = g.values.at(value);
    const Shape& s = v.shape;
    const std::string split = value + "/nchwc_split", name = value + "/nchwc";
    g.values[name] = ValueInfo{v.dtype, blocked_shape(s, block), nullptr, true};
    if (auto nhwc = nhwc_source.find(value); nhwc != nhwc_source.end()) {  // [N, H, W, C / b, b] -> blocked
      g.values[split] = ValueInfo{v.dtype, {s[0], s[2], s[3], s[1] / block, block}, nullptr, true};
      out.push_back(reshape_node(g, split + "/Reshape", nhwc->second, split, g.values[split].shape));
      out.push_back(transpose_node(name + "/Transpose", split, name, {0, 3, 1, 2, 4}));
    } else {  // [N, C / b, b, H, W] -> blocked
      g.values[split] = ValueInfo{v.dtype, {s[0], s[1] / block, block, s[2], s[3]}, nullptr, true};
      out.push_back(reshape_node(g, split + "/Reshape", value, split, g.values[split].shape));
      out.push_back(transpose_node(name + "/Transpose", split, name, {0, 1, 3, 4, 2}));
    }
    blocked[value] = name;
    return name;
  };
  for (const Node& n : g.nodes) {
    // A channels-last copy of a blocked conv's y: straight from the blocked y.
    if (is_transpose(n, {0, 2, 3, 1}) && blocked.count(n.inputs[0]) && f32_4d(info(g, n.outputs[0]))) {
      const std::string& z = n.outputs[0];
      const ValueInfo v = g.values.at(z);
      const Shape& s = v.shape;  // [N, H, W, M]
      const std::string split = z + "/nchwc_split";
      g.values[split] = ValueInfo{v.dtype, {s[0], s[1], s[2], s[3] / block, block}, nullptr, true};
      out.push_back(transpose_node(split + "/Transpose", blocked.at(n.inputs[0]), split, {0, 2, 3, 1, 4}));
      out.push_back(reshape_node(g, split + "/Reshape", split, z, s));
      continue;
    }
    if (conv_primitive_choice(n) != ConvPrimitive::nchwc || n.op_type != kConv || !n.domain.empty()) {
      out.push_back(n);
      continue;
    }
    if (!can_run_nchwc(g, n, block))
      throw Error(n.describe() + ": the channel-blocked conv cannot run it (float32, 2-D, one group or depthwise, no dilation, "
                  "both channel counts multiples of " + std::to_string(block) + ", constant weights)");
    Node c = n;
    c.op_type = kConvNchwc;
    c.domain = kGroveDomain;
    c.inputs[0] = blocked_copy(n.inputs[0]);
    if (c.inputs.size() > kEpilogueResidualInput && !c.inputs[kEpilogueResidualInput].empty())
      c.inputs[kEpilogueResidualInput] = blocked_copy(n.inputs[kEpilogueResidualInput]);
    const std::string& y = n.outputs[0];
    const ValueInfo v = g.values.at(y);
    const Shape& s = v.shape;
    const std::string name = y + "/nchwc", split = y + "/nchwc_split";
    g.values[name] = ValueInfo{v.dtype, blocked_shape(s, block), nullptr, true};
    g.values[split] = ValueInfo{v.dtype, {s[0], s[1] / block, block, s[2], s[3]}, nullptr, true};
    c.outputs[0] = name;
    out.push_back(std::move(c));
    out.push_back(transpose_node(name + "/Transpose", name, split, {0, 1, 4, 2, 3}));
    out.push_back(reshape_node(g, split + "/Reshape", split, y, s));
    blocked[y] = name;
    ++converted;
  }
  g.nodes = std::move(out);
  remove_dead_nodes(g);  // the reorders back that nothing reads
  return converted;
}

}  // namespace grove
