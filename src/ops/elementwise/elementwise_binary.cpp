// Arithmetic with numpy broadcasting: Add, Sub, Mul, Div, Mod, Pow, BitShift, and the
// variadic Min, Max, Sum, Mean.
#include "ops/elementwise/elementwise.h"

namespace grove::elementwise {
namespace {

// Integer arithmetic wraps around (as ONNX Runtime's does) instead of overflowing into
// undefined behaviour: compute modulo 2^64, then narrow.
template <class T, class Op>
T wrapping(T a, T b, Op op) {
  if constexpr (std::is_integral_v<T>) return static_cast<T>(op(static_cast<uint64_t>(a), static_cast<uint64_t>(b)));
  else return op(a, b);
}

// C-style division: integers truncate toward zero. A zero divisor is bad input, not a crash.
template <class T>
T divide(T a, T b) {
  if constexpr (std::is_integral_v<T>) {
    if (b == 0) throw Error("integer division by zero");
    if constexpr (std::is_signed_v<T>) {
      if (b == -1) return wrapping(T(0), a, std::minus<>());  // INT_MIN / -1 would trap
    }
  }
  return static_cast<T>(a / b);
}

// fmod = 1: the remainder takes the dividend's sign (C fmod / %). fmod = 0: it takes the
// divisor's sign (Python %).
template <class T>
T modulo(T a, T b, bool c_style) {
  T r;
  if constexpr (std::is_floating_point_v<T>) {
    r = std::fmod(a, b);
  } else {
    if (b == 0) throw Error("integer modulo by zero");
    if constexpr (std::is_signed_v<T>) {
      if (b == -1) return T(0);  // INT_MIN % -1 would trap
    }
    r = static_cast<T>(a % b);
  }
  if constexpr (std::is_signed_v<T> || std::is_floating_point_v<T>) {
    if (!c_style && r != 0 && ((r < 0) != (b < 0))) r = static_cast<T>(r + b);
  }
  return r;
}

// Base and exponent may have different dtypes; the result has the base's dtype.
template <class B, class E>
B power(B base, E exponent) {
  if constexpr (std::is_integral_v<B> && std::is_integral_v<E>) {
    if (exponent >= 0) {  // exact, by squaring; wraps like the other integer ops
      uint64_t result = 1, factor = static_cast<uint64_t>(base);
      for (auto e = static_cast<uint64_t>(exponent); e != 0; e >>= 1) {
        if (e & 1) result *= factor;
        factor *= factor;
      }
      return static_cast<B>(result);
    }
  }
  return convert<B>(std::pow(static_cast<double>(base), static_cast<double>(exponent)));
}

template <class T>
T maximum(T a, T b) {
  if constexpr (std::is_floating_point_v<T>) {
    if (std::isnan(a) || std::isnan(b)) return std::numeric_limits<T>::quiet_NaN();
  }
  return a < b ? b : a;
}

template <class T>
T minimum(T a, T b) {
  if constexpr (std::is_floating_point_v<T>) {
    if (std::isnan(a) || std::isnan(b)) return std::numeric_limits<T>::quiet_NaN();
  }
  return b < a ? b : a;
}

void pow_infer(const Node& node, std::span<const ValueInfo> in, std::span<ValueInfo> out) {
  require_inputs(node, in.size(), 2, 2);
  require_dtype(node, in[0].dtype, kNumeric, "base");
  require_dtype(node, in[1].dtype, kNumeric, "exponent");
  out[0].dtype = in[0].dtype;
  out[0].shape = broadcast_shapes(node, in[0].shape, in[1].shape);
}

// The exponent in its family's widest type (f64, i64 or u64), which power() computes in
// anyway: the same results, and 10 x 3 base-by-exponent loops instead of 10 x 10 (which made
// this file a tenth of the sanitizer build's compile time).
Tensor widened_exponent(const Tensor& exponent) {
  Tensor wide;
  dispatch<kNumeric>(exponent.dtype(), [&](auto tag) {
    using E = decltype(tag);
    using W = std::conditional_t<std::is_floating_point_v<E>, double, std::conditional_t<std::is_signed_v<E>, int64_t, uint64_t>>;
    if constexpr (std::is_same_v<E, W>) {
      wide = exponent;
    } else {
      wide = Tensor(dtype_of<W>(), exponent.shape());
      const E* from = exponent.data<E>();
      W* to = wide.data<W>();
      for (int64_t i = 0, n = exponent.numel(); i < n; ++i) to[i] = static_cast<W>(from[i]);
    }
  });
  return wide;
}

void pow_reference(const Node&, std::span<const Tensor* const> in, std::span<Tensor* const> out) {
  const Tensor exponent = widened_exponent(*in[1]);
  dispatch<kNumeric>(in[0]->dtype(), [&](auto base_tag) {
    using B = decltype(base_tag);
    switch (exponent.dtype()) {
      case DType::f64: map_binary<B, B, double>(*in[0], exponent, *out[0], power<B, double>); break;
      case DType::i64: map_binary<B, B, int64_t>(*in[0], exponent, *out[0], power<B, int64_t>); break;
      default: map_binary<B, B, uint64_t>(*in[0], exponent, *out[0], power<B, uint64_t>); break;
    }
  });
}

// ---- Variadic ops: any number of inputs of one dtype, all broadcast together.

template <unsigned Set>
void variadic_infer(const Node& node, std::span<const ValueInfo> in, std::span<ValueInfo> out) {
  require_inputs(node, in.size(), 1, -1);
  require_dtype(node, in[0].dtype, Set);
  Shape shape = in[0].shape;
  for (size_t k = 1; k < in.size(); ++k) {
    if (in[k].dtype != in[0].dtype)
      throw Error(node.describe() + ": input " + std::to_string(k) + " has dtype " + std::string(dtype_name(in[k].dtype)) +
                  ", input 0 has " + std::string(dtype_name(in[0].dtype)));
    shape = broadcast_shapes(node, shape, in[k].shape);
  }
  out[0].dtype = in[0].dtype;
  out[0].shape = shape;
}

// Folds the inputs left to right into the output: out = in0, then out = f(out, in_k).
template <class T, class F>
void fold_inputs(std::span<const Tensor* const> in, Tensor& out, F f) {
  T* po = out.data<T>();
  const T* first = in[0]->data<T>();
  for_each_broadcast<1>(out.shape(), {&in[0]->shape()}, [&](int64_t i, const std::array<int64_t, 1>& off) { po[i] = first[off[0]]; });
  for (size_t k = 1; k < in.size(); ++k) {
    const T* pk = in[k]->data<T>();
    for_each_broadcast<1>(out.shape(), {&in[k]->shape()}, [&](int64_t i, const std::array<int64_t, 1>& off) { po[i] = f(po[i], pk[off[0]]); });
  }
}

void max_reference(const Node&, std::span<const Tensor* const> in, std::span<Tensor* const> out) {
  dispatch<kNumeric>(in[0]->dtype(), [&](auto tag) { fold_inputs<decltype(tag)>(in, *out[0], maximum<decltype(tag)>); });
}

void min_reference(const Node&, std::span<const Tensor* const> in, std::span<Tensor* const> out) {
  dispatch<kNumeric>(in[0]->dtype(), [&](auto tag) { fold_inputs<decltype(tag)>(in, *out[0], minimum<decltype(tag)>); });
}

void sum_reference(const Node&, std::span<const Tensor* const> in, std::span<Tensor* const> out) {
  dispatch<kNumeric>(in[0]->dtype(), [&](auto tag) {
    using T = decltype(tag);
    fold_inputs<T>(in, *out[0], [](T a, T b) { return wrapping(a, b, std::plus<>()); });
  });
}

void mean_reference(const Node&, std::span<const Tensor* const> in, std::span<Tensor* const> out) {
  dispatch<kFloat>(in[0]->dtype(), [&](auto tag) {
    using T = decltype(tag);
    fold_inputs<T>(in, *out[0], std::plus<T>());
    for (T& v : out[0]->span<T>()) v /= static_cast<T>(in.size());
  });
}

}  // namespace

void register_arithmetic_ops(OpRegistry& r) {
  r.add("Add", with_traits(binary_op<kNumeric>([](auto a, auto b) { return wrapping(a, b, std::plus<>()); }), kBroadcast));
  r.add("Sub", with_traits(binary_op<kNumeric>([](auto a, auto b) { return wrapping(a, b, std::minus<>()); }), kBroadcast));
  r.add("Mul", with_traits(binary_op<kNumeric>([](auto a, auto b) { return wrapping(a, b, std::multiplies<>()); }), kBroadcast));
  r.add("Div", with_traits(binary_op<kNumeric>([](auto a, auto b) { return divide(a, b); }), kBroadcast));
  r.add("Mod", binary_op_with_attrs<kNumeric>([](const Node& node) {
    int64_t fmod = node.attr_int("fmod", 0);
    if (fmod != 0 && fmod != 1) throw Error(node.describe() + ": fmod must be 0 or 1, got " + std::to_string(fmod));
    return [c_style = fmod == 1](auto a, auto b) { return modulo(a, b, c_style); };
  }));
  r.add("BitShift", binary_op_with_attrs<kUnsigned>([](const Node& node) {
    std::string direction = node.attr_string("direction", "");
    if (direction != "LEFT" && direction != "RIGHT")
      throw Error(node.describe() + ": direction must be LEFT or RIGHT, got '" + direction + "'");
    return [left = direction == "LEFT"](auto x, auto amount) -> decltype(x) {
      using T = decltype(x);
      // Shifting by the bit width or more is undefined in C++; every bit is shifted out.
      if (amount >= sizeof(T) * 8) return T(0);
      return static_cast<T>(left ? x << amount : x >> amount);
    };
  }));
  r.add("Pow", with_traits(OpSpec{&pow_infer, &pow_reference}, kBroadcast));
  r.add("Max", with_traits(OpSpec{&variadic_infer<kNumeric>, &max_reference}, kBroadcast));
  r.add("Min", with_traits(OpSpec{&variadic_infer<kNumeric>, &min_reference}, kBroadcast));
  r.add("Sum", with_traits(OpSpec{&variadic_infer<kNumeric>, &sum_reference}, kBroadcast));
  r.add("Mean", with_traits(OpSpec{&variadic_infer<kFloat>, &mean_reference}, kBroadcast));
}

}  // namespace grove::elementwise
