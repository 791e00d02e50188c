// Operators that write elements to positions given by an indices tensor: ScatterND,
// ScatterElements (and its opset 9-10 name Scatter), and OneHot.
#include <algorithm>
#include <cmath>
#include <cstring>

#include "ops/byte_copy.h"
#include "ops/reduce/index.h"
#include "ops/op_util.h"

namespace grove {
namespace {

// ---- Reductions shared by ScatterND and ScatterElements ----

enum class Reduction { none, add, mul, max, min };

Reduction scatter_reduction(const Node& node) {
  std::string r = node.attr_string("reduction", "none");
  if (r == "none") return Reduction::none;
  if (r == "add") return Reduction::add;
  if (r == "mul") return Reduction::mul;
  if (r == "max") return Reduction::max;
  if (r == "min") return Reduction::min;
  throw Error("unknown reduction '" + r + "' (expected none, add, mul, max or min)");
}

template <class T>
T combine(Reduction r, T old, T update) {
  switch (r) {
    case Reduction::add: return static_cast<T>(old + update);
    case Reduction::mul: return static_cast<T>(old * update);
    case Reduction::max: return std::max(old, update);
    case Reduction::min: return std::min(old, update);
    case Reduction::none: break;
  }
  return update;
}

void check_indices_dtype(DType dtype) {
  if (dtype != DType::i64 && dtype != DType::i32) throw Error("indices must be int32 or int64, got " + std::string(dtype_name(dtype)));
}

void check_scatter_dtypes(const Node& node, std::span<const ValueInfo> in) {
  require_inputs(node, in.size(), 3, 3);
  if (scatter_reduction(node) == Reduction::none) visit_dtype(in[0].dtype, [](auto) {});
  else require_arithmetic(in[0].dtype);
  check_indices_dtype(in[1].dtype);
  if (in[2].dtype != in[0].dtype) throw Error("updates must have the dtype of data");
}

// ---- ScatterND: each index tuple (last dim of indices) addresses a slice of data ----

void scatter_nd_infer(const Node& node, std::span<const ValueInfo> in, std::span<ValueInfo> out) {
  check_scatter_dtypes(node, in);
  const Shape &s = in[0].shape, &is = in[1].shape, &us = in[2].shape;
  if (is.empty()) throw Error("indices must have rank 1 or more");
  int64_t k = is.back();
  if (k < 0 || k > static_cast<int64_t>(s.size()))
    throw Error("the last indices dim (" + std::to_string(k) + ") exceeds the data rank " + std::to_string(s.size()));
  Shape want(is.begin(), is.end() - 1);
  want.insert(want.end(), s.begin() + k, s.end());
  if (us != want) throw Error("updates shape " + shape_str(us) + " should be " + shape_str(want));
  out[0] = ValueInfo{in[0].dtype, s};
}

void scatter_nd_reference(const Node& node, std::span<const Tensor* const> in, std::span<Tensor* const> out) {
  const Tensor &data = *in[0], &indices = *in[1], &updates = *in[2];
  const Shape& s = data.shape();
  Reduction reduction = scatter_reduction(node);
  size_t k = static_cast<size_t>(indices.shape().back());
  std::vector<int64_t> idx = indices.to_i64(), strides = strides_of(s);
  int64_t tuples = dims_product(indices.shape(), 0, indices.shape().size() - 1);
  int64_t slice = dims_product(s, k, s.size());
  std::memcpy(out[0]->raw(), data.raw(), data.bytes());
  visit_dtype(data.dtype(), [&](auto tag) {
    using T = decltype(tag);
    const T* us = updates.data<T>();
    T* ys = out[0]->data<T>();
    for (int64_t t = 0; t < tuples; ++t) {
      int64_t offset = 0;
      for (size_t d = 0; d < k; ++d) offset += wrap_index(idx[static_cast<size_t>(t) * k + d], s[d]) * strides[d];
      for (int64_t e = 0; e < slice; ++e) ys[offset + e] = combine(reduction, ys[offset + e], us[t * slice + e]);
    }
  });
}

// ---- ScatterElements / Scatter: indices has the shape of updates and replaces one coordinate ----

size_t scatter_elements_axis(const Node& node, size_t rank) {
  return static_cast<size_t>(normalize_axis(node, node.attr_int("axis", 0), static_cast<int64_t>(rank)));
}

void scatter_elements_infer(const Node& node, std::span<const ValueInfo> in, std::span<ValueInfo> out) {
  check_scatter_dtypes(node, in);
  const Shape &s = in[0].shape, &is = in[1].shape;
  if (s.empty()) throw Error("data must have rank 1 or more");
  if (in[2].shape != is) throw Error("updates shape " + shape_str(in[2].shape) + " differs from indices shape " + shape_str(is));
  if (is.size() != s.size()) throw Error("indices rank " + std::to_string(is.size()) + " differs from data rank " + std::to_string(s.size()));
  size_t axis = scatter_elements_axis(node, s.size());
  for (size_t d = 0; d < s.size(); ++d)
    if (d != axis && is[d] > s[d]) throw Error("indices shape " + shape_str(is) + " exceeds data shape " + shape_str(s) + " off the axis");
  out[0] = ValueInfo{in[0].dtype, s};
}

void scatter_elements_reference(const Node& node, std::span<const Tensor* const> in, std::span<Tensor* const> out) {
  const Tensor &data = *in[0], &indices = *in[1], &updates = *in[2];
  const Shape &s = data.shape(), &is = indices.shape();
  size_t axis = scatter_elements_axis(node, s.size());
  Reduction reduction = scatter_reduction(node);
  std::vector<int64_t> idx = indices.to_i64(), strides = strides_of(s);
  std::memcpy(out[0]->raw(), data.raw(), data.bytes());
  visit_dtype(data.dtype(), [&](auto tag) {
    using T = decltype(tag);
    const T* us = updates.data<T>();
    T* ys = out[0]->data<T>();
    std::vector<int64_t> pos(is.size(), 0);
    for (size_t n = 0; n < idx.size(); ++n) {
      int64_t offset = 0;
      for (size_t d = 0; d < s.size(); ++d) offset += (d == axis ? wrap_index(idx[n], s[d]) : pos[d]) * strides[d];
      ys[offset] = combine(reduction, ys[offset], us[n]);
      for (size_t d = is.size(); d-- > 0;) {
        if (++pos[d] < is[d]) break;
        pos[d] = 0;
      }
    }
  });
}

// ---- OneHot: a new dim of size depth, `on` where the index points and `off` elsewhere ----

size_t onehot_axis(const Node& node, size_t indices_rank) {
  return static_cast<size_t>(normalize_axis(node, node.attr_int("axis", -1), static_cast<int64_t>(indices_rank) + 1));
}

void onehot_infer(const Node& node, std::span<const ValueInfo> in, std::span<ValueInfo> out) {
  require_inputs(node, in.size(), 3, 3);
  require_arithmetic(in[0].dtype);
  require_arithmetic(in[1].dtype);
  element_size(node, in[2].dtype);
  if (numel(in[2].shape) != 2) throw Error("values must hold two elements [off, on], got shape " + shape_str(in[2].shape));
  std::vector<double> depth = constant_input(node, in, 1, "depth").to_f64();
  if (depth.size() != 1) throw Error("depth must hold exactly one value, got " + std::to_string(depth.size()));
  // The spec casts a float depth to an integer.
  if (!(depth[0] >= 1 && depth[0] < 9.0e15)) throw Error("depth must be a positive count, got " + std::to_string(depth[0]));
  Shape shape = in[0].shape;
  shape.insert(shape.begin() + static_cast<std::ptrdiff_t>(onehot_axis(node, shape.size())), static_cast<int64_t>(depth[0]));
  out[0] = ValueInfo{in[2].dtype, shape};
}

void onehot_reference(const Node& node, std::span<const Tensor* const> in, std::span<Tensor* const> out) {
  const Shape& is = in[0]->shape();
  size_t axis = onehot_axis(node, is.size());
  int64_t depth = out[0]->dim(static_cast<int64_t>(axis));
  int64_t outer = dims_product(is, 0, axis), inner = dims_product(is, axis, is.size());
  size_t elem = dtype_size(out[0]->dtype());
  const std::byte* off = in[2]->raw();
  const std::byte* on = off + elem;
  std::byte* ys = out[0]->raw();
  for (int64_t k = 0; k < out[0]->numel(); ++k) std::memcpy(ys + static_cast<size_t>(k) * elem, off, elem);
  std::vector<double> indices = in[0]->to_f64();
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t j = 0; j < inner; ++j) {
      double raw = indices[static_cast<size_t>(o * inner + j)];
      if (!(std::abs(raw) < 9.0e15)) continue;  // NaN or absurd: no position is on
      int64_t i = static_cast<int64_t>(raw);  // truncates toward zero, like the spec's cast
      if (i < 0) i += depth;                   // negative indices count from the end (opset 11)
      if (i < 0 || i >= depth) continue;       // out of range: the whole row stays off
      std::memcpy(ys + static_cast<size_t>((o * depth + i) * inner + j) * elem, on, elem);
    }
}

}  // namespace

void register_scatter_ops(OpRegistry& r) {
  r.add("ScatterND", {scatter_nd_infer, scatter_nd_reference});
  r.add("ScatterElements", {scatter_elements_infer, scatter_elements_reference});
  r.add("Scatter", {scatter_elements_infer, scatter_elements_reference});
  r.add("OneHot", {onehot_infer, onehot_reference});
}

}  // namespace grove
