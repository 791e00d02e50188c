#pragma once
// How the plan marks a node to run its products in bfloat16 (plan/precision.cpp chooses the
// nodes; the Conv, MatMul and Gemm tile rules read it when packing and running). Like the
// epilogue attributes it is reserved: the importer refuses "grove_" names in a model.
#include "graph/graph.h"

namespace grove {

inline constexpr const char* kAttrPrecision = "grove_precision";

// "bf16": AVX512-BF16 dot products; "bf16_amx": the AMX tile unit. Both round the same way.
inline constexpr const char* kPrecisionBf16 = "bf16";
inline constexpr const char* kPrecisionBf16Amx = "bf16_amx";

inline bool runs_in_bf16(const Node& node) {
  const std::string p = node.attr_string(kAttrPrecision, "");
  return p == kPrecisionBf16 || p == kPrecisionBf16Amx;
}
inline bool runs_on_amx(const Node& node) { return node.attr_string(kAttrPrecision, "") == kPrecisionBf16Amx; }

// A channels-last conv on AMX whose y the plan stores as bfloat16 (1), because every reader
// is such a conv too (plan/precision.cpp): half the bytes through the caches, and the reader
// packs its tiles from bf16 without rounding again. ConvNhwc's shape rule reads it for y's dtype.
inline constexpr const char* kAttrOutputBf16 = "grove_output_bf16";
inline bool stores_bf16(const Node& node) { return node.attr_int(kAttrOutputBf16, 0) != 0; }

}  // namespace grove
