#pragma once
// Derives one sub-net of a dynamic model from the full graph: each layer keeps a prefix of
// its output channels, and every op downstream is cut to the channels that reach it, until
// an exempt (whole) layer restores the full width. The result is an imported graph like any
// other, bound and planned as its own model.
#include <cstdint>
#include <string>
#include <vector>

#include "dynamic/subnet_spec.h"
#include "graph/graph.h"

namespace grove {

struct LayerWidth {
  std::string layer;  // node name (or its weight's name when the node has none)
  int64_t full = 0;   // output channels of the full model
  int64_t kept = 0;
};

struct SlicedSubnet {
  Graph graph;
  std::vector<LayerWidth> layers;  // every layer, in graph order
};

// Throws Error naming the sub-net and the node for what cannot be sliced: an unknown layer
// name, more channels than the layer has, an op that would mix sliced and whole channels,
// or a graph output that would lose channels (its layer must be exempt).
SlicedSubnet slice_subnet(const Graph& imported, const DynamicSpec& spec, const SubnetSpec& subnet);

}  // namespace grove
