#pragma once
// How a plan records a per-node choice that overrides the hand rules (plan/node_choice.h; a
// tuning record of src/tune supplies them): the Conv tile rule reads the primitive when it
// cuts, packs and runs. Like the epilogue and precision attributes it is reserved: the
// importer refuses "grove_" names in a model.
#include <string>

#include "graph/graph.h"

namespace grove {

inline constexpr const char* kAttrConvPrimitive = "grove_conv";  // "gemm", "winograd", "direct", "nhwc" or "winograd_nhwc"

inline std::string conv_primitive_choice(const Node& node) { return node.attr_string(kAttrConvPrimitive, ""); }

}  // namespace grove
