#pragma once
// Sets layers' output channels in a model as written (`grove tail --apply`). Pruning keeps the
// channels whose weights have the largest L1 norm; growing appends channels with small random
// weights whose weights in every reader are zero, so the grown model computes what the
// original did. Each layer is changed on its own and followed through its readers
// (dynamic/channel_flow.h); a layer whose channels reach something that cannot follow them (a
// residual Add, a grouped conv, a graph output) is left as it is, with the reason.
#include <cstdint>
#include <string>
#include <vector>

#include "graph/graph.h"

namespace grove {

struct LayerResize {
  std::string layer;  // node name (or its weight's name when the node has none)
  int64_t channels = 0;
};

struct ResizeOutcome {
  std::string layer;
  int64_t from = 0, to = 0;
  std::string skipped;  // why the layer was left as it is; empty when it was resized
};

struct ResizedGraph {
  Graph graph;
  std::vector<ResizeOutcome> layers;  // one per request, in the order asked
};

// Changes each requested layer in turn. Never throws for a layer it cannot change: the
// outcome says why. `seed` seeds the grown channels' weights.
ResizedGraph resize_layers(const Graph& imported, const std::vector<LayerResize>& wanted, uint64_t seed);

struct ChannelLayer {
  std::string name;
  int64_t channels = 0;
};
// The layers a resize can name, in graph order (dynamic/channel_flow.h's is_channel_layer).
std::vector<ChannelLayer> channel_layers(const Graph& g);

}  // namespace grove
