// Activations: Relu and its relatives, the sigmoid family, Clip and PRelu. Float ops run in
// the input's precision (float32 or float64); attributes are float32 as ONNX stores them.
#include "ops/elementwise/elementwise.h"

namespace grove {
namespace {

using namespace elementwise;

// log(1 + e^x) without overflow for large x or loss of precision for very negative x.
template <class T>
T softplus(T x) {
  return x > T(0) ? x + std::log1p(std::exp(-x)) : std::log1p(std::exp(x));
}

// x first: std::max and std::min return their first argument when the comparison is false, as
// it is for NaN, which so propagates (ONNX Runtime's HardSigmoid(NaN) is NaN).
template <class T>
T clamp01(T x) {
  return std::min(std::max(x, T(0)), T(1));
}

// ---- PRelu: the slope broadcasts to X's shape ("unidirectional"), never the other way.

void prelu_infer(const Node& node, std::span<const ValueInfo> in, std::span<ValueInfo> out) {
  require_inputs(node, in.size(), 2, 2);
  require_dtype(node, in[0].dtype, kSignedNumeric, "X");
  if (in[1].dtype != in[0].dtype)
    throw Error(node.describe() + ": slope has dtype " + std::string(dtype_name(in[1].dtype)) + ", X has " +
                std::string(dtype_name(in[0].dtype)));
  if (in[1].shape.size() > in[0].shape.size() || broadcast_shapes(node, in[0].shape, in[1].shape) != in[0].shape)
    throw Error(node.describe() + ": slope of shape " + shape_str(in[1].shape) + " does not broadcast to X of shape " +
                shape_str(in[0].shape));
  out[0].dtype = in[0].dtype;
  out[0].shape = in[0].shape;
}

void prelu_reference(const Node&, std::span<const Tensor* const> in, std::span<Tensor* const> out) {
  dispatch<kSignedNumeric>(in[0]->dtype(), [&](auto tag) {
    using T = decltype(tag);
    map_binary<T, T, T>(*in[0], *in[1], *out[0], [](T x, T slope) { return x < T(0) ? slope * x : x; });
  });
}

// ---- Clip: bounds are attributes before opset 11 and optional scalar inputs from 11 on.

void clip_infer(const Node& node, std::span<const ValueInfo> in, std::span<ValueInfo> out) {
  bool bounds_are_inputs = node.opset >= 11;
  require_inputs(node, in.size(), 1, bounds_are_inputs ? 3 : 1);
  require_dtype(node, in[0].dtype, bounds_are_inputs ? kNumeric : kFloat);
  for (size_t i = 1; i < in.size(); ++i) {
    if (!in[i].present) continue;
    const char* name = i == 1 ? "min" : "max";
    if (in[i].dtype != in[0].dtype)
      throw Error(node.describe() + ": " + name + " has dtype " + std::string(dtype_name(in[i].dtype)) + ", input has " +
                  std::string(dtype_name(in[0].dtype)));
    if (numel(in[i].shape) != 1)
      throw Error(node.describe() + ": " + name + " must be a scalar, got shape " + shape_str(in[i].shape));
  }
  out[0].dtype = in[0].dtype;
  out[0].shape = in[0].shape;
}

void clip_reference(const Node& node, std::span<const Tensor* const> in, std::span<Tensor* const> out) {
  dispatch<kNumeric>(in[0]->dtype(), [&](auto tag) {
    using T = decltype(tag);
    T lo = std::numeric_limits<T>::lowest(), hi = std::numeric_limits<T>::max();
    if (node.opset >= 11) {
      if (const Tensor* t = optional_input(in, 1)) lo = t->data<T>()[0];
      if (const Tensor* t = optional_input(in, 2)) hi = t->data<T>()[0];
    } else {
      lo = convert<T>(node.attr_float("min", std::numeric_limits<float>::lowest()));
      hi = convert<T>(node.attr_float("max", std::numeric_limits<float>::max()));
    }
    // With lo > hi every value becomes hi, as the spec asks; NaN passes through.
    map_unary<T, T>(*in[0], *out[0], [&](T x) { return x < lo ? (lo > hi ? hi : lo) : (x > hi ? hi : x); });
  });
}

// The activations a GEMM or conv applies in its epilogue, as OpSpec::as_epilogue.
OpSpec fusable(OpSpec spec, AsEpilogueFn as_epilogue) {
  spec.as_epilogue = as_epilogue;
  return spec;
}

std::optional<EpilogueActivation> relu_epilogue(const Node&, std::span<const ValueInfo>) {
  return EpilogueActivation{FusedActivation::relu};
}
std::optional<EpilogueActivation> leaky_relu_epilogue(const Node& n, std::span<const ValueInfo>) {
  return EpilogueActivation{FusedActivation::leaky_relu, n.attr_float("alpha", 0.01f)};
}
std::optional<EpilogueActivation> sigmoid_epilogue(const Node&, std::span<const ValueInfo>) {
  return EpilogueActivation{FusedActivation::sigmoid};
}
std::optional<EpilogueActivation> hard_sigmoid_epilogue(const Node& n, std::span<const ValueInfo>) {
  return EpilogueActivation{FusedActivation::hard_sigmoid, n.attr_float("alpha", 0.2f), n.attr_float("beta", 0.5f)};
}
std::optional<EpilogueActivation> hard_swish_epilogue(const Node&, std::span<const ValueInfo>) {
  return EpilogueActivation{FusedActivation::hard_swish};
}
std::optional<EpilogueActivation> gelu_epilogue(const Node& n, std::span<const ValueInfo>) {
  const std::string approximate = n.attr_string("approximate", "none");
  if (approximate != "none" && approximate != "tanh") return std::nullopt;
  return EpilogueActivation{approximate == "tanh" ? FusedActivation::gelu_tanh : FusedActivation::gelu_erf};
}
// Bounds from attributes before opset 11, from constant scalar inputs from 11 on.
std::optional<EpilogueActivation> clip_epilogue(const Node& n, std::span<const ValueInfo> in) {
  float lo = std::numeric_limits<float>::lowest(), hi = std::numeric_limits<float>::max();
  if (n.opset >= 11) {
    for (size_t k = 1; k < in.size() && k < 3; ++k) {
      if (!in[k].present) continue;
      if (!in[k].data || in[k].data->numel() != 1 || in[k].data->dtype() != DType::f32) return std::nullopt;
      (k == 1 ? lo : hi) = in[k].data->data<float>()[0];
    }
  } else {
    lo = n.attr_float("min", lo);
    hi = n.attr_float("max", hi);
  }
  return EpilogueActivation{FusedActivation::clip, lo, hi};
}

}  // namespace

void register_activation_ops(OpRegistry& r) {
  r.add("Relu", with_traits(fusable(unary_op<kSignedNumeric>([](auto x) { return x < decltype(x)(0) ? decltype(x)(0) : x; }),
                        relu_epilogue), kPerChannel));
  r.add("LeakyRelu", with_traits(fusable(unary_op_with_attrs<kFloat>([](const Node& node) {
                               float alpha = node.attr_float("alpha", 0.01f);
                               return [alpha](auto x) { return x < 0 ? x * alpha : x; };
                             }),
                             leaky_relu_epilogue), kPerChannel));
  r.add("ThresholdedRelu", with_traits(unary_op_with_attrs<kFloat>([](const Node& node) {
    float alpha = node.attr_float("alpha", 1.0f);
    return [alpha](auto x) { return x > alpha ? x : decltype(x)(0); };
  }), kPerChannel));
  r.add("Elu", with_traits(unary_op_with_attrs<kFloat>([](const Node& node) {
    float alpha = node.attr_float("alpha", 1.0f);
    return [alpha](auto x) { return x < 0 ? alpha * std::expm1(x) : x; };
  }), kPerChannel));
  r.add("Selu", with_traits(unary_op_with_attrs<kFloat>([](const Node& node) {
    float alpha = node.attr_float("alpha", 1.67326319217681884765625f);
    float gamma = node.attr_float("gamma", 1.05070102214813232421875f);
    return [alpha, gamma](auto x) { return gamma * (x > 0 ? x : alpha * std::expm1(x)); };
  }), kPerChannel));
  r.add("Celu", with_traits(unary_op_with_attrs<kFloat>([](const Node& node) {
    float alpha = node.attr_float("alpha", 1.0f);
    if (alpha == 0.0f) throw Error(node.describe() + ": alpha must not be 0");
    return [alpha](auto x) { return x > 0 ? x : alpha * std::expm1(x / alpha); };
  }), kPerChannel));
  r.add("Sigmoid", with_traits(fusable(unary_op<kFloat>([](auto x) {
                             using T = decltype(x);
                             // Only ever exp of a non-positive number, so nothing overflows.
                             if (x >= T(0)) return T(1) / (T(1) + std::exp(-x));
                             T e = std::exp(x);
                             return e / (T(1) + e);
                           }),
                           sigmoid_epilogue), kPerChannel));
  r.add("HardSigmoid", with_traits(fusable(unary_op_with_attrs<kFloat>([](const Node& node) {
                                 float alpha = node.attr_float("alpha", 0.2f);
                                 float beta = node.attr_float("beta", 0.5f);
                                 return [alpha, beta](auto x) { return clamp01<decltype(x)>(alpha * x + beta); };
                               }),
                               hard_sigmoid_epilogue), kPerChannel));
  r.add("HardSwish", with_traits(fusable(unary_op<kFloat>([](auto x) {
                               using T = decltype(x);
                               return x * clamp01<T>(x / T(6) + T(0.5));
                             }),
                             hard_swish_epilogue), kPerChannel));
  r.add("Gelu", with_traits(fusable(unary_op_with_attrs<kFloat>([](const Node& node) {  // opset 20
    const std::string approximate = node.attr_string("approximate", "none");
    if (approximate != "none" && approximate != "tanh")
      throw Error(node.describe() + ": approximate must be 'none' or 'tanh', not '" + approximate + "'");
    const bool tanh_form = approximate == "tanh";
    return [tanh_form](auto x) {
      using T = decltype(x);
      if (tanh_form) return T(0.5) * x * (T(1) + std::tanh(T(0.7978845608028654) * (x + T(0.044715) * x * x * x)));
      return T(0.5) * x * (T(1) + std::erf(x * T(0.7071067811865476)));
    };
  }), gelu_epilogue), kPerChannel));
  r.add("Tanh", with_traits(unary_op<kFloat>([](auto x) { return std::tanh(x); }), kPerChannel));
  r.add("Softplus", with_traits(unary_op<kFloat>([](auto x) { return softplus(x); }), kPerChannel));
  r.add("Softsign", with_traits(unary_op<kFloat>([](auto x) { return x / (decltype(x)(1) + std::abs(x)); }), kPerChannel));
  r.add("Mish", with_traits(unary_op<kFloat>([](auto x) { return x * std::tanh(softplus(x)); }), kPerChannel));
  r.add("PRelu", with_traits(OpSpec{&prelu_infer, &prelu_reference}, kBroadcast));
  r.add("Clip", {.infer = &clip_infer, .reference = &clip_reference, .as_epilogue = &clip_epilogue, .traits = kPerChannel});
}

}  // namespace grove
