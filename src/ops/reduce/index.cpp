// Operators that rank, accumulate or locate elements along axes: TopK, CumSum, NonZero, plus
// the elementwise-with-statistics pair Shrink and MeanVarianceNormalization. The scatter
// family and OneHot live in scatter.cpp; GatherND is with Gather in slice.cpp.
#include <algorithm>
#include <cmath>
#include <numeric>
#include <type_traits>

#include "ops/reduce/index.h"
#include "ops/op_util.h"

namespace grove {

void require_arithmetic(DType dtype) {
  if (dtype == DType::boolean || dtype == DType::undefined) throw Unsupported("dtype " + std::string(dtype_name(dtype)) + " is not supported");
  visit_dtype(dtype, [](auto) {});  // Unsupported for f16, string, ...
}

int64_t wrap_index(int64_t index, int64_t dim) {
  int64_t i = index < 0 ? index + dim : index;
  if (i < 0 || i >= dim)
    throw Error("index " + std::to_string(index) + " is out of range for a dim of " + std::to_string(dim));
  return i;
}

int64_t dims_product(const Shape& shape, size_t from, size_t to) {
  int64_t p = 1;
  for (size_t i = from; i < to && i < shape.size(); ++i) p *= shape[i];
  return p;
}

namespace {

// A tensor seen as [outer, n, inner] around one axis: element (o, i, j) is at (o*n + i)*inner + j.
struct AxisView {
  int64_t outer, n, inner;
  explicit AxisView(const Shape& s, size_t axis)
      : outer(dims_product(s, 0, axis)), n(s[axis]), inner(dims_product(s, axis + 1, s.size())) {}
  int64_t at(int64_t o, int64_t i, int64_t j) const { return (o * n + i) * inner + j; }
};

// ---- TopK ----

struct TopKAttrs {
  size_t axis;
  bool largest;
};

TopKAttrs topk_attrs(const Node& node, size_t rank) {
  if (rank == 0) throw Error("TopK needs an input of rank 1 or more");
  // Before opset 11 TopK always returned the largest values, sorted.
  bool largest = node.opset < 11 || node.attr_int("largest", 1) != 0;
  return {static_cast<size_t>(normalize_axis(node, node.attr_int("axis", -1), static_cast<int64_t>(rank))), largest};
}

int64_t topk_k(const Node& node, std::span<const ValueInfo> in) {
  if (node.opset < 10) {
    if (!node.has_attr("k")) throw Error("attribute 'k' is required");
    return node.attr_int("k", 0);
  }
  std::vector<int64_t> k = constant_input(node, in, 1, "k").to_i64();
  if (k.size() != 1) throw Error("k must hold exactly one value, got " + std::to_string(k.size()));
  return k[0];
}

void topk_infer(const Node& node, std::span<const ValueInfo> in, std::span<ValueInfo> out) {
  size_t inputs = node.opset < 10 ? 1 : 2;
  require_inputs(node, in.size(), inputs, static_cast<int>(inputs));
  if (out.size() != 2) throw Error("TopK has two outputs (values, indices)");
  require_arithmetic(in[0].dtype);
  TopKAttrs a = topk_attrs(node, in[0].shape.size());
  int64_t k = topk_k(node, in);
  int64_t dim = in[0].shape[a.axis];
  if (k < 0 || k > dim)
    throw Error("k = " + std::to_string(k) + " is outside [0, " + std::to_string(dim) + "] for axis " + std::to_string(a.axis));
  Shape shape = in[0].shape;
  shape[a.axis] = k;
  out[0] = ValueInfo{in[0].dtype, shape};
  out[1] = ValueInfo{DType::i64, shape};
}

// Whether a ranks strictly before b. NaN ranks above every number, as in numpy's sort
// order, so the order stays a strict weak ordering.
template <class T>
bool ranks_before(T a, T b, bool largest) {
  if constexpr (std::is_floating_point_v<T>) {
    bool na = std::isnan(a), nb = std::isnan(b);
    if (na || nb) return largest ? (na && !nb) : (!na && nb);
  }
  return largest ? a > b : a < b;
}

void topk_reference(const Node& node, std::span<const Tensor* const> in, std::span<Tensor* const> out) {
  const Tensor& x = *in[0];
  TopKAttrs a = topk_attrs(node, x.shape().size());
  AxisView src(x.shape(), a.axis), dst(out[0]->shape(), a.axis);
  int64_t* indices = out[1]->data<int64_t>();
  visit_dtype(x.dtype(), [&](auto tag) {
    using T = decltype(tag);
    const T* xs = x.data<T>();
    T* values = out[0]->data<T>();
    std::vector<int64_t> order(static_cast<size_t>(src.n));
    for (int64_t o = 0; o < src.outer; ++o)
      for (int64_t j = 0; j < src.inner; ++j) {
        std::iota(order.begin(), order.end(), 0);
        // Stable: equal values keep the lower index first, as the spec requires.
        std::stable_sort(order.begin(), order.end(), [&](int64_t p, int64_t q) {
          return ranks_before(xs[src.at(o, p, j)], xs[src.at(o, q, j)], a.largest);
        });
        for (int64_t i = 0; i < dst.n; ++i) {
          values[dst.at(o, i, j)] = xs[src.at(o, order[static_cast<size_t>(i)], j)];
          indices[dst.at(o, i, j)] = order[static_cast<size_t>(i)];
        }
      }
  });
}

// ---- CumSum ----

size_t cumsum_axis(const Node& node, const Tensor& axis, size_t rank) {
  if (axis.dtype() != DType::i32 && axis.dtype() != DType::i64) throw Error("axis must be int32 or int64");
  std::vector<int64_t> v = axis.to_i64();
  if (v.size() != 1) throw Error("axis must hold exactly one value, got " + std::to_string(v.size()));
  return static_cast<size_t>(normalize_axis(node, v[0], static_cast<int64_t>(rank)));
}

void cumsum_infer(const Node& node, std::span<const ValueInfo> in, std::span<ValueInfo> out) {
  require_inputs(node, in.size(), 2, 2);
  require_arithmetic(in[0].dtype);
  if (in[0].shape.empty()) throw Error("CumSum needs an input of rank 1 or more");
  if (in[1].data) cumsum_axis(node, *in[1].data, in[0].shape.size());  // validate early when known
  out[0] = ValueInfo{in[0].dtype, in[0].shape};
}

void cumsum_reference(const Node& node, std::span<const Tensor* const> in, std::span<Tensor* const> out) {
  const Tensor& x = *in[0];
  AxisView v(x.shape(), cumsum_axis(node, *in[1], x.shape().size()));
  bool exclusive = node.attr_int("exclusive", 0) != 0, reverse = node.attr_int("reverse", 0) != 0;
  visit_dtype(x.dtype(), [&](auto tag) {
    using T = decltype(tag);
    const T* xs = x.data<T>();
    T* ys = out[0]->data<T>();
    for (int64_t o = 0; o < v.outer; ++o)
      for (int64_t j = 0; j < v.inner; ++j) {
        T sum = T(0);
        for (int64_t step = 0; step < v.n; ++step) {
          int64_t at = v.at(o, reverse ? v.n - 1 - step : step, j);
          if (exclusive) ys[at] = sum;
          sum = static_cast<T>(sum + xs[at]);
          if (!exclusive) ys[at] = sum;
        }
      }
  });
}

// ---- NonZero ----

// Flat positions of the non-zero elements, in row-major order.
std::vector<int64_t> nonzero_positions(const Tensor& x) {
  std::vector<int64_t> positions;
  visit_dtype(x.dtype(), [&](auto tag) {
    using T = decltype(tag);
    const T* xs = x.data<T>();
    for (int64_t k = 0; k < x.numel(); ++k)
      if (xs[k] != T(0)) positions.push_back(k);
  });
  return positions;
}

void nonzero_infer(const Node& node, std::span<const ValueInfo> in, std::span<ValueInfo> out) {
  require_inputs(node, in.size(), 1, 1);
  visit_dtype(in[0].dtype, [](auto) {});
  if (!in[0].data)
    throw DataDependentShape("NonZero's output size depends on the input's values, known only at run time");
  int64_t count = static_cast<int64_t>(nonzero_positions(*in[0].data).size());
  out[0] = ValueInfo{DType::i64, {static_cast<int64_t>(in[0].shape.size()), count}};
}

void nonzero_reference(const Node&, std::span<const Tensor* const> in, std::span<Tensor* const> out) {
  const Shape& s = in[0]->shape();
  std::vector<int64_t> positions = nonzero_positions(*in[0]);
  std::vector<int64_t> strides = strides_of(s);
  int64_t count = static_cast<int64_t>(positions.size());
  int64_t* ys = out[0]->data<int64_t>();
  for (int64_t c = 0; c < count; ++c)
    for (size_t d = 0; d < s.size(); ++d)
      ys[static_cast<int64_t>(d) * count + c] = positions[static_cast<size_t>(c)] / strides[d] % s[d];
}

// ---- Shrink ----

void same_as_input_infer(const Node& node, std::span<const ValueInfo> in, std::span<ValueInfo> out) {
  require_inputs(node, in.size(), 1, 1);
  require_arithmetic(in[0].dtype);
  out[0] = ValueInfo{in[0].dtype, in[0].shape};
}

void shrink_reference(const Node& node, std::span<const Tensor* const> in, std::span<Tensor* const> out) {
  double lambd = node.attr_float("lambd", 0.5f), bias = node.attr_float("bias", 0.0f);
  visit_dtype(in[0]->dtype(), [&](auto tag) {
    using T = decltype(tag);
    std::span<const T> xs = in[0]->span<T>();
    T* ys = out[0]->data<T>();
    for (size_t k = 0; k < xs.size(); ++k) {
      double x = static_cast<double>(xs[k]);
      ys[k] = static_cast<T>(x < -lambd ? x + bias : x > lambd ? x - bias : 0.0);
    }
  });
}

// ---- MeanVarianceNormalization: (x - mean) / (std + 1e-9) over `axes` ----

std::vector<bool> mvn_reduced_dims(const Node& node, size_t rank) {
  std::vector<bool> reduced(rank, false);
  for (int64_t a : node.attr_ints("axes", {0, 2, 3})) {
    size_t d = static_cast<size_t>(normalize_axis(node, a, static_cast<int64_t>(rank)));
    if (reduced[d]) throw Error("axes lists dim " + std::to_string(d) + " twice");
    reduced[d] = true;
  }
  return reduced;
}

void mvn_infer(const Node& node, std::span<const ValueInfo> in, std::span<ValueInfo> out) {
  require_inputs(node, in.size(), 1, 1);
  if (in[0].dtype != DType::f32 && in[0].dtype != DType::f64)
    throw Unsupported("dtype " + std::string(dtype_name(in[0].dtype)) + " is not supported (float32 and float64 only)");
  mvn_reduced_dims(node, in[0].shape.size());
  out[0] = ValueInfo{in[0].dtype, in[0].shape};
}

void mvn_reference(const Node& node, std::span<const Tensor* const> in, std::span<Tensor* const> out) {
  const Shape& s = in[0]->shape();
  std::vector<bool> reduced = mvn_reduced_dims(node, s.size());
  // Each element's group is its index with the reduced dims dropped.
  Shape group_shape = s;
  for (size_t d = 0; d < s.size(); ++d)
    if (reduced[d]) group_shape[d] = 1;
  std::vector<int64_t> group_strides = strides_of(group_shape);
  std::vector<int64_t> group_of(static_cast<size_t>(numel(s)));
  std::vector<int64_t> pos(s.size(), 0);
  for (size_t k = 0; k < group_of.size(); ++k) {
    int64_t g = 0;
    for (size_t d = 0; d < s.size(); ++d) g += reduced[d] ? 0 : pos[d] * group_strides[d];
    group_of[k] = g;
    for (size_t d = s.size(); d-- > 0;) {
      if (++pos[d] < s[d]) break;
      pos[d] = 0;
    }
  }
  size_t groups = static_cast<size_t>(numel(group_shape));
  double count = static_cast<double>(group_of.size()) / static_cast<double>(std::max<size_t>(groups, 1));
  visit_dtype(in[0]->dtype(), [&](auto tag) {
    using T = decltype(tag);
    std::span<const T> xs = in[0]->span<T>();
    T* ys = out[0]->data<T>();
    std::vector<double> mean(groups, 0.0), var(groups, 0.0);
    for (size_t k = 0; k < xs.size(); ++k) mean[static_cast<size_t>(group_of[k])] += xs[k];
    for (double& m : mean) m /= count;
    for (size_t k = 0; k < xs.size(); ++k) {
      double dev = xs[k] - mean[static_cast<size_t>(group_of[k])];
      var[static_cast<size_t>(group_of[k])] += dev * dev;
    }
    for (double& v : var) v /= count;
    for (size_t k = 0; k < xs.size(); ++k) {
      size_t g = static_cast<size_t>(group_of[k]);
      ys[k] = static_cast<T>((xs[k] - mean[g]) / (std::sqrt(var[g]) + 1e-9));
    }
  });
}

}  // namespace

void register_index_ops(OpRegistry& r) {
  r.add("TopK", {topk_infer, topk_reference});
  r.add("CumSum", {cumsum_infer, cumsum_reference});
  r.add("NonZero", {nonzero_infer, nonzero_reference});
  r.add("Shrink", {same_as_input_infer, shrink_reference});
  r.add("MeanVarianceNormalization", {mvn_infer, mvn_reference});
  register_scatter_ops(r);
}

}  // namespace grove
