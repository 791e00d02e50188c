#include "passes/flops.h"

#include <vector>

#include "graph/node_decisions.h"
#include "ops/op.h"
#include "ops/op_util.h"

namespace grove {
namespace {

// The node's values as its spec's formula reads them: present=false where the node omits
// one or the graph has no shape for it.
std::vector<ValueInfo> infos_of(const Graph& g, const std::vector<std::string>& names) {
  std::vector<ValueInfo> infos(names.size());
  for (size_t i = 0; i < names.size(); ++i) {
    auto it = names[i].empty() ? g.values.end() : g.values.find(names[i]);
    if (it == g.values.end()) infos[i].present = false;
    else infos[i] = it->second;
  }
  return infos;
}

}  // namespace

int64_t node_flops(const Graph& g, const Node& n) {
  const OpSpec* spec = OpRegistry::builtin().find(n);
  if (!spec || n.outputs.empty()) return 0;
  const std::vector<ValueInfo> in = infos_of(g, n.inputs), out = infos_of(g, n.outputs);
  int64_t own = 0;
  if (spec->flops) {
    own = spec->flops(n, in, out);
  } else if (spec->cost == OpCost::per_input_element) {
    const Shape* x = known_shape(in, 0);
    own = x ? numel(*x) : 0;
  } else if (spec->cost == OpCost::per_output_element) {
    const Shape* y = known_shape(out, 0);
    own = y ? numel(*y) : 0;
  }
  return checked_add(own, n.decisions.epilogue.fused_flops);
}

int64_t graph_flops(const Graph& g) {
  int64_t total = 0;
  for (const auto& n : g.nodes) total = checked_add(total, node_flops(g, n));
  return total;
}

}  // namespace grove
