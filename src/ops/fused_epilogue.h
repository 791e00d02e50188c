#pragma once
// Reading a fused epilogue (graph/node_decisions.h) off a Conv, MatMul or Gemm node: the
// kernels' activation parameters, the checks `infer` makes, and the reference's version of
// y = act(y + bias + residual), applied after the op's own reference result so the reference
// executor on a fused graph computes what the unfused ops did.
#include <span>

#include "graph/node_decisions.h"
#include "kernels/epilogue.h"
#include "ops/op.h"

namespace grove {

// The activation the node asks for (identity without one).
kernels::ActivationParams epilogue_activation(const Node& node);

// The most inputs the op takes: `plain` for a plain node, 4 with a fused epilogue.
size_t epilogue_max_inputs(const Node& node, size_t plain);

// For infer: a residual (input 3) has the output's dtype and shape; with `column_bias` (a
// MatMul's input 2) the bias holds one value per output column. float32 only.
void check_epilogue_inputs(const Node& node, std::span<const ValueInfo> in, const ValueInfo& out, bool column_bias);

// y = act(y [+ column_bias[j]] + residual), in float32 with the kernels' scalar activation.
void apply_epilogue_reference(const Node& node, const Tensor* column_bias, const Tensor* residual, Tensor& y);

}  // namespace grove
