#pragma once
// Marks the nodes of a plan's graph that run their products in bf16 (plan/precision.cpp).
#include <string>

#include "graph/graph.h"
#include "grove/precision.h"

namespace grove {

struct PrecisionReport {
  Precision precision = Precision::fp32;  // what runs: fp32 when bf16 is unavailable here
  int bf16_nodes = 0;
  std::string note;  // one line for people: what runs in bf16, or why nothing does
};

PrecisionReport apply_precision(Graph& graph, Precision wanted);

}  // namespace grove
