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
  std::string note;  // one line for people: what runs in bf16, or why nothing does
};

PrecisionReport apply_precision(Graph& graph, Precision wanted);

// After the channels-last pass: every y of an AMX ConvNhwc that only AMX ConvNhwc nodes read
// (as x or as the fused residual), and that is not a graph output, is stored as bfloat16.
// Its readers would round it to bf16 anyway when packing it, so only the residual add differs
// (it adds the rounded value). Counts them into the report and its note.
void store_bf16_between_convs(Graph& graph, PrecisionReport& report);

}  // namespace grove
