#pragma once
// Lookups several passes share, each nullptr when the graph has no such value, and the one
// constant they add (a Slice's starts, ends and axes).
#include <string>

#include "graph/graph.h"

namespace grove {

// A value's constant data: its initializer.
inline const Tensor* constant(const Graph& g, const std::string& name) {
  auto it = g.initializers.find(name);
  return it == g.initializers.end() ? nullptr : &it->second;
}

// A value's dtype and shape, as bind_shapes() inferred them.
inline const ValueInfo* info(const Graph& g, const std::string& name) {
  auto it = g.values.find(name);
  return it == g.values.end() ? nullptr : &it->second;
}

// A float32 value of rank 4: what the image layouts (NHWC, channel-blocked) rewrite.
inline bool f32_4d(const ValueInfo* v) { return v && v->dtype == DType::f32 && v->shape.size() == 4; }

// Adds the int64 scalar-list constant [v] named `name` (initializer and value info); returns the name.
inline std::string add_i64_constant(Graph& g, const std::string& name, int64_t v) {
  Tensor t(DType::i64, {1});
  t.data<int64_t>()[0] = v;
  g.values[name] = ValueInfo{DType::i64, t.shape(), nullptr, true};
  g.initializers[name] = std::move(t);
  return name;
}

}  // namespace grove
