#include "serve/mt_graph_search.h"

#include <algorithm>
#include <map>
#include <random>
#include <string>

namespace grove::serve {

std::string pointer_matrix_str(const PointerMatrix& rho) {
  std::string s = "[";
  for (size_t i = 0; i < rho.size(); ++i) {
    s += i ? ", [" : "[";
    for (size_t k = 0; k < rho[i].size(); ++k) s += (k ? ", " : "") + std::to_string(rho[i][k]);
    s += "]";
  }
  return s + "]";
}

MtGraphResult search_pointer_matrix(const std::vector<int32_t>& ops, const MtGraphSearchOptions& o,
                                    const std::function<double(const PointerMatrix&)>& cost) {
  std::mt19937_64 rng(o.seed);
  std::map<PointerMatrix, double> seen;  // D: schedule -> cost
  MtGraphResult result;
  auto profile = [&](const PointerMatrix& rho) {
    auto it = seen.find(rho);
    if (it != seen.end()) return it->second;
    double c = cost(rho);
    seen[rho] = c;
    result.records.push_back({rho, c});
    return c;
  };
  PointerMatrix rho(ops.size());
  for (size_t i = 0; i < ops.size(); ++i) rho[i].assign(static_cast<size_t>(std::max(0, o.pointers)), ops[i]);
  result.start = {rho, profile(rho)};

  for (int round = 0; round < o.rounds; ++round) {
    for (size_t i = 0; i < ops.size(); ++i) {
      std::vector<int32_t> best_row = rho[i];
      double best = profile(rho);
      for (int m = 0; m < o.candidates; ++m) {
        // A row: P sorted positions, uniform over the model's op sequence (end included).
        std::uniform_int_distribution<int32_t> position(0, ops[i]);
        std::vector<int32_t> row(rho[i].size());
        for (int32_t& p : row) p = position(rng);
        std::sort(row.begin(), row.end());
        PointerMatrix candidate = rho;
        candidate[i] = row;
        double c = profile(candidate);
        if (c < best) best = c, best_row = row;
      }
      rho[i] = best_row;
    }
  }
  result.best = result.records.front();
  for (const MtGraphRecord& r : result.records)
    if (r.cost < result.best.cost) result.best = r;
  if (result.best.rho == result.start.rho) return result;
  std::vector<double> winner, plain;
  for (int k = 0; k < o.verify; ++k) {
    winner.push_back(cost(result.best.rho));
    plain.push_back(cost(result.start.rho));
  }
  auto median = [](std::vector<double> v) {
    std::sort(v.begin(), v.end());
    return v.empty() ? 0.0 : v[v.size() / 2];
  };
  result.verified_cost = median(winner);
  result.plain_cost = median(plain);
  if (o.verify > 0 && median(winner) >= median(plain)) {
    result.best = {result.start.rho, median(plain)};
    return result;
  }
  result.verified = true;
  return result;
}

}  // namespace grove::serve
