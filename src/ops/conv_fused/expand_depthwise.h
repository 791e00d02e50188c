#pragma once
// grove.internal ExpandDepthwiseNhwc (passes/fuse_expand_depthwise.cpp): an expand ConvNhwc (the
// 1x1 conv of an inverted residual block, or a network's stem on the row path) and the
// DepthwiseConvNhwc that alone reads its output, as one node, so the expanded activations (six
// times the block's channels, the largest tensors of MobileNetV2) live only in a tile's
// cache-sized band and never go to memory.
//
// Inputs: x [N, H, W, C] (the expand conv's; NCHW where it reads the image, Decisions::x_nchw),
// We [M, C, kh, kw], Be [M] or "", Wd [M, 1, kh, kw], Bd [M] or ""; y [N, OH, OW, M] as the
// depthwise conv gives it. Attributes: the depthwise conv's as they were, and the expand conv's
// under kExpandPrefix. Decisions: the depthwise conv's as the node's own, the expand conv's
// (its epilogue, a stem's NCHW x) in NodeDecisions::expand.
//
// grove.internal InvertedResidualNhwc is the same node with the block's 1x1 project ConvNhwc,
// which alone reads the depthwise output, joined too, so that output (as large as the expanded
// one after a stride-1 depthwise conv) stays in the band as well. Three inputs follow: Wp
// [P, M, 1, 1], Bp [P] or "", and the residual the project conv adds, shaped like y, or "";
// y is [N, OH, OW, P]. The project conv's attributes go under kProjectPrefix, its decisions
// (its residual's epilogue) in NodeDecisions::project.
#include <string>

#include "graph/graph.h"

namespace grove {

inline constexpr const char* kExpandPrefix = "expand.";
inline constexpr const char* kProjectPrefix = "project.";

// Inputs of an InvertedResidualNhwc past ExpandDepthwiseNhwc's five.
inline constexpr size_t kProjectWeightInput = 5, kProjectBiasInput = 6, kProjectResidualInput = 7;

// The nodes the fused one computes: expand reads x and writes `mid`, depthwise reads `mid` and
// writes `out` (the node's output where no project conv follows), project reads `out`.
Node expand_part(const Node& fused, const std::string& mid = "expanded");
Node depthwise_part(const Node& fused, const std::string& mid = "expanded", const std::string& out = "");
Node project_part(const Node& fused, const std::string& in = "depthwise");

bool has_project(const Node& fused);

}  // namespace grove
