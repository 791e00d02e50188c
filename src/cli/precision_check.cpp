#include "cli/precision_check.h"

#include <algorithm>
#include <cmath>

#include "cli/inputs.h"

namespace grove::cli {

namespace {

void compare(const std::string& name, const Tensor& want, const Tensor& got, PrecisionCheck& check) {
  if (want.dtype() != DType::f32 || got.dtype() != DType::f32 || want.shape() != got.shape()) return;
  const float* a = want.data<float>();
  const float* b = got.data<float>();
  const int64_t count = numel(want.shape());
  double largest = 0, worst = 0;
  for (int64_t i = 0; i < count; ++i) {
    largest = std::max(largest, std::abs(double(a[i])));
    worst = std::max(worst, std::abs(double(a[i]) - b[i]));
  }
  const double error = largest > 0 ? worst / largest : worst;
  if (error >= check.max_error) check.max_error = error, check.worst_output = name;
  const int64_t classes = want.shape().empty() ? 1 : want.shape().back();
  if (classes < 2) return;
  for (int64_t row = 0; row < count / classes; ++row) {
    const float* x = a + row * classes;
    const float* y = b + row * classes;
    const int64_t best = std::max_element(x, x + classes) - x;
    const int64_t best_reduced = std::max_element(y, y + classes) - y;
    // Rank of fp32's best class among the reduced scores: how many score strictly higher.
    const int64_t above = std::count_if(y, y + classes, [&](float v) { return v > y[best]; });
    ++check.rows;
    check.top1_agree += best == best_reduced;
    check.top5_agree += above < 5;
  }
}

}  // namespace

PrecisionCheck check_precision(Session& fp32, Session& reduced, const Graph& imported, const ShapeMap& shapes,
                               TensorMap inputs, const std::vector<std::string>& redraw, int count,
                               std::mt19937_64& rng) {
  PrecisionCheck check;
  if (redraw.empty()) count = std::min(count, 1);
  for (int i = 0; i < count; ++i) {
    if (i > 0)
      for (const std::string& name : redraw)
        if (const ValueDecl* decl = imported.find_input(name))
          inputs[name] = random_tensor(decl->dtype, shapes.at(name), rng);
    const TensorMap want = fp32.run(inputs);
    const TensorMap got = reduced.run(inputs);
    for (const auto& [name, tensor] : want)
      if (auto it = got.find(name); it != got.end()) compare(name, tensor, it->second, check);
    ++check.inputs;
  }
  return check;
}

}  // namespace grove::cli
