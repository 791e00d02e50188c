// Generators of the 8-bit ops: Quantize/DequantizeLinear per tensor and per axis, the
// integer products (MatMulInteger, ConvInteger) with scalar and per-row/column zero points,
// and the QLinear forms that requantize their result.
#include <algorithm>

#include "generated_cases.h"

namespace grove::gen {
namespace {

DType any_8bit(Draw& d) { return d.chance(0.5) ? DType::u8 : DType::i8; }
Tensor any_8bit_values(Draw& d, DType t, const Shape& s) {
  return t == DType::u8 ? d.ints(t, s, 0, 255) : d.ints(t, s, -128, 127);
}

// Per tensor (a scalar) or per axis ([C]) scale and zero point.
Case quantize_linear(Draw& d, const std::string& op) {
  const Shape s = d.shape(static_cast<size_t>(d.between(1, 4)), 1200);
  const bool quantize = op == "QuantizeLinear";
  const DType q = any_8bit(d);
  Case c{node(op, 13, 3), {}, {}, 0};
  Shape param = {};
  if (d.chance(0.4)) {
    const int64_t axis = d.between(0, static_cast<int64_t>(s.size()) - 1);
    set_attr(c.node, "axis", axis);
    param = {s[static_cast<size_t>(axis)]};
  }
  Tensor scale = d.f32(param, 0.005, 0.1);
  Tensor zero = q == DType::u8 ? d.ints(q, param, 0, 255) : d.ints(q, param, -128, 127);
  c.inputs = {quantize ? d.f32(s, -6, 6) : any_8bit_values(d, q, s), std::move(scale), std::move(zero)};
  if (!quantize && d.chance(0.2)) c.inputs[0] = d.ints(DType::i32, s, -5000, 5000), c.inputs[2] = Tensor();
  c.constant = {false, true, true};
  if (c.inputs[2].empty() || (quantize && q == DType::u8 && d.chance(0.2))) {
    c.inputs.pop_back(), c.constant.pop_back(), c.node.inputs.pop_back();  // u8 by default
  }
  return c;
}

Case matmul_integer(Draw& d, const std::string& op) {
  const int64_t m = d.dim(), k = d.dim(), n = d.dim();
  const Shape batch = d.chance(0.3) ? Shape{d.between(1, 3)} : Shape{};
  Shape a = batch, b = {k, n};
  a.push_back(m), a.push_back(k);
  const DType ta = any_8bit(d), tb = any_8bit(d);
  Case c{node(op, 10, 4), {any_8bit_values(d, ta, a), any_8bit_values(d, tb, b)}, {false, true}, 0};
  c.inputs.push_back(d.chance(0.6) ? any_8bit_values(d, ta, d.chance(0.7) ? Shape{} : Shape{m}) : Tensor());
  c.inputs.push_back(d.chance(0.6) ? any_8bit_values(d, tb, d.chance(0.7) ? Shape{} : Shape{n}) : Tensor());
  c.constant.push_back(true), c.constant.push_back(true);
  return c;
}

Case qlinear_matmul(Draw& d, const std::string& op) {
  const int64_t m = d.dim(), k = d.dim(), n = d.dim();
  const DType ta = any_8bit(d), tb = any_8bit(d), ty = any_8bit(d);
  Case c{node(op, 10, 8), {}, {}, 0};
  c.inputs = {any_8bit_values(d, ta, {m, k}), scalar(DType::f32, d.real(0.01, 0.05)), any_8bit_values(d, ta, {}),
              any_8bit_values(d, tb, {k, n}), scalar(DType::f32, d.real(0.01, 0.05)), any_8bit_values(d, tb, {}),
              scalar(DType::f32, d.real(0.05, 0.5)), any_8bit_values(d, ty, {})};
  c.constant = {false, true, true, true, true, true, true, true};
  return c;
}

// A small 2-D conv geometry for the integer convs.
struct ConvShape {
  Shape x, w;
  std::vector<int64_t> strides, pads;
};

ConvShape conv_shape(Draw& d) {
  const int64_t cin = d.pick(std::vector<int64_t>{1, 3, 8, 16}), cout = d.pick(std::vector<int64_t>{1, 4, 16, 17});
  const int64_t k = d.pick(std::vector<int64_t>{1, 3}), s = d.chance(0.7) ? 1 : 2;
  ConvShape c{{d.between(1, 2), cin, d.between(k, 12), d.between(k, 12)}, {cout, cin, k, k}, {s, s}, {0, 0, 0, 0}};
  if (k == 3 && d.chance(0.5)) c.pads = {1, 1, 1, 1};
  return c;
}

void set_conv(Node& n, const ConvShape& s) {
  set_attr(n, "kernel_shape", std::vector<int64_t>{s.w[2], s.w[3]});
  set_attr(n, "strides", s.strides);
  set_attr(n, "pads", s.pads);
}

Case conv_integer(Draw& d, const std::string& op) {
  const ConvShape s = conv_shape(d);
  const DType tx = any_8bit(d), tw = any_8bit(d);
  Case c{node(op, 10, 4), {any_8bit_values(d, tx, s.x), any_8bit_values(d, tw, s.w)}, {false, true}, 0};
  set_conv(c.node, s);
  c.inputs.push_back(d.chance(0.7) ? any_8bit_values(d, tx, {}) : Tensor());
  c.inputs.push_back(d.chance(0.7) ? any_8bit_values(d, tw, d.chance(0.5) ? Shape{} : Shape{s.w[0]}) : Tensor());
  c.constant.push_back(true), c.constant.push_back(true);
  return c;
}

Case qlinear_conv(Draw& d, const std::string& op) {
  const ConvShape s = conv_shape(d);
  const DType tx = any_8bit(d), tw = any_8bit(d);
  Case c{node(op, 10, 9), {}, {}, 0};
  set_conv(c.node, s);
  const Shape per_channel = d.chance(0.5) ? Shape{} : Shape{s.w[0]};
  c.inputs = {any_8bit_values(d, tx, s.x), scalar(DType::f32, d.real(0.01, 0.05)), any_8bit_values(d, tx, {}),
              any_8bit_values(d, tw, s.w), d.f32(per_channel, 0.002, 0.02), tw == DType::u8 ? d.ints(tw, per_channel, 100, 150) : d.ints(tw, per_channel, 0, 0),
              scalar(DType::f32, d.real(0.05, 0.5)), any_8bit_values(d, tx, {}),
              d.chance(0.6) ? d.ints(DType::i32, {s.w[0]}, -2000, 2000) : Tensor()};
  c.constant = std::vector<bool>(9, true);
  c.constant[0] = false;
  if (c.inputs[8].empty()) c.inputs.pop_back(), c.constant.pop_back(), c.node.inputs.pop_back();
  return c;
}

}  // namespace

void add_quantized_families(std::vector<Family>& families) {
  families.push_back({"quantize_linear", {"QuantizeLinear", "DequantizeLinear"}, quantize_linear});
  families.push_back({"matmul_integer", {"MatMulInteger"}, matmul_integer});
  families.push_back({"qlinear_matmul", {"QLinearMatMul"}, qlinear_matmul});
  families.push_back({"conv_integer", {"ConvInteger"}, conv_integer});
  families.push_back({"qlinear_conv", {"QLinearConv"}, qlinear_conv});
}

}  // namespace grove::gen
