#pragma once
// A MatMul (and MatMulInteger, QLinearMatMul) seen as a batch of [m,k] x [k,n] products with
// numpy broadcasting of the batch dims: one shape rule for every matrix-product op.
#include <vector>

#include "graph/graph.h"

namespace grove {

struct MatMulPlan {
  int64_t m = 0, k = 0, n = 0;
  Shape batch;                          // broadcast batch dims
  std::vector<int64_t> a_batch_strides; // element strides of a's matrices along `batch` (0 when broadcast)
  std::vector<int64_t> b_batch_strides;
  Shape out_shape;
};

// Throws Error for ranks below 1, differing inner dimensions or batch dims that do not broadcast.
MatMulPlan plan_matmul(const Node& node, const Shape& a_shape, const Shape& b_shape);

}  // namespace grove
