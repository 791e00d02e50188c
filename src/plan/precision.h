#pragma once
// Marks the nodes of a plan's graph that run their products in bf16 (plan/precision.cpp).
#include <string>

#include "graph/graph.h"
#include "grove/precision.h"

namespace grove {

struct PrecisionReport {
  Precision precision = Precision::fp32;  // what runs: fp32 when bf16 is unavailable here
  int bf16_nodes = 0;
  int bf16_values = 0;  // activations stored as bfloat16 (store_bf16_between_convs)
  int int8_weight_nodes = 0;  // MatMuls and Gemms with int8 weights (Precision::int8_weights)
  std::string note;  // one line for people: what runs in bf16, or why nothing does
};

// `bf16_dot_gain`: PlanOptions::bf16_dot_gain. Without AMX, a measured gain below
// kMinBf16DotGain runs fp32 and the note says why: the rounding would cost accuracy and the
// packing time for nothing.
inline constexpr double kMinBf16DotGain = 1.25;
// Whether bf16 runs: always on AMX; on dot products unless measured too slow.
inline bool bf16_pays(bool amx, double bf16_dot_gain) {
  return amx || bf16_dot_gain <= 0 || bf16_dot_gain >= kMinBf16DotGain;
}
PrecisionReport apply_precision(Graph& graph, Precision wanted, double bf16_dot_gain = 0);

// After the channels-last pass: every y of an AMX ConvNhwc that only AMX ConvNhwc nodes read,
// as x, and that is not a graph output, is stored as bfloat16. Its readers would round it to
// bf16 anyway when packing it, so no result changes. A value also read as a fused residual
// stays float: a residual stream stored bf16 adds a rounding per block (MobileNetV2: top-1
// agreement with fp32 96.9 -> 93.8% of 64 inputs; docs/precision.md). Counts them into the
// report and its note.
void store_bf16_between_convs(Graph& graph, PrecisionReport& report);

}  // namespace grove
