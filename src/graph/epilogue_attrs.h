#pragma once
// How a fused epilogue is written on a Conv, MatMul or Gemm node (graph/fuse_epilogue.cpp
// writes it; the op's reference and tile rule read it):
//   inputs[2]  per-output-column bias of a MatMul (Conv and Gemm already have one there)
//   inputs[3]  residual: a tensor shaped like the output, added before the activation
//   grove_activation  "relu", "clip", "leaky_relu", "sigmoid", "hard_sigmoid", "hard_swish",
//                     "gelu_erf", "gelu_tanh", "swish" (absent: none); grove_alpha / grove_beta its parameters
//   grove_fused       what was fused, for people: "Add+Relu" makes the op read "Conv+Add+Relu"
//   grove_fused_flops what the fused nodes counted in graph_flops (so fusion keeps a model's FLOPs)
// The node keeps its op type, so every consumer of op types (tile rules, FLOP counts,
// importers' checks) keeps working, and a node without these attributes is plain ONNX.
// Names starting with "grove_" are reserved: the importer refuses them in a model.
#include <string>

#include "graph/graph.h"

namespace grove {

inline constexpr size_t kEpilogueBiasInput = 2;
inline constexpr size_t kEpilogueResidualInput = 3;
inline constexpr const char* kAttrActivation = "grove_activation";
inline constexpr const char* kAttrAlpha = "grove_alpha";
inline constexpr const char* kAttrBeta = "grove_beta";
inline constexpr const char* kAttrFused = "grove_fused";
inline constexpr const char* kAttrFusedFlops = "grove_fused_flops";
// grove.internal QLinearConvNhwc with a residual QLinearAdd fused (passes/layout_int8.cpp):
// "relu" when the add's Relu came along (ops/channels_last.h has the inputs).
inline constexpr const char* kAttrResidualActivation = "grove_residual_activation";

inline bool has_fused_epilogue(const Node& node) { return node.has_attr(kAttrFused); }

// "Conv+Add+Relu" for a fused node, the op type otherwise.
inline std::string op_label(const Node& node) {
  return has_fused_epilogue(node) ? node.op_type + "+" + node.attr_string(kAttrFused, "") : node.op_type;
}

}  // namespace grove
