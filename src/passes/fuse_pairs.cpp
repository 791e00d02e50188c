#include "passes/fuse_pairs.h"

#include <map>
#include <vector>

namespace grove {

int fuse_pairs(Graph& g, const std::set<std::string>& keep,
               const std::function<std::optional<Node>(const Node& producer, const Node& reader)>& join) {
  std::map<std::string, int> readers;
  for (const Node& n : g.nodes)
    for (const std::string& in : n.inputs)
      if (!in.empty()) ++readers[in];
  for (const ValueDecl& out : g.outputs) ++readers[out.name];
  std::map<std::string, size_t> producer;
  for (size_t i = 0; i < g.nodes.size(); ++i)
    for (const std::string& out : g.nodes[i].outputs) producer[out] = i;
  std::vector<bool> removed(g.nodes.size(), false);
  int fused = 0;
  for (Node& r : g.nodes) {
    if (r.inputs.empty() || keep.count(r.name)) continue;
    const std::string mid = r.inputs[0];
    auto p = producer.find(mid);
    if (p == producer.end() || readers[mid] != 1 || removed[p->second] || keep.count(g.nodes[p->second].name)) continue;
    auto v = g.values.find(mid);
    if (v == g.values.end() || v->second.dtype != DType::f32) continue;
    std::optional<Node> f = join(g.nodes[p->second], r);
    if (!f) continue;
    r = std::move(*f);
    removed[p->second] = true;
    g.values.erase(v);
    ++fused;
  }
  std::vector<Node> kept;
  kept.reserve(g.nodes.size());
  for (size_t i = 0; i < g.nodes.size(); ++i)
    if (!removed[i]) kept.push_back(std::move(g.nodes[i]));
  g.nodes = std::move(kept);
  return fused;
}

}  // namespace grove
