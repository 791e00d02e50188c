#pragma once
// Shared machinery of the elementwise family (elementwise_*.cpp, activation.cpp): dtype
// sets, dtype dispatch restricted to a set, one broadcasting walk, and OpSpec builders for
// "same shape in, same shape out" unary ops and broadcasting binary ops.
//
// An op is described by a stateless lambda, so the OpSpec can still hold plain function
// pointers: a captureless lambda type is default-constructible in C++20, and the template
// instantiated for it rebuilds the lambda inside the reference function.
#include <array>
#include <cmath>
#include <limits>
#include <span>
#include <string>
#include <type_traits>

#include "ops/op.h"
#include "ops/op_util.h"

namespace grove::elementwise {

// Dtype sets, as bit flags, so an op states the dtypes it takes in one word.
enum DTypeSet : unsigned {
  kFloat = 1,        // f32, f64
  kSigned = 2,       // i8 .. i64
  kUnsigned = 4,     // u8 .. u64
  kBool = 8,
  kInt = kSigned | kUnsigned,
  kSignedNumeric = kFloat | kSigned,
  kNumeric = kFloat | kSigned | kUnsigned,
  kAny = kNumeric | kBool,
};

template <class T>
constexpr bool in_set(unsigned set) {
  if constexpr (std::is_same_v<T, bool>) return set & kBool;
  else if constexpr (std::is_floating_point_v<T>) return set & kFloat;
  else if constexpr (std::is_signed_v<T>) return set & kSigned;
  else return set & kUnsigned;
}

bool dtype_in_set(DType dtype, unsigned set);

// Throws unless `dtype` is in `set`: Unsupported for dtypes ONNX allows but grove does not
// compute in (float16, bfloat16, string), Error for the rest.
void require_dtype(const Node& node, DType dtype, unsigned set, const char* what = "input");

// Calls f(T{}) for the dtype, instantiating f only for the C++ types in `Set`.
template <unsigned Set, class F>
void dispatch(DType dtype, F&& f) {
  visit_dtype(dtype, [&](auto tag) {
    using T = decltype(tag);
    if constexpr (in_set<T>(Set)) f(tag);
    else throw Error("dtype " + std::string(dtype_name(dtype)) + " is not accepted here");
  });
}

// Converts one element between grove's C++ types without undefined behaviour: float to
// integer truncates toward zero and saturates at the target's range, NaN gives 0, and
// anything to bool is "not zero". ONNX leaves out-of-range casts undefined; saturating is
// the choice that cannot crash.
template <class To, class From>
To convert(From x) {
  if constexpr (std::is_same_v<To, bool>) {
    return x != From(0);
  } else if constexpr (std::is_floating_point_v<From> && std::is_integral_v<To>) {
    if (std::isnan(x)) return To(0);
    // The bounds as From: lowest() is a power of two (or 0) so it is exact; for max() we
    // compare against 2^bits, which is exact too, and saturate at or above it.
    constexpr From lo = static_cast<From>(std::numeric_limits<To>::lowest());
    constexpr From hi_exclusive = static_cast<From>(std::numeric_limits<To>::max() / 2 + 1) * From(2);
    if (x <= lo) return std::numeric_limits<To>::lowest();
    if (x >= hi_exclusive) return std::numeric_limits<To>::max();
    return static_cast<To>(x);
  } else {
    return static_cast<To>(x);
  }
}

// Walks every element of `out_shape` in row-major order and calls visit(i, offsets), where
// offsets[k] is the element offset into input k read with numpy broadcasting. An odometer
// over the output index keeps the offsets current, so no division per element.
template <size_t N, class Visit>
void for_each_broadcast(const Shape& out_shape, const std::array<const Shape*, N>& in_shapes, Visit&& visit) {
  const int64_t total = numel(out_shape);
  bool all_same = true;
  for (const Shape* s : in_shapes) all_same = all_same && *s == out_shape;
  std::array<int64_t, N> offsets{};
  if (all_same) {  // the common case: no broadcasting, so every offset is the output index
    for (int64_t i = 0; i < total; ++i) {
      offsets.fill(i);
      visit(i, offsets);
    }
    return;
  }
  std::array<std::vector<int64_t>, N> strides;
  for (size_t k = 0; k < N; ++k) strides[k] = broadcast_strides(*in_shapes[k], out_shape);
  std::vector<int64_t> index(out_shape.size(), 0);
  for (int64_t i = 0; i < total; ++i) {
    visit(i, offsets);
    for (size_t d = out_shape.size(); d-- > 0;) {
      if (++index[d] < out_shape[d]) {
        for (size_t k = 0; k < N; ++k) offsets[k] += strides[k][d];
        break;
      }
      index[d] = 0;
      for (size_t k = 0; k < N; ++k) offsets[k] -= strides[k][d] * (out_shape[d] - 1);
    }
  }
}

template <class R, class T, class F>
void map_unary(const Tensor& x, Tensor& out, F&& f) {
  const T* px = x.data<T>();
  R* po = out.data<R>();
  for (int64_t i = 0; i < out.numel(); ++i) po[i] = static_cast<R>(f(px[i]));
}

template <class R, class A, class B, class F>
void map_binary(const Tensor& a, const Tensor& b, Tensor& out, F&& f) {
  const A* pa = a.data<A>();
  const B* pb = b.data<B>();
  R* po = out.data<R>();
  for_each_broadcast<2>(out.shape(), {&a.shape(), &b.shape()},
                        [&](int64_t i, const std::array<int64_t, 2>& off) { po[i] = static_cast<R>(f(pa[off[0]], pb[off[1]])); });
}

// ---- Unary ops: one input, output of the same dtype and shape.

// Building the element function in infer too rejects bad attributes before anything runs.
template <unsigned Set, class MakeFn>
void unary_infer(const Node& node, std::span<const ValueInfo> in, std::span<ValueInfo> out) {
  require_inputs(node, in.size(), 1, 1);
  require_dtype(node, in[0].dtype, Set);
  (void)MakeFn{}(node);
  out[0].dtype = in[0].dtype;
  out[0].shape = in[0].shape;
}

// MakeFn(node) reads the attributes once and returns the per-element function.
template <unsigned Set, class MakeFn>
void unary_reference(const Node& node, std::span<const Tensor* const> in, std::span<Tensor* const> out) {
  auto fn = MakeFn{}(node);
  dispatch<Set>(in[0]->dtype(), [&](auto tag) {
    using T = decltype(tag);
    map_unary<T, T>(*in[0], *out[0], fn);
  });
}

// An op with attributes: `make` is a captureless lambda (const Node&) -> element function.
template <unsigned Set, class MakeFn>
OpSpec unary_op_with_attrs(MakeFn) {
  static_assert(std::is_empty_v<MakeFn>, "the maker must not capture");
  return {&unary_infer<Set, MakeFn>, &unary_reference<Set, MakeFn>};
}

// An op without attributes: `fn` is a captureless generic lambda over one element.
template <unsigned Set, class Fn>
OpSpec unary_op(Fn) {
  static_assert(std::is_empty_v<Fn>, "the element function must not capture");
  return unary_op_with_attrs<Set>([](const Node&) { return Fn{}; });
}

// ---- Binary ops with numpy broadcasting; both inputs share one dtype.

template <unsigned Set, bool BoolOut, class MakeFn>
void binary_infer(const Node& node, std::span<const ValueInfo> in, std::span<ValueInfo> out) {
  require_inputs(node, in.size(), 2, 2);
  require_dtype(node, in[0].dtype, Set, "A");
  (void)MakeFn{}(node);
  if (in[1].dtype != in[0].dtype)
    throw Error(node.describe() + ": inputs have different dtypes " + std::string(dtype_name(in[0].dtype)) +
                " and " + std::string(dtype_name(in[1].dtype)));
  out[0].dtype = BoolOut ? DType::boolean : in[0].dtype;
  out[0].shape = broadcast_shapes(node, in[0].shape, in[1].shape);
}

template <unsigned Set, bool BoolOut, class MakeFn>
void binary_reference(const Node& node, std::span<const Tensor* const> in, std::span<Tensor* const> out) {
  auto fn = MakeFn{}(node);
  dispatch<Set>(in[0]->dtype(), [&](auto tag) {
    using T = decltype(tag);
    using R = std::conditional_t<BoolOut, bool, T>;
    map_binary<R, T, T>(*in[0], *in[1], *out[0], fn);
  });
}

template <unsigned Set, class MakeFn, bool BoolOut = false>
OpSpec binary_op_with_attrs(MakeFn) {
  static_assert(std::is_empty_v<MakeFn>, "the maker must not capture");
  return {&binary_infer<Set, BoolOut, MakeFn>, &binary_reference<Set, BoolOut, MakeFn>};
}

template <unsigned Set, class Fn>
OpSpec binary_op(Fn) {
  static_assert(std::is_empty_v<Fn>, "the element function must not capture");
  return binary_op_with_attrs<Set>([](const Node&) { return Fn{}; });
}

// A comparison or logic op: bool output.
template <unsigned Set, class Fn>
OpSpec predicate_op(Fn) {
  static_assert(std::is_empty_v<Fn>, "the element function must not capture");
  auto make = [](const Node&) { return Fn{}; };
  return binary_op_with_attrs<Set, decltype(make), true>(make);
}

// Parts of the family, registered by register_elementwise_ops (elementwise.cpp).
void register_unary_math_ops(OpRegistry& r);   // elementwise_unary.cpp
void register_arithmetic_ops(OpRegistry& r);   // elementwise_binary.cpp
void register_compare_logic_ops(OpRegistry& r);// elementwise_compare.cpp
void register_cast_ops(OpRegistry& r);         // elementwise_cast.cpp

}  // namespace grove::elementwise
