#pragma once
// What `grove run` and `grove demo` print about an output tensor.
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "graph/tensor.h"

namespace grove::cli {

// A float output of shape [N] or [1, N] with N >= 10 looks like class scores.
bool is_classifier_shaped(const Tensor& t);

// The k largest values with their flat indices, largest first (NaNs last, ties by index).
std::vector<std::pair<int64_t, double>> top_k(const Tensor& t, size_t k);

// "logits: float32 [1, 1000]  min -1.2 max 3.4 mean 0.01" plus a top-5 line for class scores.
std::string summarize_output(const std::string& name, const Tensor& t);

}  // namespace grove::cli
