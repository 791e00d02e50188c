// pick_token: greedy, temperature, top-k and top-p (nucleus) sampling over one row of logits.
#include <algorithm>
#include <cmath>
#include <numeric>

#include "grove/error.h"
#include "grove/generate.h"

namespace grove {

namespace {

// splitmix64: a fixed, portable generator, so a seed gives the same tokens everywhere.
uint64_t next_random(uint64_t& state) {
  uint64_t z = (state += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

double uniform01(uint64_t& state) { return static_cast<double>(next_random(state) >> 11) * 0x1.0p-53; }

}  // namespace

int64_t pick_token(const float* logits, int64_t vocabulary, const Sampling& s, uint64_t& rng) {
  if (vocabulary <= 0) throw Error("pick_token: empty vocabulary");
  if (s.temperature < 0 || !std::isfinite(s.temperature)) throw Error("sampling: temperature must be >= 0");
  if (s.top_k < 0) throw Error("sampling: top_k must be >= 0");
  if (!(s.top_p > 0 && s.top_p <= 1)) throw Error("sampling: top_p must be in (0, 1]");
  if (s.temperature == 0 || s.top_k == 1) {
    int64_t best = 0;
    for (int64_t i = 1; i < vocabulary; ++i)
      if (logits[i] > logits[best]) best = i;
    return best;
  }
  // Candidates by falling logit; ties by index, so the order does not depend on the sort.
  std::vector<int64_t> order(static_cast<size_t>(vocabulary));
  std::iota(order.begin(), order.end(), 0);
  const size_t k = s.top_k > 0 ? std::min<size_t>(static_cast<size_t>(s.top_k), order.size()) : order.size();
  auto before = [&](int64_t a, int64_t b) { return logits[a] > logits[b] || (logits[a] == logits[b] && a < b); };
  std::partial_sort(order.begin(), order.begin() + static_cast<std::ptrdiff_t>(k), order.end(), before);
  order.resize(k);
  std::vector<double> p(k);
  const double top = logits[order[0]];
  double sum = 0;
  for (size_t i = 0; i < k; ++i) sum += p[i] = std::exp((logits[order[i]] - top) / s.temperature);
  // Nucleus: the shortest prefix whose probability reaches top_p (at least one token).
  size_t keep = k;
  if (s.top_p < 1) {
    double mass = 0;
    for (size_t i = 0; i < k; ++i) {
      mass += p[i] / sum;
      if (mass >= s.top_p) {
        keep = i + 1;
        break;
      }
    }
  }
  const double kept = std::accumulate(p.begin(), p.begin() + static_cast<std::ptrdiff_t>(keep), 0.0);
  double u = uniform01(rng) * kept;
  for (size_t i = 0; i < keep; ++i) {
    if (u < p[i]) return order[i];
    u -= p[i];
  }
  return order[keep - 1];  // u landed on the rounding error past the last probability
}

}  // namespace grove
