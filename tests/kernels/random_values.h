#pragma once
// Seeded floats uniform in [-1, 1), the inputs of the kernel testers.
#include <random>
#include <vector>

namespace grove::kernels {

inline std::vector<float> random_values(size_t count, unsigned seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  std::vector<float> v(count);
  for (float& x : v) x = dist(rng);
  return v;
}

}  // namespace grove::kernels
