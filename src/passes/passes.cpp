#include "passes/passes.h"

#include <set>

#include "ops/op_names.h"

namespace grove {

namespace {
bool forwards_input(const Graph& g, const Node& n) {
  if (!n.domain.empty() || n.inputs.empty() || n.inputs[0].empty()) return false;
  if (n.op_type == kIdentity) return true;
  // A Cast to the dtype it already has (exporters write them around ops they type-promote).
  if (n.op_type == kCast && !n.outputs.empty()) {
    auto in = g.values.find(n.inputs[0]), out = g.values.find(n.outputs[0]);
    return in != g.values.end() && out != g.values.end() && in->second.dtype == out->second.dtype &&
           in->second.dtype != DType::undefined;
  }
  // Dropout is the identity at inference unless training_mode is given and true.
  if (n.op_type == kDropout) return n.inputs.size() < 3 || n.inputs[2].empty();
  return false;
}
}  // namespace

void remove_identities(Graph& g) {
  std::set<std::string> graph_outputs;
  for (const auto& o : g.outputs) graph_outputs.insert(o.name);
  std::map<std::string, std::string> alias;  // removed output -> the value it forwards
  auto resolve = [&](const std::string& name) {
    auto it = alias.find(name);
    return it == alias.end() ? name : it->second;
  };
  std::vector<Node> kept;
  for (auto& n : g.nodes) {
    for (auto& in : n.inputs) in = resolve(in);
    bool extra_outputs_used = false;  // Dropout's mask output
    for (size_t i = 1; i < n.outputs.size(); ++i) extra_outputs_used |= !n.outputs[i].empty();
    // A graph output keeps its name, so its Identity stays.
    if (forwards_input(g, n) && !extra_outputs_used && !graph_outputs.count(n.outputs[0])) {
      alias[n.outputs[0]] = n.inputs[0];
      continue;
    }
    kept.push_back(std::move(n));
  }
  g.nodes = std::move(kept);
}

void remove_dead_nodes(Graph& g) {
  std::set<std::string> needed;
  for (const auto& o : g.outputs) needed.insert(o.name);
  std::vector<bool> keep(g.nodes.size(), false);
  for (size_t i = g.nodes.size(); i-- > 0;) {
    const Node& n = g.nodes[i];
    for (const auto& o : n.outputs) keep[i] = keep[i] || needed.count(o);
    if (keep[i])
      for (const auto& in : n.inputs) needed.insert(in);
  }
  std::vector<Node> kept;
  for (size_t i = 0; i < g.nodes.size(); ++i)
    if (keep[i]) kept.push_back(std::move(g.nodes[i]));
  g.nodes = std::move(kept);
  // Initializers only dead nodes read are dropped too (folded shape chains leave many).
  for (auto it = g.initializers.begin(); it != g.initializers.end();) {
    if (!needed.count(it->first)) {
      g.values.erase(it->first);
      it = g.initializers.erase(it);
    } else {
      ++it;
    }
  }
}

void optimize(Graph& g) {
  rewrite_constant_pow(g);  // first: its Identity goes, its Mul(x, x) is what later passes match
  remove_identities(g);
  fuse_qdq(g);  // before fuse_epilogues takes the Relu into the float Conv
  to_channels_last_int8(g);
  fold_batchnorm_into_conv(g);
  fuse_layernorm(g);
  fuse_attention(g);
  fuse_epilogues(g);
  split_grouped_convs(g);  // after the epilogues: each group's conv keeps its conv's bias and activation
  remove_dead_nodes(g);
}

}  // namespace grove
