#include "tune/layout_links.h"

#include <algorithm>
#include <functional>
#include <map>
#include <set>

#include "graph/node_decisions.h"
#include "ops/op_names.h"
#include "passes/passes.h"

namespace grove::tune {
namespace {

// Ops the channels-last pass runs in whichever layout their inputs come in.
bool follows_layout(const Node& n) {
  return n.domain.empty() && (n.op_type == kAdd || n.op_type == kConcat || n.op_type == kMaxPool);
}

// Deep enough for a pool after a Concat after an Add; past that a link is too far away to
// be one Transpose.
constexpr int kMaxFollowDepth = 4;

int64_t elements(const Graph& g, const std::string& value) {
  auto v = g.values.find(value);
  if (v == g.values.end()) return 0;
  int64_t n = 1;
  for (int64_t d : v->second.shape) n *= std::max<int64_t>(d, 0);
  return n;
}

Shape shape_of(const Graph& g, const std::string& value) {
  auto v = g.values.find(value);
  return v == g.values.end() ? Shape{} : v->second.shape;
}

}  // namespace

LayoutLinks layout_links(const Plan& plan, const std::vector<bool>& is_conv) {
  const Graph& g = plan.graph;
  std::map<std::string, size_t> producer;
  std::map<std::string, std::vector<size_t>> readers;
  for (size_t i = 0; i < g.nodes.size(); ++i) {
    for (const std::string& o : g.nodes[i].outputs) producer[o] = i;
    for (const std::string& in : g.nodes[i].inputs)
      if (!in.empty()) readers[in].push_back(i);
  }
  std::set<std::string> graph_outputs;
  for (const auto& o : g.outputs) graph_outputs.insert(o.name);

  // The convs that write `value`, through followers (true: straight, with no follower between);
  // `nchw` when an NCHW producer is met.
  std::function<void(const std::string&, int, std::map<size_t, bool>&, bool&)> sources =
      [&](const std::string& value, int depth, std::map<size_t, bool>& convs, bool& nchw) {
        auto p = producer.find(value);
        if (p == producer.end()) {  // a graph input (initializers are not activations)
          if (!g.initializers.count(value)) nchw = true;
          return;
        }
        const Node& n = g.nodes[p->second];
        if (is_conv[p->second]) convs.emplace(p->second, true).first->second &= depth == 0;
        else if (follows_layout(n) && depth < kMaxFollowDepth)
          for (size_t i = 0; i < (n.op_type == kMaxPool ? 1 : n.inputs.size()); ++i) {
            if (!n.inputs[i].empty()) sources(n.inputs[i], depth + 1, convs, nchw);
          }
        else nchw = true;
      };
  // Whether something that needs NCHW reads `value`, through followers.
  std::function<bool(const std::string&, int)> nchw_reader = [&](const std::string& value, int depth) {
    if (graph_outputs.count(value)) return true;
    auto r = readers.find(value);
    if (r == readers.end()) return false;
    for (size_t i : r->second) {
      const Node& n = g.nodes[i];
      if (is_conv[i] || (n.domain.empty() && n.op_type == kGlobalAveragePool)) continue;
      if (!follows_layout(n) || depth >= kMaxFollowDepth) return true;
      for (const std::string& o : n.outputs)
        if (!o.empty() && nchw_reader(o, depth + 1)) return true;
    }
    return false;
  };

  LayoutLinks out;
  struct Pair {
    int64_t elements = 0;
    Shape shape;
    bool straight = true;
  };
  std::map<std::pair<size_t, size_t>, Pair> pairs;
  for (size_t c = 0; c < g.nodes.size(); ++c) {
    if (c >= is_conv.size() || !is_conv[c]) continue;
    const Node& n = g.nodes[c];
    LayoutBoundary boundary{c, 0, {}, {}};
    std::vector<std::string> read = {n.inputs[0]};
    if (n.inputs.size() > kEpilogueResidualInput && !n.inputs[kEpilogueResidualInput].empty())
      read.push_back(n.inputs[kEpilogueResidualInput]);
    for (size_t i = 0; i < read.size(); ++i) {
      std::map<size_t, bool> convs;
      bool nchw = false;
      sources(read[i], 0, convs, nchw);
      const int64_t size = elements(g, read[i]);
      for (const auto& [p, straight] : convs) {
        auto [it, fresh] = pairs.try_emplace({p, c}, Pair{size, shape_of(g, read[i]), straight});
        if (size > it->second.elements) it->second.elements = size, it->second.shape = shape_of(g, read[i]);
        it->second.straight = it->second.straight && straight;
      }
      if (nchw && !(i == 0 && is_few_channel_stem(g, n))) {
        boundary.elements += size;
        boundary.into.push_back(shape_of(g, read[i]));
      }
    }
    if (!n.outputs.empty() && nchw_reader(n.outputs[0], 0)) {
      boundary.elements += elements(g, n.outputs[0]);
      boundary.out_of.push_back(shape_of(g, n.outputs[0]));
    }
    if (boundary.elements > 0) out.boundaries.push_back(std::move(boundary));
  }
  for (const auto& [pc, e] : pairs)
    if (pc.first != pc.second) out.links.push_back({pc.first, pc.second, e.elements, e.shape, e.straight});
  return out;
}

}  // namespace grove::tune
