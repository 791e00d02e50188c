#pragma once
// Output comparison with ONNX Runtime's test tolerances: |got - want| <= atol + rtol * |want|.
#include <string>

#include "graph/tensor.h"

namespace grove {

struct Tolerance {
  double rtol = 1e-3;
  double atol = 1e-5;
};

// Empty string when `got` matches `want`; otherwise what differs (dtype, shape or the worst element).
std::string compare_tensors(const Tensor& got, const Tensor& want, Tolerance tol = {});

}  // namespace grove
