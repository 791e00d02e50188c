#pragma once
// Runs one node's infer or reference through the registry, turning any failure into an
// Error that names the node and op. Shared by shape binding, constant folding and the
// reference executor.
#include <cstdint>
#include <span>
#include <vector>

#include "graph/graph.h"

namespace grove {

std::vector<ValueInfo> infer_node(const Node& node, std::span<const ValueInfo> in);

// in[i] is nullptr for a missing optional input.
// `max_output_bytes`: the node's outputs together may not need more; checked on the inferred
// shapes before anything is allocated (the reference executor's share of Limits::max_memory).
std::vector<Tensor> evaluate_node(const Node& node, std::span<const Tensor* const> in,
                                  int64_t max_output_bytes = INT64_MAX);

}  // namespace grove
