#pragma once
// The number of inputs and outputs of every default-domain node, checked against ONNX's own
// operator schemas for the model's opset. The ops' shape rules index their inputs and outputs
// by position; a node with too few of them is a one-line error here, at the boundary, instead
// of an out-of-bounds read inside a rule (found by fuzz/fuzz_model).
#include "graph/graph.h"

namespace grove {

void check_node_arity(const Graph& graph);

}  // namespace grove
