#pragma once
// The shape of an integer matrix product (MatMulInteger, QLinearMatMul) and its exact
// reference, shared by the ops (quant_matmul.cpp) and their tile rule.
#include <vector>

#include "graph/graph.h"
#include "ops/matmul/matmul_shape.h"

namespace grove {

// numpy matmul semantics (1-D operands become a row / column, batch dims broadcast): the batched product shape, shared with MatMul (ops/matmul/matmul_shape.h).
using IntMatMulShape = MatMulPlan;
inline IntMatMulShape int_matmul_shape(const Node& node, const Shape& a, const Shape& b) { return plan_matmul(node, a, b); }

// Throws unless a zero point or scale of shape `param` is one value or `count` entries (per
// row of A or per column of B).
void check_row_or_column_param(const Shape& param, int64_t count, const char* what);

// Every output of sum_k (a - a_zero_point) * (b - b_zero_point), exactly, in int64; the zero
// points hold one value or one per row of A / column of B.
std::vector<int64_t> int_matmul_reference(const IntMatMulShape& s, const Tensor& a, const Tensor& b,
                                          const Tensor* a_zero_point, const Tensor* b_zero_point);

}  // namespace grove
