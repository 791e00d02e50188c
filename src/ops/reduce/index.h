#pragma once
// Shared pieces of the index family: index.cpp (TopK, CumSum, NonZero, Shrink,
// MeanVarianceNormalization) and scatter.cpp (ScatterND, ScatterElements, Scatter, OneHot).
// register_index_ops in index.cpp is the family's one entry point.
#include <cstdint>
#include <string>

#include "graph/graph.h"
#include "ops/op.h"

namespace grove {

void register_scatter_ops(OpRegistry& r);  // scatter.cpp

// Throws Unsupported unless `dtype` is one grove computes arithmetic in (not bool, string, f16).
void require_arithmetic(DType dtype);

// An element index that may count from the end (-1 is the last); Error when outside [-dim, dim).
int64_t wrap_index(int64_t index, int64_t dim);


}  // namespace grove
