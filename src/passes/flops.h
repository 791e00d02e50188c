#pragma once
// Floating-point operation counts of a bound graph, for `grove info` and the planner's work
// estimates. An estimate to compare models and sizes, not a cycle count. Each op's spec
// (ops/op.h) says how it counts:
//  - Conv, ConvTranspose, MatMul, Gemm and their integer forms: 2 x multiply-accumulates
//    (bias adds are ignored);
//  - pooling: one operation per window element read; global pools and reductions: one per input;
//  - reshapes and pure data movement (Reshape, Transpose, Concat, Gather, ...): zero;
//  - everything else (elementwise, activations, normalisations): one per output element.
// A node with a fused epilogue adds what the fused nodes counted, so fusion keeps the count.
#include <cstdint>

#include "graph/graph.h"

namespace grove {

// FLOPs of one node of `bound` (a graph after bind_shapes, so every value has a shape).
int64_t node_flops(const Graph& bound, const Node& node);

// Sum over every node of `bound`.
int64_t graph_flops(const Graph& bound);

}  // namespace grove
