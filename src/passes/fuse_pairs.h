#pragma once
// The walk two fusions share (fuse_expand_depthwise.cpp, fuse_conv_max_pool.cpp): a node whose
// first input is a float32 value that only it reads, joined with that value's producer into one
// node.
#include <functional>
#include <optional>
#include <set>
#include <string>

#include "graph/graph.h"

namespace grove {

// For each node r (in order) whose first input is a float32 value only r reads, made by a node p
// that neither `keep` names nor an earlier fusion took: `join(p, r)` returns the fused node, or
// nothing to leave the two apart. The fused node takes r's place; p and the value between them
// leave the graph. Returns how many were fused.
int fuse_pairs(Graph& g, const std::set<std::string>& keep,
               const std::function<std::optional<Node>(const Node& producer, const Node& reader)>& join);

// What a node joining a fused one keeps as that part's decisions (NodeDecisions::expand,
// project, pool): its own, none where nothing was decided for it. The nodes these fusions join
// as parts (ConvNhwc, MaxPoolNhwc) never have parts of their own.
inline std::optional<Decisions> as_part(const NodeDecisions& d) {
  const Decisions& own = d;
  if (own == Decisions{}) return std::nullopt;
  return own;
}

}  // namespace grove
