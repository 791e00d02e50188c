// Generators of the elementwise ops: unary maps with their attributes, broadcasting binary
// and variadic ops, comparisons and logic, Where, PRelu, Clip and Cast. Inputs stay inside
// each op's domain (logs of positives, acos of [-1, 1]) so the reference is defined.
#include <cmath>
#include <limits>

#include "generated_cases.h"
#include "ops/evaluate.h"

namespace grove::gen {
namespace {

// Rank 0 to 6; most volume in the low ranks.
Shape any_shape(Draw& d, int64_t volume = 1200) { return d.shape(static_cast<size_t>(d.between(0, 6)), volume); }

// The ops computed by the vector maths kernels rather than the reference: a few ulps apart.
bool vector_math(const std::string& op) { return op == "Erf" || op == "Tanh" || op == "Sigmoid"; }

Case unary(Draw& d, const std::string& op) {
  const Shape s = any_shape(d);
  Case c{node(op, 13, 1), {}, {false}, vector_math(op) ? 2e-6 : 0};
  double lo = -3, hi = 3;
  if (op == "Sqrt" || op == "Log") lo = 0.01, hi = 4;
  if (op == "Asin" || op == "Acos" || op == "Atanh") lo = -0.99, hi = 0.99;
  if (op == "Acosh") lo = 1.01, hi = 4;
  if (op == "Tan") lo = -1.2, hi = 1.2;
  if (op == "Reciprocal") lo = 0.1, hi = 2;
  if (op == "Not") {
    c.inputs.push_back(d.booleans(s));
    return c;
  }
  Tensor x = d.f32(s, lo, hi);
  if (op == "Round" || op == "Floor" || op == "Ceil")  // halves and whole numbers: the ties
    for (float& v : x.span<float>())
      if (d.chance(0.3)) v = static_cast<float>(d.between(-6, 6)) * 0.5f;
  if (op == "IsNaN" || op == "IsInf" || op == "Identity" || op == "Abs" || op == "Neg" || op == "Sign")
    for (float& v : x.span<float>()) {
      if (d.chance(0.1)) v = std::numeric_limits<float>::infinity() * (d.chance(0.5) ? 1.0f : -1.0f);
      else if (d.chance(0.05)) v = std::numeric_limits<float>::quiet_NaN();
      else if (d.chance(0.1)) v = 0.0f;
    }
  if (op == "IsInf") {
    c.node.opset = 10;
    if (d.chance(0.5)) set_attr(c.node, "detect_positive", d.between(0, 1));
    if (d.chance(0.5)) set_attr(c.node, "detect_negative", d.between(0, 1));
  }
  if ((op == "LeakyRelu" || op == "ThresholdedRelu" || op == "Elu") && d.chance(0.7))
    set_attr(c.node, "alpha", static_cast<float>(d.real(0.01, 1.5)));
  if (op == "Celu") {
    c.node.opset = 12;
    if (d.chance(0.7)) set_attr(c.node, "alpha", static_cast<float>(d.real(0.2, 2)));
  }
  if (op == "Selu") {
    if (d.chance(0.5)) set_attr(c.node, "alpha", static_cast<float>(d.real(1, 2)));
    if (d.chance(0.5)) set_attr(c.node, "gamma", static_cast<float>(d.real(0.5, 1.5)));
  }
  if (op == "HardSigmoid") {
    if (d.chance(0.5)) set_attr(c.node, "alpha", static_cast<float>(d.real(0.05, 0.5)));
    if (d.chance(0.5)) set_attr(c.node, "beta", static_cast<float>(d.real(0.2, 0.8)));
  }
  if (op == "HardSwish") c.node.opset = 14;
  if (op == "Mish") c.node.opset = 18;
  if (op == "Gelu") {
    c.node.opset = 20;
    if (d.chance(0.6)) set_attr(c.node, "approximate", std::string(d.chance(0.5) ? "tanh" : "none"));
  }
  if (op == "Identity" && d.chance(0.3)) x = d.ints(DType::i64, s, -1000, 1000);
  c.inputs.push_back(std::move(x));
  return c;
}

// Two to four shapes that broadcast together (numpy rules).
std::vector<Shape> broadcast_shapes(Draw& d, size_t count) {
  const Shape out = any_shape(d, 900);
  std::vector<Shape> shapes;
  for (size_t i = 0; i < count; ++i) shapes.push_back(d.chance(0.3) ? out : broadcast_from(d, out));
  shapes[static_cast<size_t>(d.between(0, static_cast<int64_t>(count) - 1))] = out;
  return shapes;
}

Case binary(Draw& d, const std::string& op) {
  const bool variadic = op == "Max" || op == "Min" || op == "Sum" || op == "Mean";
  const size_t count = variadic ? static_cast<size_t>(d.between(1, 4)) : op == "Where" ? 3 : 2;
  const std::vector<Shape> shapes = broadcast_shapes(d, count);
  Case c{node(op, 13, count), {}, std::vector<bool>(count, false), 0};
  if (op == "Add" || op == "Sub" || op == "Mul" || op == "Max" || op == "Min" || op == "Sum" || op == "Mean") {
    const bool integer = !(op == "Mean") && d.chance(0.2);
    for (const Shape& s : shapes) c.inputs.push_back(integer ? d.ints(DType::i32, s, -50, 50) : d.f32(s));
  } else if (op == "Div") {
    c.inputs.push_back(d.f32(shapes[0]));
    Tensor y = d.f32(shapes[1], 0.25, 2);
    for (float& v : y.span<float>())
      if (d.chance(0.5)) v = -v;
    c.inputs.push_back(std::move(y));
  } else if (op == "Pow") {
    if (d.chance(0.7)) {
      c.inputs.push_back(d.f32(shapes[0], 0.1, 3));
      c.inputs.push_back(d.f32(shapes[1], -2, 2));
    } else {  // an integer exponent on any base
      c.inputs.push_back(d.f32(shapes[0], -3, 3));
      c.inputs.push_back(d.ints(DType::i64, shapes[1], 0, 3));
    }
  } else if (op == "Mod") {
    if (d.chance(0.5)) {
      set_attr(c.node, "fmod", int64_t{1});
      c.inputs.push_back(d.f32(shapes[0], -10, 10));
      c.inputs.push_back(d.f32(shapes[1], 0.5, 3));
    } else {
      c.inputs.push_back(d.ints(DType::i32, shapes[0], -40, 40));
      Tensor y = d.ints(DType::i32, shapes[1], 1, 7);
      for (int32_t& v : y.span<int32_t>())
        if (d.chance(0.5)) v = -v;
      c.inputs.push_back(std::move(y));
    }
  } else if (op == "BitShift") {
    const DType t = d.chance(0.5) ? DType::u8 : DType::u32;
    set_attr(c.node, "direction", std::string(d.chance(0.5) ? "LEFT" : "RIGHT"));
    c.inputs.push_back(d.ints(t, shapes[0], 0, 255));
    c.inputs.push_back(d.ints(t, shapes[1], 0, 7));
  } else if (op == "And" || op == "Or" || op == "Xor") {
    for (const Shape& s : shapes) c.inputs.push_back(d.booleans(s));
  } else if (op == "Where") {
    c.inputs.push_back(d.booleans(shapes[0]));
    c.inputs.push_back(d.f32(shapes[1]));
    c.inputs.push_back(d.f32(shapes[2]));
  } else {  // comparisons: few distinct values, so equal elements occur
    for (const Shape& s : shapes) {
      Tensor x = d.f32(s);
      for (float& v : x.span<float>()) v = static_cast<float>(d.between(-2, 2)) * 0.5f;
      c.inputs.push_back(std::move(x));
    }
  }
  return c;
}

// PRelu's slope broadcasts to X one way: X's trailing dims, some of them 1.
Case prelu(Draw& d, const std::string& op) {
  const Shape x = d.shape(static_cast<size_t>(d.between(1, 5)), 1200);
  Shape slope = d.pick(std::vector<int>{0, 1, 2, 3}) == 0 ? Shape{1} : broadcast_from(d, x);
  if (x.size() >= 3 && d.chance(0.3)) {  // the exporters' [C, 1, 1]
    slope = Shape(x.size() - 1, 1);
    slope[0] = x[1];
  }
  return Case{node(op, 9, 2), {d.f32(x), d.f32(slope, -0.5, 0.5)}, {false, d.chance(0.5)}, 0};
}

Case clip(Draw& d, const std::string& op) {
  const Shape s = any_shape(d);
  const float lo = static_cast<float>(d.real(-1.5, 0.5)), hi = lo + static_cast<float>(d.real(0, 2));
  if (d.chance(0.2)) {  // opset 6: bounds as attributes
    Case c{node(op, 6, 1), {d.f32(s)}, {false}, 0};
    if (d.chance(0.7)) set_attr(c.node, "min", lo);
    if (d.chance(0.7)) set_attr(c.node, "max", hi);
    return c;
  }
  Case c{node(op, 13, 3), {d.f32(s), Tensor(), Tensor()}, {false, true, true}, 0};
  if (d.chance(0.8)) c.inputs[1] = scalar(DType::f32, lo);
  if (d.chance(0.8)) c.inputs[2] = scalar(DType::f32, hi);
  if (c.inputs[2].empty() && d.chance(0.5)) c.node.inputs.pop_back(), c.inputs.pop_back(), c.constant.pop_back();
  return c;
}

Case cast(Draw& d, const std::string& op) {
  const Shape s = any_shape(d);
  const std::vector<DType> types = {DType::f32, DType::f64, DType::i32, DType::i64, DType::u8,
                                    DType::i8,  DType::boolean, DType::f16};
  const DType from = d.pick(types), to = d.pick(types);
  Case c{node(op, 13, 1), {}, {false}, 0};
  set_attr(c.node, "to", static_cast<int64_t>(dtype_to_onnx(to)));
  // Values every target holds exactly: small non-negative integers, or floats in [0, 100).
  if (from == DType::boolean) c.inputs.push_back(d.booleans(s));
  else if (from == DType::f32) c.inputs.push_back(d.f32(s, 0, 100));
  else if (from == DType::f64 || from == DType::f16) {
    Tensor x = d.f32(s, 0, 100);
    for (float& v : x.span<float>()) v = std::round(v * 4) / 4;  // exact in float16
    Node to_from = node("Cast", 13, 1);
    set_attr(to_from, "to", static_cast<int64_t>(dtype_to_onnx(from)));
    c.inputs.push_back(evaluate_node(to_from, std::vector<const Tensor*>{&x}).at(0));
  } else c.inputs.push_back(d.ints(from, s, 0, 100));
  return c;
}

}  // namespace

void add_elementwise_families(std::vector<Family>& families) {
  families.push_back({"unary",
                      {"Sqrt", "Exp", "Log", "Reciprocal", "Floor", "Ceil", "Round", "Sin", "Cos", "Tan", "Asin",
                       "Acos", "Atan", "Sinh", "Cosh", "Asinh", "Acosh", "Atanh", "Neg", "Abs", "Sign", "Not",
                       "IsNaN", "IsInf", "LeakyRelu", "ThresholdedRelu", "Elu", "Selu", "Celu", "HardSigmoid",
                       "HardSwish", "Softplus", "Softsign", "Mish", "Gelu", "Identity", "Relu", "Erf", "Tanh",
                       "Sigmoid"},
                      unary});
  families.push_back({"binary",
                      {"Add", "Sub", "Mul", "Div", "Pow", "Mod", "BitShift", "Max", "Min", "Sum", "Mean", "Equal",
                       "Less", "Greater", "LessOrEqual", "GreaterOrEqual", "And", "Or", "Xor", "Where"},
                      binary});
  families.push_back({"prelu", {"PRelu"}, prelu});
  families.push_back({"clip", {"Clip"}, clip});
  families.push_back({"cast", {"Cast"}, cast});
}

}  // namespace grove::gen
