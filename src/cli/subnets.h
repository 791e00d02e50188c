#pragma once
// --subnet for grove run and grove bench: which sub-nets of a model to run.
#include <memory>
#include <string>
#include <vector>

#include "graph/graph.h"
#include "grove/dynamic.h"

namespace grove::cli {

struct SubnetPick {
  std::unique_ptr<DynamicSession> session;
  std::vector<int> indices;  // into session->subnets(), cheapest first
};

// `text` is a sub-net's name or ratio, or `all`, for a dynamic model (metadata
// grove.subnets); for a plain model, width ratios to slice it at ("0.5" or "0.25,0.5,1";
// `all` is 0.25,0.5,0.75,1). Errors list the sub-nets the model has.
SubnetPick open_subnets(Engine& engine, const Graph& imported, const std::string& path, const SessionOptions& options,
                        const std::string& text);

// "w50 (width 0.50, 12.3 MFLOP, accuracy 97.2%)"
std::string describe_subnet(const SubnetInfo& s);

}  // namespace grove::cli
