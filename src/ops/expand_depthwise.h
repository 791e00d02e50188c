#pragma once
// grove.internal ExpandDepthwiseNhwc (passes/fuse_expand_depthwise.cpp): a 1x1 ConvNhwc (the
// expand conv of an inverted residual block) and the DepthwiseConvNhwc that alone reads its
// output, as one node, so the expanded activations (six times the block's channels, the largest
// tensors of MobileNetV2) live only in a tile's cache-sized band and never go to memory.
//
// Inputs: x [N, H, W, C] (the expand conv's), We [M, C, 1, 1], Be [M] or "", Wd [M, 1, kh, kw],
// Bd [M] or ""; y [N, OH, OW, M] as the depthwise conv gives it. Attributes: the depthwise
// conv's as they were, and the expand conv's under kExpandPrefix (its epilogue's activation).
#include <string>

#include "graph/graph.h"

namespace grove {

inline constexpr const char* kExpandPrefix = "expand.";

// The two nodes the fused one computes: expand reads x and writes `mid`, depthwise reads `mid`.
Node expand_part(const Node& fused, const std::string& mid = "expanded");
Node depthwise_part(const Node& fused, const std::string& mid = "expanded");

}  // namespace grove
