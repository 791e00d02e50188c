// Operators that pick elements by position: Slice, Gather, GatherElements and GatherND.
#include <algorithm>
#include <cstring>
#include <numeric>

#include "ops/byte_copy.h"
#include "ops/op.h"
#include "ops/op_util.h"

namespace grove {
namespace {

// ---- Slice ----

// Output dim d reads input index start[d] + i * step[d].
struct SlicePlan {
  Shape shape;
  std::vector<int64_t> start, step;
};

// Starts, ends, axes and steps: attributes before opset 10, inputs from 10 on.
struct SliceArgs {
  std::vector<int64_t> starts, ends, axes, steps;
};

SliceArgs slice_args(const Node& node, std::span<const ValueInfo> in, size_t rank) {
  SliceArgs a;
  if (node.opset < 10) {
    require_inputs(node, in.size(), 1, 1);
    a.starts = node.attr_ints("starts");
    a.ends = node.attr_ints("ends");
    a.axes = node.attr_ints("axes");
  } else {
    require_inputs(node, in.size(), 3, 5);
    a.starts = constant_ints(node, in, 1, "starts");
    a.ends = constant_ints(node, in, 2, "ends");
    if (has_input(in, 3)) a.axes = constant_ints(node, in, 3, "axes");
    if (has_input(in, 4)) a.steps = constant_ints(node, in, 4, "steps");
  }
  size_t n = a.starts.size();
  if (a.axes.empty() && !(node.opset >= 10 && has_input(in, 3))) {
    if (n > rank) throw Error(node.describe() + ": more starts than dims");
    a.axes.resize(n);
    std::iota(a.axes.begin(), a.axes.end(), 0);
  }
  if (a.steps.empty() && !(node.opset >= 10 && has_input(in, 4))) a.steps.assign(n, 1);
  if (a.ends.size() != n || a.axes.size() != n || a.steps.size() != n)
    throw Error(node.describe() + ": starts, ends, axes and steps must have the same length");
  return a;
}

SlicePlan slice_plan(const Node& node, std::span<const ValueInfo> in) {
  const Shape& s = in[0].shape;
  SliceArgs a = slice_args(node, in, s.size());
  SlicePlan plan{s, std::vector<int64_t>(s.size(), 0), std::vector<int64_t>(s.size(), 1)};
  std::vector<bool> seen(s.size(), false);
  for (size_t k = 0; k < a.starts.size(); ++k) {
    size_t axis = static_cast<size_t>(normalize_axis(node, a.axes[k], static_cast<int64_t>(s.size())));
    if (seen[axis]) throw Error(node.describe() + ": axis " + std::to_string(a.axes[k]) + " is repeated");
    seen[axis] = true;
    int64_t dim = s[axis], step = a.steps[k];
    if (step == 0) throw Error(node.describe() + ": steps must not be zero");
    int64_t start = a.starts[k] < 0 ? a.starts[k] + dim : a.starts[k];
    int64_t end = a.ends[k] < 0 ? a.ends[k] + dim : a.ends[k];
    int64_t length = 0;
    if (step > 0) {
      start = std::clamp(start, int64_t{0}, dim);
      end = std::clamp(end, int64_t{0}, dim);
      if (end > start) length = (end - start - 1) / step + 1;
    } else if (dim > 0) {
      // Backwards, the end is exclusive and may be -1: "before index 0".
      start = std::clamp(start, int64_t{0}, dim - 1);
      end = std::clamp(end, int64_t{-1}, dim - 1);
      if (start > end) length = (start - end - 1) / -step + 1;
    }
    plan.shape[axis] = length;
    plan.start[axis] = length ? start : 0;
    plan.step[axis] = step;
  }
  return plan;
}

void slice_infer(const Node& node, std::span<const ValueInfo> in, std::span<ValueInfo> out) {
  require_inputs(node, in.size(), 1, 5);
  element_size(node, in[0].dtype);
  out[0] = ValueInfo{in[0].dtype, slice_plan(node, in).shape};
}

void slice_reference(const Node& node, std::span<const Tensor* const> in, std::span<Tensor* const> out) {
  SlicePlan plan = slice_plan(node, infos_of(in));
  std::vector<int64_t> dims(plan.shape.size());
  std::iota(dims.begin(), dims.end(), 0);
  gather_by_offsets(*in[0], *out[0], strided_offsets(in[0]->shape(), plan.shape, dims, plan.start, plan.step));
}

// ---- Gather: out[outer, indices..., inner] = data[outer, index, inner] ----

void check_index_dtype(const Node& node, DType d) {
  if (d != DType::i64 && d != DType::i32)
    throw Error(node.describe() + ": indices must be int64 or int32, got " + std::string(dtype_name(d)));
}

// A possibly negative index into a dim of `size`, checked.
int64_t resolve_index(const Node& node, int64_t index, int64_t size) {
  int64_t i = index < 0 ? index + size : index;
  if (i < 0 || i >= size)
    throw Error(node.describe() + ": index " + std::to_string(index) + " is out of range for a dim of " +
                std::to_string(size));
  return i;
}

void gather_infer(const Node& node, std::span<const ValueInfo> in, std::span<ValueInfo> out) {
  require_inputs(node, in.size(), 2, 2);
  element_size(node, in[0].dtype);
  check_index_dtype(node, in[1].dtype);
  const Shape& s = in[0].shape;
  size_t axis = static_cast<size_t>(normalize_axis(node, node.attr_int("axis", 0), static_cast<int64_t>(s.size())));
  Shape shape(s.begin(), s.begin() + static_cast<std::ptrdiff_t>(axis));
  shape.insert(shape.end(), in[1].shape.begin(), in[1].shape.end());
  shape.insert(shape.end(), s.begin() + static_cast<std::ptrdiff_t>(axis) + 1, s.end());
  out[0] = ValueInfo{in[0].dtype, shape};
}

void gather_reference(const Node& node, std::span<const Tensor* const> in, std::span<Tensor* const> out) {
  const Tensor& x = *in[0];
  const Shape& s = x.shape();
  size_t axis = static_cast<size_t>(normalize_axis(node, node.attr_int("axis", 0), x.rank()));
  std::vector<int64_t> indices = in[1]->to_i64();
  int64_t outer = 1, dim = s[axis], inner = 1;
  for (size_t d = 0; d < axis; ++d) outer *= s[d];
  for (size_t d = axis + 1; d < s.size(); ++d) inner *= s[d];
  for (int64_t& i : indices) i = resolve_index(node, i, dim);
  size_t block = static_cast<size_t>(inner) * dtype_size(x.dtype());
  std::byte* dst = out[0]->raw();
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t i : indices) {
      std::memcpy(dst, x.raw() + static_cast<size_t>(o * dim + i) * block, block);
      dst += block;
    }
}

// ---- GatherElements: out[i, j, k] = data[indices[i, j, k], j, k] for axis 0 ----

void gather_elements_infer(const Node& node, std::span<const ValueInfo> in, std::span<ValueInfo> out) {
  require_inputs(node, in.size(), 2, 2);
  element_size(node, in[0].dtype);
  check_index_dtype(node, in[1].dtype);
  const Shape& s = in[0].shape;
  const Shape& is = in[1].shape;
  size_t axis = static_cast<size_t>(normalize_axis(node, node.attr_int("axis", 0), static_cast<int64_t>(s.size())));
  if (is.size() != s.size()) throw Error(node.describe() + ": indices must have the rank of data");
  for (size_t d = 0; d < s.size(); ++d)
    if (d != axis && is[d] > s[d])
      throw Error(node.describe() + ": indices shape " + shape_str(is) + " exceeds data shape " + shape_str(s));
  out[0] = ValueInfo{in[0].dtype, is};
}

void gather_elements_reference(const Node& node, std::span<const Tensor* const> in, std::span<Tensor* const> out) {
  const Tensor& x = *in[0];
  const Shape& is = in[1]->shape();
  size_t axis = static_cast<size_t>(normalize_axis(node, node.attr_int("axis", 0), x.rank()));
  std::vector<int64_t> indices = in[1]->to_i64();
  std::vector<int64_t> strides = strides_of(x.shape());
  size_t elem = dtype_size(x.dtype());
  std::vector<int64_t> pos(is.size(), 0);  // multi-index into indices, row-major
  for (size_t n = 0; n < indices.size(); ++n) {
    int64_t offset = 0;
    for (size_t d = 0; d < is.size(); ++d)
      offset += (d == axis ? resolve_index(node, indices[n], x.dim(static_cast<int64_t>(d))) : pos[d]) * strides[d];
    std::memcpy(out[0]->raw() + n * elem, x.raw() + static_cast<size_t>(offset) * elem, elem);
    for (size_t d = is.size(); d-- > 0;) {
      if (++pos[d] < is[d]) break;
      pos[d] = 0;
    }
  }
}

// ---- GatherND: the last dim of indices addresses a slice of data, after batch_dims shared dims ----

struct GatherNdPlan {
  int64_t batch_dims, depth;  // depth: how many data dims one index tuple addresses
  Shape shape;
};

GatherNdPlan gather_nd_plan(const Node& node, std::span<const ValueInfo> in) {
  require_inputs(node, in.size(), 2, 2);
  element_size(node, in[0].dtype);
  if (in[1].dtype != DType::i64) throw Error(node.describe() + ": indices must be int64");
  const Shape& s = in[0].shape;
  const Shape& is = in[1].shape;
  int64_t b = node.attr_int("batch_dims", 0);
  int64_t r = static_cast<int64_t>(s.size()), q = static_cast<int64_t>(is.size());
  if (r < 1 || q < 1 || b < 0 || b >= std::min(r, q)) throw Error(node.describe() + ": invalid ranks or batch_dims");
  int64_t k = is.back();
  if (k < 1 || k > r - b) throw Error(node.describe() + ": the last indices dim must be in [1, rank - batch_dims]");
  for (int64_t d = 0; d < b; ++d)
    if (s[static_cast<size_t>(d)] != is[static_cast<size_t>(d)])
      throw Error(node.describe() + ": batch dims of data and indices differ");
  Shape shape(is.begin(), is.end() - 1);
  shape.insert(shape.end(), s.begin() + b + k, s.end());
  return {b, k, shape};
}

void gather_nd_infer(const Node& node, std::span<const ValueInfo> in, std::span<ValueInfo> out) {
  out[0] = ValueInfo{in[0].dtype, gather_nd_plan(node, in).shape};
}

void gather_nd_reference(const Node& node, std::span<const Tensor* const> in, std::span<Tensor* const> out) {
  GatherNdPlan p = gather_nd_plan(node, infos_of(in));
  const Tensor& x = *in[0];
  const Shape& s = x.shape();
  std::vector<int64_t> strides = strides_of(s);
  std::vector<int64_t> indices = in[1]->to_i64();
  int64_t batches = 1;
  for (int64_t d = 0; d < p.batch_dims; ++d) batches *= s[static_cast<size_t>(d)];
  int64_t tuples = static_cast<int64_t>(indices.size()) / p.depth;  // over all batches
  int64_t per_batch = batches ? tuples / batches : 0;
  size_t elem = dtype_size(x.dtype());
  // The slice one tuple copies: every dim after the addressed ones.
  size_t block = static_cast<size_t>(strides[static_cast<size_t>(p.batch_dims + p.depth - 1)]) * elem;
  int64_t batch_stride = p.batch_dims ? strides[static_cast<size_t>(p.batch_dims - 1)] : 0;
  std::byte* dst = out[0]->raw();
  for (int64_t t = 0; t < tuples; ++t) {
    int64_t offset = (per_batch ? t / per_batch : 0) * batch_stride;
    for (int64_t j = 0; j < p.depth; ++j) {
      size_t d = static_cast<size_t>(p.batch_dims + j);
      offset += resolve_index(node, indices[static_cast<size_t>(t * p.depth + j)], s[d]) * strides[d];
    }
    std::memcpy(dst, x.raw() + static_cast<size_t>(offset) * elem, block);
    dst += block;
  }
}

}  // namespace

void register_slice_ops(OpRegistry& r) {
  r.add("Slice", {.infer = slice_infer, .reference = slice_reference, .cost = OpCost::moves_data});
  r.add("Gather", {.infer = gather_infer, .reference = gather_reference, .cost = OpCost::moves_data});
  r.add("GatherElements", {.infer = gather_elements_infer, .reference = gather_elements_reference, .cost = OpCost::moves_data});
  r.add("GatherND", {.infer = gather_nd_infer, .reference = gather_nd_reference, .cost = OpCost::moves_data});
}

}  // namespace grove
