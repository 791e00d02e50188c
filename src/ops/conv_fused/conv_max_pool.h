#pragma once
// grove.internal ConvMaxPoolNhwc (passes/fuse_conv_max_pool.cpp): a float32 ConvNhwc and the
// MaxPoolNhwc that alone reads its output (a network's stem: conv, ReLU, 3x3 stride-2 max
// pool), as one node, so the conv's output (the largest activation of ResNet-50, GoogLeNet and
// SqueezeNet, 3 MB) lives only in a tile's cache-sized band: it is never written to memory
// cold and read back.
//
// Inputs: the conv's, x [N, H, W, C] (or NCHW where the conv reads the image itself,
// Decisions::x_nchw), W [M, C, kh, kw], B [M] or none; y [N, OH, OW, M] as the max pool gives it.
// Attributes: the conv's as they were, and the max pool's under kPoolPrefix. Decisions: the
// conv's as the node's own (its fused epilogue too), the max pool's in NodeDecisions::pool.
#include <string>

#include "graph/graph.h"

namespace grove {

inline constexpr const char* kPoolPrefix = "pool.";

// The two nodes the fused one computes: the conv reads x and writes `mid`, the pool reads `mid`.
Node conv_part(const Node& fused, const std::string& mid = "conv_output");
Node pool_part(const Node& fused, const std::string& mid = "conv_output");

}  // namespace grove
