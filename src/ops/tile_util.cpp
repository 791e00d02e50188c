#include "ops/tile_util.h"

#include <algorithm>
#include <cstring>

#include "kernels/cpu_info.h"
#include "ops/evaluate.h"
#include "ops/op.h"

namespace grove::tiling {

bool is_full(const Region& r, const Shape& shape) {
  if (r.size() != shape.size()) return false;
  for (size_t d = 0; d < r.size(); ++d)
    if (r[d].begin != 0 || r[d].end != shape[d]) return false;
  return true;
}

void check_region(const Node& node, const Region& r, const Shape& shape) {
  bool ok = r.size() == shape.size();
  for (size_t d = 0; ok && d < r.size(); ++d) ok = r[d].begin >= 0 && r[d].begin <= r[d].end && r[d].end <= shape[d];
  if (!ok)
    throw Error(node.describe() + ": tile region " + region_str(r) + " does not fit the output " + shape_str(shape));
}

namespace util_rule {

Shape region_shape(const Region& r) {
  Shape s;
  for (const Range& x : r) s.push_back(x.size());
  return s;
}

// Calls copy(big_byte_offset, dense_byte_offset, bytes) for every row of region `r` of a
// tensor of `shape`, the dense side being the region packed row-major.
template <class Copy>
void region_rows(const Shape& shape, size_t elem, const Region& r, Copy&& copy) {
  const size_t run = r.empty() ? elem : static_cast<size_t>(r.back().size()) * elem;
  size_t dense = 0;
  for_each_row(shape, r, [&](int64_t offset, const std::vector<int64_t>&) {
    copy(static_cast<size_t>(offset) * elem, dense, run);
    dense += run;
  });
}

}  // namespace util_rule

Tensor extract_region(const Tensor& t, const Region& r) {
  using namespace util_rule;
  Tensor small(t.dtype(), region_shape(r));
  if (small.numel() > 0)
    region_rows(t.shape(), dtype_size(t.dtype()), r,
                [&](size_t big, size_t dense, size_t n) { std::memcpy(small.raw() + dense, t.raw() + big, n); });
  return small;
}

void insert_region(Tensor& dst, const Region& r, const Tensor& src) {
  using namespace util_rule;
  if (src.numel() > 0)
    region_rows(dst.shape(), dtype_size(dst.dtype()), r,
                [&](size_t big, size_t dense, size_t n) { std::memcpy(dst.raw() + big, src.raw() + dense, n); });
}

Region broadcast_region(const Shape& in, const Region& out_region) {
  using namespace util_rule;
  Region r(in.size());
  const size_t lead = out_region.size() - in.size();
  for (size_t d = 0; d < in.size(); ++d) {
    const Range& o = out_region[lead + d];
    r[d] = in[d] == 1 ? Range{0, o.size() > 0 ? 1 : 0} : o;
  }
  return r;
}

void reference_on_subtensors(const Node& node, std::span<const Tensor* const> in, std::span<Tensor* const> out,
                             const Region& out_region, std::span<const Region> in_regions) {
  using namespace util_rule;
  const OpSpec* def = OpRegistry::builtin().find(node);
  if (!def) throw Unsupported(node.describe() + ": unsupported op");
  // An input read whole is read in place, and a tile that covers its whole output (a small
  // op's one tile) writes it in place, zeroed first as a new tensor is: copies of a few
  // hundred bytes cost more than the op itself there.
  std::vector<Tensor> parts(in.size());
  std::vector<const Tensor*> part_ptrs(in.size(), nullptr);
  for (size_t i = 0; i < in.size(); ++i) {
    if (!in[i]) continue;
    if (is_full(in_regions[i], in[i]->shape())) {
      part_ptrs[i] = in[i];
      continue;
    }
    parts[i] = extract_region(*in[i], in_regions[i]);
    part_ptrs[i] = &parts[i];
  }
  if (is_full(out_region, out[0]->shape())) {
    if (out[0]->bytes() > 0) std::memset(out[0]->raw(), 0, out[0]->bytes());
    std::vector<Tensor*> outs(out.size(), nullptr);
    outs[0] = out[0];
    def->reference(node, part_ptrs, outs);
    return;
  }
  Tensor result(out[0]->dtype(), region_shape(out_region));
  std::vector<Tensor*> outs(out.size(), nullptr);
  outs[0] = &result;
  def->reference(node, part_ptrs, outs);
  insert_region(*out[0], out_region, result);
}

void reference_whole(const Node& node, std::span<const Tensor* const> in, std::span<Tensor* const> out,
                     const Region& out_region) {
  using namespace util_rule;
  std::vector<Tensor> whole = evaluate_node(node, in);
  if (whole.empty() || whole[0].shape() != out[0]->shape())
    throw Error(node.describe() + ": reference output does not match the planned output " + shape_str(out[0]->shape()));
  if (is_full(out_region, out[0]->shape())) {
    if (out[0]->bytes()) std::memcpy(out[0]->raw(), whole[0].raw(), out[0]->bytes());
    return;
  }
  insert_region(*out[0], out_region, extract_region(whole[0], out_region));
}

std::vector<ValueInfo> infos_of_tensors(std::span<const Tensor* const> in) {
  using namespace util_rule;
  std::vector<ValueInfo> infos(in.size());
  for (size_t i = 0; i < in.size(); ++i) {
    if (in[i]) infos[i] = ValueInfo{in[i]->dtype(), in[i]->shape(), in[i], true};
    else infos[i].present = false;
  }
  return infos;
}

int64_t band_rows(int64_t width, int64_t channels) {
  using namespace util_rule;
  const int64_t l2 = kernels::cpu_info().l2_bytes > 0 ? kernels::cpu_info().l2_bytes : int64_t{1} << 20;
  return std::max<int64_t>(1, l2 / 4 / std::max<int64_t>(1, width * channels * int64_t(sizeof(float))));
}

}  // namespace grove::tiling
