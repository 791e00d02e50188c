// Unary math (Sqrt, Exp, trig, Floor, Round, Sign, Neg, Abs, ...), Not, IsNaN and IsInf.
#include "ops/elementwise/elementwise.h"

namespace grove::elementwise {
namespace {

// -x without signed overflow: -INT_MIN wraps to INT_MIN, as two's complement hardware does.
template <class T>
T negate(T x) {
  if constexpr (std::is_integral_v<T>) return static_cast<T>(std::make_unsigned_t<T>(0) - static_cast<std::make_unsigned_t<T>>(x));
  else return -x;
}

// Round half to even, independent of the floating-point environment's rounding mode.
template <class T>
T round_half_even(T x) {
  T r = std::round(x);  // half away from zero
  if (std::abs(x - std::trunc(x)) == T(0.5)) r = T(2) * std::round(x / T(2));
  return r;
}

// IsNaN and IsInf: a float input, a bool output of the same shape.
void float_test_infer(const Node& node, std::span<const ValueInfo> in, std::span<ValueInfo> out) {
  require_inputs(node, in.size(), 1, 1);
  require_dtype(node, in[0].dtype, kFloat);
  out[0].dtype = DType::boolean;
  out[0].shape = in[0].shape;
}

void isnan_reference(const Node&, std::span<const Tensor* const> in, std::span<Tensor* const> out) {
  dispatch<kFloat>(in[0]->dtype(), [&](auto tag) {
    using T = decltype(tag);
    map_unary<bool, T>(*in[0], *out[0], [](T x) { return std::isnan(x); });
  });
}

void isinf_reference(const Node& node, std::span<const Tensor* const> in, std::span<Tensor* const> out) {
  bool negative = node.attr_int("detect_negative", 1) != 0;
  bool positive = node.attr_int("detect_positive", 1) != 0;
  dispatch<kFloat>(in[0]->dtype(), [&](auto tag) {
    using T = decltype(tag);
    map_unary<bool, T>(*in[0], *out[0], [&](T x) { return std::isinf(x) && (x > 0 ? positive : negative); });
  });
}

}  // namespace

void register_unary_math_ops(OpRegistry& r) {
  r.add("Sqrt", with_traits(unary_op<kFloat>([](auto x) { return std::sqrt(x); }), kPerChannel));
  r.add("Exp", with_traits(unary_op<kFloat>([](auto x) { return std::exp(x); }), kPerChannel));
  r.add("Log", with_traits(unary_op<kFloat>([](auto x) { return std::log(x); }), kPerChannel));
  r.add("Erf", with_traits(unary_op<kFloat>([](auto x) { return std::erf(x); }), kPerChannel));
  r.add("Reciprocal", with_traits(unary_op<kFloat>([](auto x) { return decltype(x)(1) / x; }), kPerChannel));
  r.add("Floor", with_traits(unary_op<kFloat>([](auto x) { return std::floor(x); }), kPerChannel));
  r.add("Ceil", with_traits(unary_op<kFloat>([](auto x) { return std::ceil(x); }), kPerChannel));
  r.add("Round", with_traits(unary_op<kFloat>([](auto x) { return round_half_even(x); }), kPerChannel));
  r.add("Sin", unary_op<kFloat>([](auto x) { return std::sin(x); }));
  r.add("Cos", unary_op<kFloat>([](auto x) { return std::cos(x); }));
  r.add("Tan", unary_op<kFloat>([](auto x) { return std::tan(x); }));
  r.add("Asin", unary_op<kFloat>([](auto x) { return std::asin(x); }));
  r.add("Acos", unary_op<kFloat>([](auto x) { return std::acos(x); }));
  r.add("Atan", unary_op<kFloat>([](auto x) { return std::atan(x); }));
  r.add("Sinh", unary_op<kFloat>([](auto x) { return std::sinh(x); }));
  r.add("Cosh", unary_op<kFloat>([](auto x) { return std::cosh(x); }));
  r.add("Asinh", unary_op<kFloat>([](auto x) { return std::asinh(x); }));
  r.add("Acosh", unary_op<kFloat>([](auto x) { return std::acosh(x); }));
  r.add("Atanh", unary_op<kFloat>([](auto x) { return std::atanh(x); }));

  r.add("Neg", with_traits(unary_op<kSignedNumeric>([](auto x) { return negate(x); }), kPerChannel));
  r.add("Abs", with_traits(unary_op<kNumeric>([](auto x) {
    if constexpr (std::is_unsigned_v<decltype(x)>) return x;
    else return x < 0 ? negate(x) : x;
  }), kPerChannel));
  r.add("Sign", unary_op<kNumeric>([](auto x) {
    using T = decltype(x);
    if constexpr (std::is_floating_point_v<T>) {
      if (std::isnan(x)) return x;
    }
    return static_cast<T>((T(0) < x) - (x < T(0)));
  }));

  r.add("Not", unary_op<kBool>([](bool x) { return !x; }));
  r.add("IsNaN", OpSpec{&float_test_infer, &isnan_reference});
  r.add("IsInf", OpSpec{&float_test_infer, &isinf_reference});
}

}  // namespace grove::elementwise
