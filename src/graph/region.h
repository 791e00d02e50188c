#pragma once
// A Region is a box inside a tensor: one half-open [begin, end) range per dimension. Tiles are
// regions of an op's output; dependencies come from intersecting regions, never per element.
#include <cstdint>
#include <string>
#include <vector>

#include "graph/tensor.h"

namespace grove {

struct Range {
  int64_t begin = 0;
  int64_t end = 0;
  int64_t size() const { return end - begin; }
  bool operator==(const Range&) const = default;
};

using Region = std::vector<Range>;

inline Region full_region(const Shape& shape) {
  Region r;
  for (int64_t d : shape) r.push_back({0, d});
  return r;
}

inline int64_t volume(const Region& r) {
  int64_t v = 1;
  for (const auto& x : r) v *= x.size() > 0 ? x.size() : 0;
  return v;
}

inline bool intersects(const Region& a, const Region& b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i)
    if (a[i].begin >= b[i].end || b[i].begin >= a[i].end) return false;
  return volume(a) > 0 && volume(b) > 0;
}

inline std::string region_str(const Region& r) {
  std::string s = "[";
  for (size_t i = 0; i < r.size(); ++i) s += (i ? "," : "") + std::to_string(r[i].begin) + ":" + std::to_string(r[i].end);
  return s + "]";
}

}  // namespace grove
