// MatMul (numpy semantics), Gemm and Det. The references are triple loops accumulating in
// double for floats, so they are a stricter oracle than any blocked float kernel.
#include <algorithm>
#include <limits>
#include <cmath>
#include <type_traits>
#include <vector>

#include "ops/fused_epilogue.h"
#include "ops/matmul/matmul_shape.h"
#include "ops/op.h"
#include "ops/op_util.h"

namespace grove {
namespace {

// Integer products and sums wrap modulo 2^64 (then 2^bits of T when stored), as two's
// complement hardware does; unsigned arithmetic makes the wrap defined where int64 overflow
// would be UB (fuzz_graph: an int64 Gemm of INT64_MIN squared).
template <class T>
using Accumulator = std::conditional_t<std::is_floating_point_v<T>, double, uint64_t>;

// An accumulated value as a double, integers read back as T's signedness.
template <class T>
double accumulated_value(Accumulator<T> value) {
  if constexpr (std::is_integral_v<T> && std::is_signed_v<T>) return static_cast<double>(static_cast<int64_t>(value));
  else return static_cast<double>(value);
}

// A double as T: floats as they are; integers rounded toward zero and saturated, NaN as 0.
template <class T>
T saturate_to(double value) {
  if constexpr (std::is_floating_point_v<T>) {
    return static_cast<T>(value);
  } else {
    if (std::isnan(value)) return T{0};
    if (value <= static_cast<double>(std::numeric_limits<T>::min())) return std::numeric_limits<T>::min();
    if (value >= static_cast<double>(std::numeric_limits<T>::max())) return std::numeric_limits<T>::max();
    return static_cast<T>(value);
  }
}

// MatMul and Gemm are defined for these; the small integer types and bool are not ONNX T here.
void check_matmul_dtype(DType dtype) {
  switch (dtype) {
    case DType::f32: case DType::f64: case DType::i32: case DType::i64: case DType::u32: case DType::u64: return;
    default: throw Unsupported("matrix product over " + std::string(dtype_name(dtype)) + " is not supported");
  }
}

// ---- MatMul ---------------------------------------------------------------------------


void infer_matmul(const Node& node, std::span<const ValueInfo> in, std::span<ValueInfo> out) {
  require_inputs(node, in.size(), 2, static_cast<int>(epilogue_max_inputs(node, 2)));
  if (in[0].dtype != in[1].dtype)
    throw Error("MatMul inputs differ in dtype: " + std::string(dtype_name(in[0].dtype)) + " and " + std::string(dtype_name(in[1].dtype)));
  check_matmul_dtype(in[0].dtype);
  out[0] = ValueInfo{in[0].dtype, plan_matmul(node, in[0].shape, in[1].shape).out_shape};
  check_epilogue_inputs(node, in, out[0], true);
}

template <class T>
void matmul_typed(const MatMulPlan& plan, const T* a, const T* b, T* c) {
  using Acc = Accumulator<T>;
  const int64_t batches = numel(plan.batch);
  const std::vector<int64_t> batch_strides = strides_of(plan.batch);
  for (int64_t bi = 0; bi < batches; ++bi) {
    // Unravel the batch index to find each operand's (possibly broadcast) matrix.
    int64_t a_off = 0, b_off = 0, rest = bi;
    for (size_t d = 0; d < plan.batch.size(); ++d) {
      int64_t coord = rest / batch_strides[d];
      rest %= batch_strides[d];
      a_off += coord * plan.a_batch_strides[d];
      b_off += coord * plan.b_batch_strides[d];
    }
    // (i, p, j) order walks B's rows contiguously, so the reference stays usable on real models.
    T* c_mat = c + bi * plan.m * plan.n;
    std::vector<Acc> row(static_cast<size_t>(plan.n));
    for (int64_t i = 0; i < plan.m; ++i) {
      std::fill(row.begin(), row.end(), Acc{0});
      for (int64_t p = 0; p < plan.k; ++p) {
        const Acc av = static_cast<Acc>(a[a_off + i * plan.k + p]);
        const T* b_row = b + b_off + p * plan.n;
        for (int64_t j = 0; j < plan.n; ++j) row[static_cast<size_t>(j)] += av * static_cast<Acc>(b_row[j]);
      }
      for (int64_t j = 0; j < plan.n; ++j) c_mat[i * plan.n + j] = static_cast<T>(row[static_cast<size_t>(j)]);
    }
  }
}

void reference_matmul(const Node& node, std::span<const Tensor* const> in, std::span<Tensor* const> out) {
  MatMulPlan plan = plan_matmul(node, in[0]->shape(), in[1]->shape());
  visit_dtype(in[0]->dtype(), [&](auto tag) {
    using T = decltype(tag);
    if constexpr (std::is_same_v<T, bool>) throw Unsupported("MatMul over bool is not supported");
    else matmul_typed<T>(plan, in[0]->data<T>(), in[1]->data<T>(), out[0]->data<T>());
  });
  apply_epilogue_reference(node, optional_input(in, kEpilogueBiasInput), optional_input(in, kEpilogueResidualInput),
                           *out[0]);
}

// ---- Gemm -----------------------------------------------------------------------------

// Y = alpha * op(A) * op(B) + beta * C, op() an optional transpose, C broadcast to [M,N].
struct GemmPlan {
  int64_t m = 0, k = 0, n = 0;
  bool trans_a = false, trans_b = false;
  std::vector<int64_t> c_strides;  // strides to read C while walking [M,N]; empty without C
};

GemmPlan plan_gemm(const Node& node, const Shape& a, const Shape& b, const Shape* c) {
  if (a.size() != 2 || b.size() != 2) throw Error("Gemm inputs A and B must be 2-D, got " + shape_str(a) + " and " + shape_str(b));
  GemmPlan plan;
  plan.trans_a = node.attr_int("transA", 0) != 0;
  plan.trans_b = node.attr_int("transB", 0) != 0;
  plan.m = plan.trans_a ? a[1] : a[0];
  plan.k = plan.trans_a ? a[0] : a[1];
  int64_t kb = plan.trans_b ? b[1] : b[0];
  plan.n = plan.trans_b ? b[0] : b[1];
  if (kb != plan.k)
    throw Error("Gemm inner dimensions differ: A " + shape_str(a) + (plan.trans_a ? " (transposed)" : "") + ", B " +
                shape_str(b) + (plan.trans_b ? " (transposed)" : ""));
  if (c) {
    // Unidirectional: C may broadcast up to [M,N], never the other way.
    const Shape mn{plan.m, plan.n};
    bool fits = c->size() <= 2;
    for (size_t i = 0; fits && i < c->size(); ++i) {
      int64_t want = mn[2 - c->size() + i];
      fits = (*c)[i] == want || (*c)[i] == 1;
    }
    if (!fits) throw Error("Gemm C of shape " + shape_str(*c) + " does not broadcast to " + shape_str(mn));
    plan.c_strides = broadcast_strides(*c, mn);
  }
  return plan;
}

void infer_gemm(const Node& node, std::span<const ValueInfo> in, std::span<ValueInfo> out) {
  require_inputs(node, in.size(), 2, static_cast<int>(epilogue_max_inputs(node, 3)));
  check_matmul_dtype(in[0].dtype);
  for (size_t i = 1; i < in.size(); ++i)
    if (in[i].present && in[i].dtype != in[0].dtype)
      throw Error("Gemm input " + std::to_string(i) + " is " + std::string(dtype_name(in[i].dtype)) + ", A is " +
                  std::string(dtype_name(in[0].dtype)));
  GemmPlan plan = plan_gemm(node, in[0].shape, in[1].shape, has_input(in, 2) ? &in[2].shape : nullptr);
  out[0] = ValueInfo{in[0].dtype, {plan.m, plan.n}};
  check_epilogue_inputs(node, in, out[0], false);
}

template <class T>
void gemm_typed(const GemmPlan& plan, double alpha, double beta, const T* a, const T* b, const T* c, T* y) {
  using Acc = Accumulator<T>;
  auto a_at = [&](int64_t i, int64_t p) { return static_cast<Acc>(plan.trans_a ? a[p * plan.m + i] : a[i * plan.k + p]); };
  std::vector<Acc> row(static_cast<size_t>(plan.n));
  for (int64_t i = 0; i < plan.m; ++i) {
    // Loop order follows B's layout so its reads stay contiguous: dot products over B's rows
    // when B is transposed (the nn.Linear export), else (i, p, j) accumulation.
    if (plan.trans_b) {
      for (int64_t j = 0; j < plan.n; ++j) {
        Acc acc = 0;
        for (int64_t p = 0; p < plan.k; ++p) acc += a_at(i, p) * static_cast<Acc>(b[j * plan.k + p]);
        row[static_cast<size_t>(j)] = acc;
      }
    } else {
      std::fill(row.begin(), row.end(), Acc{0});
      for (int64_t p = 0; p < plan.k; ++p) {
        const Acc av = a_at(i, p);
        for (int64_t j = 0; j < plan.n; ++j) row[static_cast<size_t>(j)] += av * static_cast<Acc>(b[p * plan.n + j]);
      }
    }
    for (int64_t j = 0; j < plan.n; ++j) {
      const Acc sum = row[static_cast<size_t>(j)];
      if constexpr (std::is_integral_v<T>) {
        // alpha = beta = 1: integer arithmetic, wrapping like the products (C++20 makes the
        // conversion to a signed T modular). Other scales go through double and saturate: a
        // double outside T's range has no defined conversion (fuzz_graph, UBSan).
        if (alpha == 1.0 && (!c || beta == 1.0)) {
          const Acc add = c ? static_cast<Acc>(c[i * plan.c_strides[0] + j * plan.c_strides[1]]) : Acc{0};
          y[i * plan.n + j] = static_cast<T>(sum + add);
          continue;
        }
      }
      double value = alpha * accumulated_value<T>(sum);
      if (c) value += beta * static_cast<double>(c[i * plan.c_strides[0] + j * plan.c_strides[1]]);
      y[i * plan.n + j] = saturate_to<T>(value);
    }
  }
}

void reference_gemm(const Node& node, std::span<const Tensor* const> in, std::span<Tensor* const> out) {
  const Tensor* c = optional_input(in, 2);
  GemmPlan plan = plan_gemm(node, in[0]->shape(), in[1]->shape(), c ? &c->shape() : nullptr);
  const double alpha = node.attr_float("alpha", 1.0f), beta = node.attr_float("beta", 1.0f);
  visit_dtype(in[0]->dtype(), [&](auto tag) {
    using T = decltype(tag);
    if constexpr (std::is_same_v<T, bool>) throw Unsupported("Gemm over bool is not supported");
    else gemm_typed<T>(plan, alpha, beta, in[0]->data<T>(), in[1]->data<T>(), c ? c->data<T>() : nullptr, out[0]->data<T>());
  });
  apply_epilogue_reference(node, nullptr, optional_input(in, kEpilogueResidualInput), *out[0]);
}

// ---- Det --------------------------------------------------------------------------------

void infer_det(const Node& node, std::span<const ValueInfo> in, std::span<ValueInfo> out) {
  require_inputs(node, in.size(), 1, 1);
  if (in[0].dtype != DType::f32 && in[0].dtype != DType::f64)
    throw Unsupported("Det over " + std::string(dtype_name(in[0].dtype)) + " is not supported");
  const Shape& s = in[0].shape;
  if (s.size() < 2 || s[s.size() - 1] != s[s.size() - 2])
    throw Error("input must be square matrices [..., M, M], got shape " + shape_str(s));
  out[0] = ValueInfo{in[0].dtype, Shape(s.begin(), s.end() - 2)};
}

// Gaussian elimination with partial pivoting, in double: the product of the pivots, with the
// sign flipped once per row swap.
double determinant(std::vector<double>& a, int64_t m) {
  double det = 1.0;
  for (int64_t col = 0; col < m; ++col) {
    int64_t pivot = col;
    for (int64_t r = col + 1; r < m; ++r)
      if (std::abs(a[r * m + col]) > std::abs(a[pivot * m + col])) pivot = r;
    if (a[pivot * m + col] == 0.0) return 0.0;
    if (pivot != col) {
      for (int64_t c = 0; c < m; ++c) std::swap(a[col * m + c], a[pivot * m + c]);
      det = -det;
    }
    det *= a[col * m + col];
    for (int64_t r = col + 1; r < m; ++r) {
      double f = a[r * m + col] / a[col * m + col];
      for (int64_t c = col; c < m; ++c) a[r * m + c] -= f * a[col * m + c];
    }
  }
  return det;
}

template <class T>
void det_typed(const T* xs, T* ys, int64_t count, int64_t m) {
  if (count == 0) return;  // the matrices may be huge and empty, e.g. [0, M, M]
  std::vector<double> a(static_cast<size_t>(m * m));
  for (int64_t b = 0; b < count; ++b) {
    std::copy(xs + b * m * m, xs + (b + 1) * m * m, a.begin());
    ys[b] = static_cast<T>(determinant(a, m));
  }
}

void reference_det(const Node&, std::span<const Tensor* const> in, std::span<Tensor* const> out) {
  const Tensor& x = *in[0];
  int64_t m = x.dim(x.rank() - 1);
  if (x.dtype() == DType::f32) det_typed(x.data<float>(), out[0]->data<float>(), out[0]->numel(), m);
  else det_typed(x.data<double>(), out[0]->data<double>(), out[0]->numel(), m);
}

}  // namespace

MatMulPlan plan_matmul(const Node& node, const Shape& a_shape, const Shape& b_shape) {
  if (a_shape.empty() || b_shape.empty()) throw Error("inputs must have rank >= 1, got " + shape_str(a_shape) + " and " + shape_str(b_shape));
  // numpy: a 1-D a is a row [1,k], a 1-D b a column [k,1]; the added dim is dropped again.
  Shape a = a_shape.size() == 1 ? Shape{1, a_shape[0]} : a_shape;
  Shape b = b_shape.size() == 1 ? Shape{b_shape[0], 1} : b_shape;
  MatMulPlan plan;
  plan.m = a[a.size() - 2];
  plan.k = a[a.size() - 1];
  plan.n = b[b.size() - 1];
  if (b[b.size() - 2] != plan.k)
    throw Error("inner dimensions differ: " + shape_str(a_shape) + " x " + shape_str(b_shape));
  Shape a_batch(a.begin(), a.end() - 2), b_batch(b.begin(), b.end() - 2);
  plan.batch = broadcast_shapes(node, a_batch, b_batch);
  plan.a_batch_strides = broadcast_strides(a_batch, plan.batch);
  plan.b_batch_strides = broadcast_strides(b_batch, plan.batch);
  for (auto& s : plan.a_batch_strides) s *= plan.m * plan.k;
  for (auto& s : plan.b_batch_strides) s *= plan.k * plan.n;
  plan.out_shape = plan.batch;
  if (a_shape.size() > 1) plan.out_shape.push_back(plan.m);
  if (b_shape.size() > 1) plan.out_shape.push_back(plan.n);
  return plan;
}

void register_linalg_ops(OpRegistry& registry) {
  registry.add("MatMul", {.infer = infer_matmul,
                          .reference = reference_matmul,
                          .flops = [](const Node&, std::span<const ValueInfo> in, std::span<const ValueInfo> out) { return matmul_products(in, out); }});
  registry.add("Gemm", {.infer = infer_gemm,
                        .reference = reference_gemm,
                        .flops = [](const Node& node, std::span<const ValueInfo> in, std::span<const ValueInfo> out) {
                          const Shape* a = known_shape(in, 0);
                          const Shape* y = known_shape(out, 0);
                          if (!a || !y || a->size() != 2) return int64_t{0};
                          const int64_t k = node.attr_int("transA", 0) ? (*a)[0] : (*a)[1];
                          return checked_mul(checked_mul(2, numel(*y)), k);
                        }});
  registry.add("Det", {infer_det, reference_det});
}

}  // namespace grove
