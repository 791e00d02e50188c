// Tester for the in-place attention products (kernels/attention_rows.h) on every ISA this CPU
// runs: each build must give the documented order's results bit for bit, written out here one
// addition at a time, over head widths on and off the 16 lanes and the 64 columns kept in
// registers, and row strides wider than a row (heads side by side).
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "kernels/attention_rows.h"
#include "random_values.h"
#include "supported_isas.h"

namespace grove::kernels {
namespace {

// Values of exponents 2^-30 .. 2^30: float sums of these round, so another order gives other bits.
std::vector<float> spread(size_t n, unsigned seed) {
  std::vector<float> x = random_values(n, seed);
  for (size_t i = 0; i < n; ++i) x[i] = std::ldexp(x[i], int(i * 37 % 61) - 30);
  return x;
}

TEST(AttentionRows, KeyScoresOnEveryIsaAddInTheDocumentedOrder) {
  for (size_t dim : {1, 7, 16, 17, 64, 70, 128})
    for (size_t keys : {1, 5, 33}) {
      const size_t stride = dim + 3;
      const std::vector<float> q = spread(dim, unsigned(dim)), k = spread(keys * stride, unsigned(keys * 100 + dim));
      std::vector<float> want(keys);
      for (size_t t = 0; t < keys; ++t) {
        float lane[16] = {};
        for (size_t d = 0; d < dim; ++d) lane[d % 16] += q[d] * k[t * stride + d];
        for (size_t half = 8; half > 0; half /= 2)
          for (size_t j = 0; j < half; ++j) lane[j] += lane[j + half];
        want[t] = lane[0];
      }
      for (Isa isa : supported_isas()) {
        std::vector<float> got(keys, -1.0f);
        key_scores(q.data(), k.data(), stride, keys, dim, got.data(), isa);
        for (size_t t = 0; t < keys; ++t)
          ASSERT_EQ(got[t], want[t]) << isa_name(isa) << " dim " << dim << " keys " << keys << " key " << t;
      }
    }
}

TEST(AttentionRows, WeightedRowsOnEveryIsaAddInKeyOrderInOneCallOrTwo) {
  for (size_t dim : {1, 7, 16, 64, 70, 130})
    for (size_t keys : {1, 5, 33}) {
      const size_t stride = dim + 5;
      const std::vector<float> p = spread(keys, unsigned(keys)), v = spread(keys * stride, unsigned(keys * 100 + dim));
      // Two calls, the second going on from the first's sums, add as one call over all the keys.
      const size_t first = keys / 3;
      std::vector<float> want(dim, 0.0f);
      for (size_t t = 0; t < keys; ++t)
        for (size_t j = 0; j < dim; ++j) want[j] += p[t] * v[t * stride + j];
      for (Isa isa : supported_isas()) {
        std::vector<float> got(dim, -1.0f), parts(dim, -1.0f);
        weighted_rows(p.data(), v.data(), stride, keys, dim, got.data(), false, isa);
        weighted_rows(p.data(), v.data(), stride, first, dim, parts.data(), false, isa);
        weighted_rows(p.data() + first, v.data() + first * stride, stride, keys - first, dim, parts.data(), true, isa);
        for (size_t j = 0; j < dim; ++j) {
          ASSERT_EQ(got[j], want[j]) << isa_name(isa) << " dim " << dim << " keys " << keys << " column " << j;
          ASSERT_EQ(parts[j], want[j]) << isa_name(isa) << " in two parts, dim " << dim << " keys " << keys << " column " << j;
        }
      }
    }
}

}  // namespace
}  // namespace grove::kernels
