#pragma once
// Shared by the benchmarks that build one node by hand and run its tile rule: random float
// tensors and attribute values.
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "graph/graph.h"
#include "graph/tensor.h"

namespace grove::bench {

inline Tensor random_tensor(Shape shape, unsigned seed) {
  Tensor t(DType::f32, std::move(shape));
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  for (float& v : t.span<float>()) v = dist(rng);
  return t;
}

inline Attribute ints_attr(std::vector<int64_t> v) {
  Attribute a;
  a.kind = Attribute::Kind::ints;
  a.ints = std::move(v);
  return a;
}

inline Attribute string_attr(std::string v) {
  Attribute a;
  a.kind = Attribute::Kind::s;
  a.s = std::move(v);
  return a;
}

inline Attribute int_attr(int64_t v) {
  Attribute a;
  a.kind = Attribute::Kind::i;
  a.i = v;
  return a;
}

}  // namespace grove::bench
