// Compress, Unique and ReverseSequence: ops that pick or reorder whole slices of their input.
// Compress and Unique make outputs whose sizes depend on input values, so their `infer` needs
// the data (DataDependentShape otherwise, as NonZero). Compress and ReverseSequence copy
// elements as bytes, so they serve every dtype; Unique compares values, so it is typed.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <numeric>

#include "ops/byte_copy.h"
#include "ops/op_util.h"

namespace grove {
namespace {

// A tensor seen as [outer, axis, inner] around one axis (axis absent: the flattened tensor).
struct ReduceAxisView {
  int64_t outer = 1, len = 1, inner = 1;
  int64_t axis = -1;  // -1: flattened
};

ReduceAxisView view_around(const Node& node, const Shape& shape, bool has_axis, int64_t axis_attr) {
  ReduceAxisView v;
  if (!has_axis) {
    v.len = checked_numel(node, shape);
    return v;
  }
  int64_t rank = static_cast<int64_t>(shape.size());
  if (rank == 0) throw Error("an axis is given but the input is a scalar");
  v.axis = normalize_axis(node, axis_attr, rank);
  // Checked: an empty tensor's other dims may be huge enough to overflow their product.
  for (int64_t d = 0; d < rank; ++d) {
    if (d < v.axis) v.outer = checked_mul(v.outer, shape[d]);
    else if (d > v.axis) v.inner = checked_mul(v.inner, shape[d]);
  }
  v.len = shape[v.axis];
  return v;
}

// ---- Compress ----

struct CompressPlan {
  ReduceAxisView view;
  std::vector<int64_t> kept;  // indices along the axis whose condition is true
  Shape out_shape;
};

CompressPlan plan_compress(const Node& node, const Shape& x_shape, const Tensor& condition) {
  if (condition.dtype() != DType::boolean)
    throw Error("condition must be bool, got " + std::string(dtype_name(condition.dtype())));
  if (condition.rank() != 1) throw Error("condition must be 1-D, got shape " + shape_str(condition.shape()));
  CompressPlan plan;
  plan.view = view_around(node, x_shape, node.has_attr("axis"), node.attr_int("axis", 0));
  // A shorter condition selects among the first entries only; a longer one names entries that do not exist.
  if (condition.numel() > plan.view.len)
    throw Error("condition has " + std::to_string(condition.numel()) + " entries but the axis has only " +
                std::to_string(plan.view.len));
  const bool* keep = condition.data<bool>();
  for (int64_t i = 0; i < condition.numel(); ++i)
    if (keep[i]) plan.kept.push_back(i);
  int64_t count = static_cast<int64_t>(plan.kept.size());
  if (plan.view.axis < 0) {
    plan.out_shape = {count};
  } else {
    plan.out_shape = x_shape;
    plan.out_shape[plan.view.axis] = count;
  }
  return plan;
}

void compress_infer(const Node& node, std::span<const ValueInfo> in, std::span<ValueInfo> out) {
  require_inputs(node, in.size(), 2, 2);
  element_size(node, in[0].dtype);
  if (!in[1].data)
    throw DataDependentShape("Compress's output size depends on the condition's values, known only at run time");
  out[0] = ValueInfo{in[0].dtype, plan_compress(node, in[0].shape, *in[1].data).out_shape};
}

void compress_reference(const Node& node, std::span<const Tensor* const> in, std::span<Tensor* const> out) {
  CompressPlan plan = plan_compress(node, in[0]->shape(), *in[1]);
  if (out[0]->numel() == 0) return;  // its outer dims may still be huge
  const size_t slice = static_cast<size_t>(plan.view.inner) * element_size(node, in[0]->dtype());
  const std::byte* xs = in[0]->raw();
  std::byte* ys = out[0]->raw();
  for (int64_t o = 0; o < plan.view.outer; ++o)
    for (int64_t k : plan.kept) {
      std::memcpy(ys, xs + static_cast<size_t>(o * plan.view.len + k) * slice, slice);
      ys += slice;
    }
}

// ---- Unique ----

// A strict weak order on values that puts every NaN after all numbers and treats NaNs as
// equal, so sorting hostile float data stays well defined.
template <class T>
bool value_less(T a, T b) {
  if constexpr (std::is_floating_point_v<T>) {
    bool a_nan = std::isnan(a), b_nan = std::isnan(b);
    if (a_nan || b_nan) return !a_nan && b_nan;
  }
  return a < b;
}

struct UniqueResult {
  std::vector<int64_t> first;    // per unique slice, in output order: its first index in the input
  std::vector<int64_t> inverse;  // per input slice: the output slice it equals
  std::vector<int64_t> counts;   // per unique slice: how often it occurs
};

template <class T>
UniqueResult unique_slices(const T* xs, const ReduceAxisView& v, bool sorted) {
  // Slice i holds, in order, the elements xs[(o * len + i) * inner + j] for every o, j.
  auto compare = [&](int64_t a, int64_t b) {  // -1, 0, 1 lexicographically
    for (int64_t o = 0; o < v.outer; ++o)
      for (int64_t j = 0; j < v.inner; ++j) {
        T x = xs[(o * v.len + a) * v.inner + j], y = xs[(o * v.len + b) * v.inner + j];
        if (value_less(x, y)) return -1;
        if (value_less(y, x)) return 1;
      }
    return 0;
  };
  std::vector<int64_t> order(static_cast<size_t>(v.len));
  std::iota(order.begin(), order.end(), 0);
  // Stable, so the first slice of each run of equal slices is its first occurrence.
  std::stable_sort(order.begin(), order.end(), [&](int64_t a, int64_t b) { return compare(a, b) < 0; });

  std::vector<int64_t> group_of(order.size());
  std::vector<int64_t> group_first, group_count;
  for (size_t k = 0; k < order.size(); ++k) {
    if (k == 0 || compare(order[k - 1], order[k]) != 0) {
      group_first.push_back(order[k]);
      group_count.push_back(0);
    }
    group_of[static_cast<size_t>(order[k])] = static_cast<int64_t>(group_first.size()) - 1;
    ++group_count.back();
  }
  // Output position of each group: sorted keeps the value order, unsorted the order of first occurrence.
  std::vector<int64_t> position(group_first.size());
  std::iota(position.begin(), position.end(), 0);
  if (!sorted) {
    std::vector<int64_t> by_first(group_first.size());
    std::iota(by_first.begin(), by_first.end(), 0);
    std::sort(by_first.begin(), by_first.end(),
              [&](int64_t a, int64_t b) { return group_first[static_cast<size_t>(a)] < group_first[static_cast<size_t>(b)]; });
    for (size_t p = 0; p < by_first.size(); ++p) position[static_cast<size_t>(by_first[p])] = static_cast<int64_t>(p);
  }
  UniqueResult r;
  r.first.resize(group_first.size());
  r.counts.resize(group_first.size());
  for (size_t g = 0; g < group_first.size(); ++g) {
    r.first[static_cast<size_t>(position[g])] = group_first[g];
    r.counts[static_cast<size_t>(position[g])] = group_count[g];
  }
  r.inverse.resize(order.size());
  for (size_t i = 0; i < order.size(); ++i) r.inverse[i] = position[static_cast<size_t>(group_of[i])];
  return r;
}

ReduceAxisView unique_view(const Node& node, const Shape& shape) {
  return view_around(node, shape, node.has_attr("axis"), node.attr_int("axis", 0));
}

UniqueResult unique_of(const Node& node, const Tensor& x) {
  ReduceAxisView v = unique_view(node, x.shape());
  bool sorted = node.attr_int("sorted", 1) != 0;
  return visit_dtype(x.dtype(), [&](auto tag) {
    using T = decltype(tag);
    return unique_slices<T>(x.data<T>(), v, sorted);
  });
}

void unique_infer(const Node& node, std::span<const ValueInfo> in, std::span<ValueInfo> out) {
  require_inputs(node, in.size(), 1, 1);
  visit_dtype(in[0].dtype, [](auto) {});
  if (!in[0].data)
    throw DataDependentShape("Unique's output size depends on the input's values, known only at run time");
  ReduceAxisView v = unique_view(node, in[0].shape);
  // Slices of no elements are all equal: one unique slice, found without a table per slice
  // (an empty tensor's slice count may be huge).
  int64_t count = checked_mul(v.outer, v.inner) == 0 ? std::min<int64_t>(v.len, 1)
                                                      : static_cast<int64_t>(unique_of(node, *in[0].data).first.size());
  Shape y_shape = {count};
  if (v.axis >= 0) {
    y_shape = in[0].shape;
    y_shape[v.axis] = count;
  }
  out[0] = ValueInfo{in[0].dtype, y_shape};
  if (out.size() > 1) out[1] = ValueInfo{DType::i64, {count}};
  if (out.size() > 2) out[2] = ValueInfo{DType::i64, {v.len}};
  if (out.size() > 3) out[3] = ValueInfo{DType::i64, {count}};
}

void unique_reference(const Node& node, std::span<const Tensor* const> in, std::span<Tensor* const> out) {
  const Tensor& x = *in[0];
  ReduceAxisView v = unique_view(node, x.shape());
  if (checked_mul(v.outer, v.inner) == 0) {  // every slice is empty, so all are equal (see unique_infer)
    if (v.len == 0) return;
    if (out.size() > 1 && out[1]) out[1]->data<int64_t>()[0] = 0;
    if (out.size() > 2 && out[2]) std::fill_n(out[2]->data<int64_t>(), out[2]->numel(), 0);
    if (out.size() > 3 && out[3]) out[3]->data<int64_t>()[0] = v.len;
    return;
  }
  UniqueResult r = unique_of(node, x);
  const size_t slice = static_cast<size_t>(v.inner) * element_size(node, x.dtype());
  const std::byte* xs = x.raw();
  std::byte* ys = out[0]->raw();
  const int64_t count = static_cast<int64_t>(r.first.size());
  for (int64_t o = 0; o < v.outer; ++o)
    for (int64_t k = 0; k < count; ++k)
      std::memcpy(ys + static_cast<size_t>(o * count + k) * slice,
                  xs + static_cast<size_t>(o * v.len + r.first[static_cast<size_t>(k)]) * slice, slice);
  const std::vector<int64_t>* lists[] = {&r.first, &r.inverse, &r.counts};
  for (size_t i = 1; i < out.size() && i < 4; ++i)
    if (out[i]) std::copy(lists[i - 1]->begin(), lists[i - 1]->end(), out[i]->data<int64_t>());
}

// ---- ReverseSequence ----

struct ReverseAxes {
  int64_t batch = 1, time = 0;
};

ReverseAxes reverse_axes(const Node& node, const Shape& x_shape, const Shape& lens_shape) {
  ReverseAxes a{node.attr_int("batch_axis", 1), node.attr_int("time_axis", 0)};
  if (!((a.batch == 0 && a.time == 1) || (a.batch == 1 && a.time == 0)))
    throw Error("batch_axis and time_axis must be 0 and 1 in some order, got " + std::to_string(a.batch) + " and " +
                std::to_string(a.time));
  if (x_shape.size() < 2) throw Error("input must have rank 2 or more, got shape " + shape_str(x_shape));
  if (lens_shape.size() != 1 || lens_shape[0] != x_shape[static_cast<size_t>(a.batch)])
    throw Error("sequence_lens must have shape [" + std::to_string(x_shape[static_cast<size_t>(a.batch)]) + "], got " +
                shape_str(lens_shape));
  return a;
}

void reverse_sequence_infer(const Node& node, std::span<const ValueInfo> in, std::span<ValueInfo> out) {
  require_inputs(node, in.size(), 2, 2);
  element_size(node, in[0].dtype);
  if (in[1].dtype != DType::i64) throw Error("sequence_lens must be int64, got " + std::string(dtype_name(in[1].dtype)));
  reverse_axes(node, in[0].shape, in[1].shape);
  out[0] = ValueInfo{in[0].dtype, in[0].shape};
}

void reverse_sequence_reference(const Node& node, std::span<const Tensor* const> in, std::span<Tensor* const> out) {
  const Tensor& x = *in[0];
  ReverseAxes axes = reverse_axes(node, x.shape(), in[1]->shape());
  const int64_t d0 = x.dim(0), d1 = x.dim(1), time_len = x.dim(axes.time);
  const int64_t* lens = in[1]->data<int64_t>();
  for (int64_t b = 0; b < in[1]->numel(); ++b)
    if (lens[b] < 0 || lens[b] > time_len)
      throw Error("sequence_lens[" + std::to_string(b) + "] = " + std::to_string(lens[b]) + " is outside [0, " +
                  std::to_string(time_len) + "]");
  if (x.numel() == 0) return;  // d0 * d1 may overflow when another dim is 0
  const size_t slice = static_cast<size_t>(x.numel() / (d0 * d1)) * element_size(node, x.dtype());
  for (int64_t i0 = 0; i0 < d0; ++i0)
    for (int64_t i1 = 0; i1 < d1; ++i1) {
      int64_t b = axes.batch == 0 ? i0 : i1, t = axes.time == 0 ? i0 : i1;
      int64_t from_t = t < lens[b] ? lens[b] - 1 - t : t;
      int64_t from = axes.time == 0 ? from_t * d1 + i1 : i0 * d1 + from_t;
      std::memcpy(out[0]->raw() + static_cast<size_t>(i0 * d1 + i1) * slice, x.raw() + static_cast<size_t>(from) * slice,
                  slice);
    }
}

}  // namespace

void register_select_ops(OpRegistry& r) {
  r.add("Compress", {compress_infer, compress_reference});
  r.add("Unique", {unique_infer, unique_reference});
  r.add("ReverseSequence", {reverse_sequence_infer, reverse_sequence_reference});
}

}  // namespace grove
