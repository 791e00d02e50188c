#pragma once
// How the plan marks a node to run its products in bfloat16 (plan/precision.cpp chooses the
// nodes; the Conv, MatMul and Gemm tile rules read it when packing and running). Like the
// epilogue attributes it is reserved: the importer refuses "grove_" names in a model.
#include "graph/graph.h"

namespace grove {

inline constexpr const char* kAttrPrecision = "grove_precision";

inline bool runs_in_bf16(const Node& node) { return node.attr_string(kAttrPrecision, "") == "bf16"; }

}  // namespace grove
