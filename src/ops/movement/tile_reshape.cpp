// Tile rules of the ops that keep the bytes and change the shape: Reshape, Flatten, Squeeze
// and Unsqueeze. Element i of the output is element i of the input, so a tile is a copy of
// the same flat offsets. A region must map to a box of the input for `needs` to be tight, so
// the shapes are split into groups of dims with equal products ([2,12] -> [2,3,4] is 2 | 12
// <-> 3,4); within a group only the first output dim is cut, in blocks that cover whole
// indices of the group's first input dim (or whole groups of them). Groups map
// independently, since a flat index is a mixed-radix number over the groups.
#include <algorithm>
#include <cstring>

#include "ops/op_util.h"
#include "ops/tile_util.h"

namespace grove::tiling {
namespace reshape_rule {

struct DimGroup {
  size_t out_begin = 0, out_end = 0, in_begin = 0, in_end = 0;
};

// Minimal groups with equal products; a dim of size 1 is a group of its own (its other side
// empty). Empty when the element counts differ or are 0.
std::vector<DimGroup> dim_groups(const Shape& in, const Shape& out) {
  std::vector<DimGroup> groups;
  if (numel(in) != numel(out) || numel(in) == 0) return groups;
  size_t i = 0, o = 0;
  while (i < in.size() || o < out.size()) {
    if (o < out.size() && out[o] == 1) {
      groups.push_back({o, o + 1, i, i});
      ++o;
      continue;
    }
    if (i < in.size() && in[i] == 1) {
      groups.push_back({o, o, i, i + 1});
      ++i;
      continue;
    }
    DimGroup g{o, o + 1, i, i + 1};
    int64_t po = out[o], pi = in[i];
    while (po != pi) {
      if (po < pi) po *= out[g.out_end++];
      else pi *= in[g.in_end++];
    }
    o = g.out_end;
    i = g.in_end;
    groups.push_back(g);
  }
  return groups;
}

std::vector<int64_t> reshape_cuttable(const Node&, std::span<const ValueInfo> in, std::span<const ValueInfo> out) {
  const Shape &x = in[0].shape, &y = out[0].shape;
  std::vector<int64_t> blocks = none_cuttable(y);
  for (const DimGroup& g : dim_groups(x, y)) {
    if (g.out_begin == g.out_end) continue;
    if (g.in_begin == g.in_end) {  // a unit dim the input lacks
      blocks[g.out_begin] = 1;
      continue;
    }
    const int64_t out_dim = y[g.out_begin], in_dim = x[g.in_begin];
    // One output index spans whole input indices, or a block of output indices makes one.
    if (in_dim % out_dim == 0) blocks[g.out_begin] = 1;
    else if (out_dim % in_dim == 0) blocks[g.out_begin] = out_dim / in_dim;
  }
  return blocks;
}

void reshape_needs(const Node&, std::span<const ValueInfo> in, std::span<const ValueInfo> out, const Region& out_region,
                   std::span<Region> in_regions) {
  const Shape &x = in[0].shape, &y = out[0].shape;
  for (size_t i = 1; i < in.size(); ++i) in_regions[i] = in[i].present ? full_region(in[i].shape) : Region{};
  if (volume(out_region) == 0) {
    in_regions[0] = {};
    return;
  }
  Region r = full_region(x);
  for (const DimGroup& g : dim_groups(x, y)) {
    if (g.out_begin == g.out_end || g.in_begin == g.in_end) continue;
    // The group's first output dim picks a flat range of the group; later dims are read whole.
    const int64_t per_out = dims_product(y, g.out_begin + 1, g.out_end), per_in = dims_product(x, g.in_begin + 1, g.in_end);
    const Range& o = out_region[g.out_begin];
    r[g.in_begin] = {o.begin * per_out / per_in, std::min((o.end * per_out + per_in - 1) / per_in, x[g.in_begin])};
  }
  in_regions[0] = r;
}

void reshape_run(const Node& node, std::span<const Tensor* const> in, std::span<Tensor* const> out, const Region& r, const void*, TileScratch&) {
  Tensor& y = *out[0];
  check_region(node, r, y.shape());
  if (in[0]->numel() != y.numel() || in[0]->dtype() != y.dtype())
    throw Error(node.describe() + ": input " + shape_str(in[0]->shape()) + " does not fit output " + shape_str(y.shape()));
  const size_t elem = dtype_size(y.dtype());
  const size_t run = static_cast<size_t>(r.empty() ? 1 : r.back().size()) * elem;
  for_each_row(y.shape(), r, [&](int64_t offset, const std::vector<int64_t>&) {
    const size_t at = static_cast<size_t>(offset) * elem;
    std::memcpy(y.raw() + at, in[0]->raw() + at, run);
  });
}

}  // namespace reshape_rule

void add_reshape_rules(RuleTable& t) {
  using namespace reshape_rule;
  for (const char* op : {"Reshape", "Flatten", "Squeeze", "Unsqueeze"}) t[op] = {reshape_cuttable, reshape_needs, reshape_run};
}

}  // namespace grove::tiling
