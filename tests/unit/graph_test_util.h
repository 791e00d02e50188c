#pragma once
// Helpers shared by the tests that run whole graphs: node counts by op type, and the error
// measure for comparing a tiled result with the reference executor's.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <string>

#include "graph/graph.h"

namespace grove::test {

// Nodes per op type; ops of another domain as "domain:op_type".
inline std::map<std::string, int> histogram(const Graph& g) {
  std::map<std::string, int> h;
  for (const auto& n : g.nodes) ++h[(n.domain.empty() ? "" : n.domain + ":") + n.op_type];
  return h;
}

// Largest |a - b| relative to the largest |b| (float32 tensors of one shape).
inline double relative_error(const Tensor& a, const Tensor& b) {
  EXPECT_EQ(a.shape(), b.shape());
  double worst = 0, scale = 1e-30;
  for (int64_t i = 0; i < b.numel(); ++i) {
    worst = std::max(worst, double(std::fabs(a.data<float>()[i] - b.data<float>()[i])));
    scale = std::max(scale, double(std::fabs(b.data<float>()[i])));
  }
  return worst / scale;
}

}  // namespace grove::test
