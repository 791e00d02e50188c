#pragma once
// How a plan records a per-node choice that overrides the hand rules (plan/node_choice.h; a
// tuning record of src/tune supplies them): the Conv tile rule reads the primitive when it
// cuts, packs and runs. Like the epilogue and precision attributes it is reserved: the
// importer refuses "grove_" names in a model.
#include <string>

#include "graph/graph.h"

namespace grove {

// "gemm", "winograd", "direct", "nhwc", "nchwc" (channel-blocked, passes/layout_nchwc.cpp),
// "winograd_nhwc" or "winograd_f2x3_nhwc"
inline constexpr const char* kAttrConvPrimitive = "grove_conv";

inline std::string conv_primitive_choice(const Node& node) { return node.attr_string(kAttrConvPrimitive, ""); }

// The choices that run a conv channels-last: the row GEMM and the two Winograd forms,
// F(4x4, 3x3) and F(2x2, 3x3).
inline bool channels_last_choice(const std::string& primitive) {
  return primitive == "nhwc" || primitive == "winograd_nhwc" || primitive == "winograd_f2x3_nhwc";
}

}  // namespace grove
