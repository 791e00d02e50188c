#include "cli/summary.h"

#include <algorithm>
#include <cmath>
#include <numeric>

#include "cli/format.h"

namespace grove::cli {

bool is_classifier_shaped(const Tensor& t) {
  if (t.dtype() != DType::f32 && t.dtype() != DType::f64 && t.dtype() != DType::f16) return false;
  const Shape& s = t.shape();
  return (s.size() == 1 && s[0] >= 10) || (s.size() == 2 && s[0] == 1 && s[1] >= 10);
}

std::vector<std::pair<int64_t, double>> top_k(const Tensor& t, size_t k) {
  std::vector<double> v = t.to_f64();
  std::vector<int64_t> idx(v.size());
  std::iota(idx.begin(), idx.end(), 0);
  k = std::min(k, idx.size());
  // A total order even with NaNs: numbers by value descending, then NaNs, ties by index.
  auto before = [&](int64_t a, int64_t b) {
    double x = v[static_cast<size_t>(a)], y = v[static_cast<size_t>(b)];
    bool xn = std::isnan(x), yn = std::isnan(y);
    if (xn != yn) return yn;
    if (!xn && x != y) return x > y;
    return a < b;
  };
  std::partial_sort(idx.begin(), idx.begin() + static_cast<std::ptrdiff_t>(k), idx.end(), before);
  std::vector<std::pair<int64_t, double>> out;
  for (size_t i = 0; i < k; ++i) out.emplace_back(idx[i], v[static_cast<size_t>(idx[i])]);
  return out;
}

std::string summarize_output(const std::string& name, const Tensor& t) {
  std::string line = strf("  %s: %s %s", name.c_str(), std::string(dtype_name(t.dtype())).c_str(),
                          bracket_shape(t.shape()).c_str());
  if (t.numel() == 0) return line + "  (empty)\n";
  std::vector<double> v;
  try {
    v = t.to_f64();
  } catch (const Error&) {
    return line + "\n";  // a dtype without numeric values: shape and dtype are all there is
  }
  double lo = INFINITY, hi = -INFINITY, sum = 0;
  int64_t nans = 0, infs = 0;
  for (double x : v) {
    if (std::isnan(x)) { ++nans; continue; }
    if (std::isinf(x)) ++infs;
    lo = std::min(lo, x);
    hi = std::max(hi, x);
    sum += x;
  }
  int64_t finite_or_inf = static_cast<int64_t>(v.size()) - nans;
  if (finite_or_inf > 0)
    line += strf("  min %.6g  max %.6g  mean %.6g", lo, hi, sum / static_cast<double>(finite_or_inf));
  if (nans) line += strf("  NaN: %lld", static_cast<long long>(nans));
  if (infs) line += strf("  inf: %lld", static_cast<long long>(infs));
  line += "\n";
  if (is_classifier_shaped(t)) {
    line += "    top-5:";
    for (const auto& [i, x] : top_k(t, 5)) line += strf("  #%lld %.5g", static_cast<long long>(i), x);
    line += "\n";
  }
  return line;
}

}  // namespace grove::cli
