// Tile rules of the ops that move elements without computing: Transpose, Concat and Slice.
// Any dim may be cut; a tile reads exactly the input elements its region comes from. They
// copy bytes, so every dtype works.
#include <algorithm>
#include <cstring>
#include <array>
#include <numeric>

#include "ops/byte_copy.h"
#include "ops/op_util.h"
#include "kernels/transpose.h"
#include "ops/tile_util.h"

namespace grove::tiling {
namespace movement_rule {

std::vector<int64_t> cut_anywhere(const Node&, std::span<const ValueInfo>, std::span<const ValueInfo> out) {
  return all_cuttable(out[0].shape);
}

// Copies n elements of `elem` bytes read every `stride` elements into a dense run.
void copy_strided(std::byte* dst, const std::byte* src, int64_t n, int64_t stride, size_t elem) {
  if (stride == 1) {
    std::memcpy(dst, src, static_cast<size_t>(n) * elem);
    return;
  }
  auto typed = [&](auto tag) {
    using T = decltype(tag);
    T* d = reinterpret_cast<T*>(dst);
    const T* s = reinterpret_cast<const T*>(src);
    for (int64_t i = 0; i < n; ++i) std::memcpy(d + i, s + i * stride, sizeof(T));
  };
  switch (elem) {
    case 1: return typed(uint8_t{});
    case 2: return typed(uint16_t{});
    case 4: return typed(uint32_t{});
    case 8: return typed(uint64_t{});
    default:
      for (int64_t i = 0; i < n; ++i) std::memcpy(dst + static_cast<size_t>(i) * elem, src + static_cast<size_t>(i * stride) * elem, elem);
  }
}

// Fills out[0]'s region: each output index reads input element sum(index[d] * stride[d]) + base.
// The trailing dims the region covers whole, where x is as dense as y (a Concat's planes below
// its axis), merge into the last dim the region cuts, so each copy is one long run instead of
// one per row (GoogLeNet's 28-float rows: a copy per 112 bytes).
void gather_region(const Node& node, const Tensor& x, Tensor& y, const Region& r, int64_t base,
                   const std::vector<int64_t>& strides) {
  check_region(node, r, y.shape());
  const size_t elem = dtype_size(y.dtype()), rank = r.size();
  if (rank == 0) {  // a scalar: one element, no dims to merge or walk
    std::memcpy(y.raw(), x.raw() + static_cast<size_t>(base) * elem, elem);
    return;
  }
  const Shape& shape = y.shape();
  size_t m = rank;  // dims [m, rank) merge into dim m - 1
  if (rank > 1 && strides.back() == 1)
    while (m > 1 && r[m - 1].begin == 0 && r[m - 1].end == shape[m - 1] &&
           strides[m - 2] == strides[m - 1] * shape[m - 1])
      --m;
  int64_t merged = 1;
  for (size_t d = m; d < rank; ++d) merged *= shape[d];
  Shape view(shape.begin(), shape.begin() + static_cast<std::ptrdiff_t>(std::max<size_t>(m, 1)));
  Region region(r.begin(), r.begin() + static_cast<std::ptrdiff_t>(view.size()));
  std::vector<int64_t> view_strides(strides.begin(), strides.begin() + static_cast<std::ptrdiff_t>(view.size()));
  if (!view.empty()) {
    view.back() *= merged;
    region.back() = {region.back().begin * merged, region.back().end * merged};
    if (merged > 1) view_strides.back() = 1;
  }
  const int64_t run = region.empty() ? 1 : region.back().size(), inner = view_strides.empty() ? 1 : view_strides.back();
  if (inner == 1 && view.size() >= 2) {
    // Dense runs: the rows of the next-to-last dim go in one tight loop per outer index, so a
    // channels-last Concat (a run of a pixel's channels per pixel) pays the odometer per row
    // of pixels, not per pixel.
    const size_t d = view.size() - 2;
    const Shape outer(view.begin(), view.begin() + static_cast<std::ptrdiff_t>(d + 1));
    const Region outer_region(region.begin(), region.begin() + static_cast<std::ptrdiff_t>(d + 1));
    const int64_t rows = region[d].size(), width = view.back(), first = region.back().begin;
    const size_t bytes = static_cast<size_t>(run) * elem;
    const int64_t src_step = view_strides[d];  // negative for a Slice with a negative step
    for_each_row(outer, outer_region, [&](int64_t offset, const std::vector<int64_t>& index) {
      int64_t src = base + first;
      for (size_t k = 0; k <= d; ++k) src += index[k] * view_strides[k];
      const int64_t to = offset * width + first;
      for (int64_t i = 0; i < rows; ++i)
        std::memcpy(y.raw() + static_cast<size_t>(to + i * width) * elem,
                    x.raw() + static_cast<size_t>(src + i * src_step) * elem, bytes);
    });
    return;
  }
  for_each_row(view, region, [&](int64_t offset, const std::vector<int64_t>& index) {
    int64_t src = base;
    for (size_t d = 0; d < index.size(); ++d) src += index[d] * view_strides[d];
    copy_strided(y.raw() + static_cast<size_t>(offset) * elem, x.raw() + static_cast<size_t>(src) * elem, run, inner, elem);
  });
}

// ---- Transpose: output dim j is input dim perm[j].

std::vector<int64_t> perm_of(const Node& node, size_t rank) {
  std::vector<int64_t> perm(rank);
  std::iota(perm.rbegin(), perm.rend(), 0);
  if (node.has_attr("perm")) perm = node.attr_ints("perm");
  std::vector<bool> seen(rank, false);
  bool ok = perm.size() == rank;
  for (int64_t p : perm) {
    ok = ok && p >= 0 && p < static_cast<int64_t>(rank) && !seen[static_cast<size_t>(p)];
    if (ok) seen[static_cast<size_t>(p)] = true;
  }
  if (!ok) throw Error(node.describe() + ": perm is not a permutation of the " + std::to_string(rank) + " dims");
  return perm;
}

void transpose_needs(const Node& node, std::span<const ValueInfo> in, std::span<const ValueInfo>, const Region& out_region,
                     std::span<Region> in_regions) {
  std::vector<int64_t> perm = perm_of(node, in[0].shape.size());
  Region x(perm.size());
  for (size_t j = 0; j < perm.size(); ++j) x[static_cast<size_t>(perm[j])] = out_region[j];
  in_regions[0] = x;
}

// A 4-D transpose of 1-byte or 4-byte elements (the layout changes around channels-last and
// channel-blocked ops, after merged_dims). strides: per output dim, the input's stride;
// out_strides: the output's. Where one output dim is read contiguously and the last dim
// (written contiguously) is not, both at least kBlock long, the two are walked in kBlock x
// kBlock blocks, so each block reads kBlock short contiguous runs and writes kBlock (NCHW <->
// NHWC with many channels: a per-element gather down the channels otherwise). Else one tight
// loop along the longer of the two.
constexpr int64_t kBlock = 16;

template <class T>
void transpose_4d(const T* src, T* dst, const std::array<int64_t, 4>& strides, const std::array<int64_t, 4>& out_strides,
                  const Region& r) {
  size_t read = 4;  // the output dim read contiguously, if any but the last
  for (size_t j = 0; j < 3; ++j)
    if (strides[j] == 1) read = j;
  if (read < 3 && strides[3] != 1 && r[read].size() >= kBlock && r[3].size() >= kBlock) {
    std::array<size_t, 2> outer{};
    for (size_t j = 0, k = 0; j < 3; ++j)
      if (j != read) outer[k++] = j;
    const int64_t s3 = strides[3], dr = out_strides[read];
    for (int64_t a = r[outer[0]].begin; a < r[outer[0]].end; ++a)
      for (int64_t b = r[outer[1]].begin; b < r[outer[1]].end; ++b) {
        const T* from = src + a * strides[outer[0]] + b * strides[outer[1]];
        T* to = dst + a * out_strides[outer[0]] + b * out_strides[outer[1]];
        if constexpr (sizeof(T) == 4) {  // the SIMD block transpose (kernels/transpose.h)
          kernels::transpose_4byte(from + r[3].begin * s3 + r[read].begin, static_cast<size_t>(s3),
                                   static_cast<size_t>(r[3].size()), static_cast<size_t>(r[read].size()),
                                   to + r[read].begin * dr + r[3].begin, static_cast<size_t>(dr));
          continue;
        }
        for (int64_t i0 = r[read].begin; i0 < r[read].end; i0 += kBlock)
          for (int64_t c0 = r[3].begin; c0 < r[3].end; c0 += kBlock) {
            const int64_t i1 = std::min(i0 + kBlock, r[read].end), c1 = std::min(c0 + kBlock, r[3].end);
            for (int64_t i = i0; i < i1; ++i)
              for (int64_t c = c0; c < c1; ++c) to[i * dr + c] = from[i + c * s3];
          }
      }
    return;
  }
  size_t inner = 3;
  for (size_t j = 0; j < 3; ++j)
    if (strides[j] == 1 && r[j].size() > r[3].size()) inner = j;
  std::array<size_t, 3> outer{};
  for (size_t j = 0, k = 0; j < 4; ++j)
    if (j != inner) outer[k++] = j;
  const int64_t n = r[inner].size(), si = strides[inner], di = out_strides[inner];
  for (int64_t a = r[outer[0]].begin; a < r[outer[0]].end; ++a)
    for (int64_t b = r[outer[1]].begin; b < r[outer[1]].end; ++b)
      for (int64_t c = r[outer[2]].begin; c < r[outer[2]].end; ++c) {
        const int64_t start = r[inner].begin;
        const T* from = src + a * strides[outer[0]] + b * strides[outer[1]] + c * strides[outer[2]] + start * si;
        T* to = dst + a * out_strides[outer[0]] + b * out_strides[outer[1]] + c * out_strides[outer[2]] + start * di;
        for (int64_t i = 0; i < n; ++i) to[i * di] = from[i * si];
      }
}

// A tile of a transpose as at most 4 dims, or false where it needs more: output dims of size
// 1 dropped, and an output dim merged into the one before it where the input holds the two
// adjacent and in the same order (one run of the input) and the tile's region stays one range
// (the inner dim whole, or one index of the outer). The channel-blocked layout's 5-D reorders
// ([N, H, W, C/b, b] -> [N, C/b, H, W, b] and back from NCHW) so run as 4-D transposes, not
// one element at a time.
struct MergedDims {
  std::array<int64_t, 4> strides{}, out_strides{};
  Region region = Region(4, Range{0, 1});
};

bool merged_dims(const Shape& out_shape, const std::vector<int64_t>& strides, const Region& r, MergedDims& m) {
  const std::vector<int64_t> out_strides = strides_of(out_shape);
  std::vector<int64_t> size, stride, out_stride;
  Region region;
  for (size_t j = 0; j < out_shape.size(); ++j) {
    if (out_shape[j] == 1) continue;
    const int64_t n = out_shape[j];
    if (!size.empty() && stride.back() == strides[j] * n &&
        ((r[j].begin == 0 && r[j].end == n) || region.back().size() == 1)) {
      region.back() = {region.back().begin * n + r[j].begin, (region.back().end - 1) * n + r[j].end};
      size.back() *= n;
      stride.back() = strides[j];
      out_stride.back() = out_strides[j];
      continue;
    }
    size.push_back(n);
    stride.push_back(strides[j]);
    out_stride.push_back(out_strides[j]);
    region.push_back(r[j]);
  }
  if (size.size() > 4) return false;
  const size_t pad = 4 - size.size();  // leading dims of size 1
  for (size_t j = 0; j < size.size(); ++j) {
    m.strides[pad + j] = stride[j];
    m.out_strides[pad + j] = out_stride[j];
    m.region[pad + j] = region[j];
  }
  return true;
}

void transpose_run(const Node& node, std::span<const Tensor* const> in, std::span<Tensor* const> out, const Region& r, const void*, TileScratch&) {
  std::vector<int64_t> perm = perm_of(node, in[0]->shape().size());
  std::vector<int64_t> in_strides = strides_of(in[0]->shape()), strides(perm.size());
  for (size_t j = 0; j < perm.size(); ++j) strides[j] = in_strides[static_cast<size_t>(perm[j])];
  const size_t element = dtype_size(in[0]->dtype());
  check_region(node, r, out[0]->shape());
  for (const Range& range : r)
    if (range.size() <= 0) return;
  // A last dim the input holds in order too (a block's 16 channels) is copied as runs, which
  // gather_region does; the 4-D walk is for the others, which it would gather one by one.
  MergedDims m;
  if ((element == 1 || element == 4) && merged_dims(out[0]->shape(), strides, r, m) && m.strides[3] != 1) {
    if (element == 1)
      return transpose_4d(reinterpret_cast<const uint8_t*>(in[0]->raw()), reinterpret_cast<uint8_t*>(out[0]->raw()),
                          m.strides, m.out_strides, m.region);
    return transpose_4d(reinterpret_cast<const uint32_t*>(in[0]->raw()), reinterpret_cast<uint32_t*>(out[0]->raw()),
                        m.strides, m.out_strides, m.region);
  }
  gather_region(node, *in[0], *out[0], r, 0, strides);
}

// ---- Concat: input k fills [offset_k, offset_k + its length) of the axis.

size_t concat_axis(const Node& node, size_t rank) {
  return static_cast<size_t>(normalize_axis(node, node.attr_int("axis", 0), static_cast<int64_t>(rank)));
}

// The part of `r` that input k provides, in the input's coordinates; empty when none.
Region concat_part(const Region& r, size_t axis, int64_t offset, int64_t length) {
  Range a = r[axis];
  int64_t begin = std::max(a.begin, offset), end = std::min(a.end, offset + length);
  if (begin >= end) return {};
  Region part = r;
  part[axis] = {begin - offset, end - offset};
  return part;
}

void concat_needs(const Node& node, std::span<const ValueInfo> in, std::span<const ValueInfo>, const Region& out_region,
                  std::span<Region> in_regions) {
  size_t axis = concat_axis(node, out_region.size());
  int64_t offset = 0;
  for (size_t k = 0; k < in.size(); ++k) {
    in_regions[k] = concat_part(out_region, axis, offset, in[k].shape[axis]);
    offset += in[k].shape[axis];
  }
}

void concat_run(const Node& node, std::span<const Tensor* const> in, std::span<Tensor* const> out, const Region& r, const void*, TileScratch&) {
  Tensor& y = *out[0];
  check_region(node, r, y.shape());
  size_t axis = concat_axis(node, r.size());
  int64_t offset = 0;
  for (const Tensor* x : in) {
    const int64_t length = x->dim(static_cast<int64_t>(axis));
    Region part = concat_part(r, axis, offset, length);
    if (!part.empty()) {
      Region out_part = part;
      out_part[axis] = {part[axis].begin + offset, part[axis].end + offset};
      // Output index i along the axis reads input index i - offset.
      std::vector<int64_t> strides = strides_of(x->shape());
      gather_region(node, *x, y, out_part, -offset * strides[axis], strides);
    }
    offset += length;
  }
}

// ---- Slice: output index i along dim d reads input index start[d] + i * step[d].

struct SliceDims {
  std::vector<int64_t> start, step;
};

// Starts, ends, axes and steps as the spec defines them (attributes before opset 10).
// nullopt-like: false when a constant input is not known here.
bool slice_dims(const Node& node, std::span<const ValueInfo> in, SliceDims& s) {
  const Shape& shape = in[0].shape;
  std::vector<int64_t> starts, ends, axes, steps;
  if (node.opset < 10) {
    starts = node.attr_ints("starts");
    ends = node.attr_ints("ends");
    axes = node.attr_ints("axes");
  } else {
    for (size_t i = 1; i < in.size(); ++i)
      if (in[i].present && !in[i].data) return false;
    if (in.size() < 3) throw Error(node.describe() + ": Slice needs starts and ends");
    starts = in[1].data->to_i64();
    ends = in[2].data->to_i64();
    if (has_input(in, 3)) axes = in[3].data->to_i64();
    if (has_input(in, 4)) steps = in[4].data->to_i64();
  }
  if (axes.empty() && !(node.opset >= 10 && has_input(in, 3))) {
    axes.resize(starts.size());
    std::iota(axes.begin(), axes.end(), 0);
  }
  if (steps.empty() && !(node.opset >= 10 && has_input(in, 4))) steps.assign(starts.size(), 1);
  if (ends.size() != starts.size() || axes.size() != starts.size() || steps.size() != starts.size())
    throw Error(node.describe() + ": starts, ends, axes and steps must have the same length");
  s.start.assign(shape.size(), 0);
  s.step.assign(shape.size(), 1);
  for (size_t k = 0; k < starts.size(); ++k) {
    auto axis = static_cast<size_t>(normalize_axis(node, axes[k], static_cast<int64_t>(shape.size())));
    const int64_t dim = shape[axis], step = steps[k];
    if (step == 0) throw Error(node.describe() + ": steps must not be zero");
    int64_t start = starts[k] < 0 ? starts[k] + dim : starts[k];
    start = step > 0 ? std::clamp<int64_t>(start, 0, dim) : std::clamp<int64_t>(start, 0, std::max<int64_t>(dim - 1, 0));
    s.start[axis] = start;
    s.step[axis] = step;
  }
  return true;
}

std::vector<int64_t> slice_cuttable(const Node& node, std::span<const ValueInfo> in, std::span<const ValueInfo> out) {
  SliceDims s;
  return slice_dims(node, in, s) ? all_cuttable(out[0].shape) : none_cuttable(out[0].shape);
}

void slice_needs(const Node& node, std::span<const ValueInfo> in, std::span<const ValueInfo>, const Region& out_region,
                 std::span<Region> in_regions) {
  for (size_t i = 1; i < in.size(); ++i) in_regions[i] = in[i].present ? full_region(in[i].shape) : Region{};
  SliceDims s;
  if (!slice_dims(node, in, s)) {
    in_regions[0] = full_region(in[0].shape);
    return;
  }
  Region x(out_region.size());
  for (size_t d = 0; d < x.size(); ++d) {
    const Range& o = out_region[d];
    if (o.size() <= 0) return void(in_regions[0] = {});
    int64_t first = s.start[d] + o.begin * s.step[d], last = s.start[d] + (o.end - 1) * s.step[d];
    x[d] = {std::min(first, last), std::max(first, last) + 1};
  }
  in_regions[0] = x;
}

void slice_run(const Node& node, std::span<const Tensor* const> in, std::span<Tensor* const> out, const Region& r, const void*, TileScratch&) {
  std::vector<ValueInfo> infos = infos_of_tensors(in);
  SliceDims s;
  if (!slice_dims(node, infos, s)) throw Error(node.describe() + ": Slice inputs are missing");
  std::vector<int64_t> in_strides = strides_of(in[0]->shape()), strides(in_strides.size());
  int64_t base = 0;
  for (size_t d = 0; d < strides.size(); ++d) {
    strides[d] = in_strides[d] * s.step[d];
    base += s.start[d] * in_strides[d];
  }
  gather_region(node, *in[0], *out[0], r, base, strides);
}

}  // namespace movement_rule

void add_movement_rules(RuleTable& t) {
  using namespace movement_rule;
  t["Transpose"] = {cut_anywhere, transpose_needs, transpose_run};
  t["Concat"] = {cut_anywhere, concat_needs, concat_run};
  t["Slice"] = {slice_cuttable, slice_needs, slice_run};
}

}  // namespace grove::tiling
