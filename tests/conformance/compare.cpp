#include "compare.h"

#include <cmath>

namespace grove {

std::string compare_tensors(const Tensor& got, const Tensor& want, Tolerance tol) {
  if (got.dtype() != want.dtype())
    return "dtype " + std::string(dtype_name(got.dtype())) + ", expected " + std::string(dtype_name(want.dtype()));
  if (got.shape() != want.shape()) return "shape " + shape_str(got.shape()) + ", expected " + shape_str(want.shape());
  std::vector<double> g = got.to_f64(), w = want.to_f64();
  bool exact = got.dtype() != DType::f32 && got.dtype() != DType::f64 && got.dtype() != DType::bf16;
  // bfloat16 within one of its ulps: ONNX 1.12's test data truncates float32 to bfloat16,
  // while the spec (and ONNX Runtime) round to nearest even, as grove does.
  if (got.dtype() == DType::bf16) tol = Tolerance{1.0 / 128, 0.0};
  double worst = 0;
  size_t worst_at = 0;
  int64_t bad = 0;
  for (size_t i = 0; i < g.size(); ++i) {
    if (std::isnan(w[i]) && std::isnan(g[i])) continue;
    if (std::isinf(w[i]) && g[i] == w[i]) continue;
    double err = std::fabs(g[i] - w[i]);
    bool ok = exact ? g[i] == w[i] : err <= tol.atol + tol.rtol * std::fabs(w[i]);
    if (!ok || std::isnan(g[i]) != std::isnan(w[i])) {
      ++bad;
      if (!(err <= worst)) { worst = err; worst_at = i; }
    }
  }
  if (bad == 0) return {};
  return std::to_string(bad) + " of " + std::to_string(g.size()) + " elements differ; worst at " +
         std::to_string(worst_at) + ": got " + std::to_string(g[worst_at]) + ", expected " + std::to_string(w[worst_at]);
}

}  // namespace grove
