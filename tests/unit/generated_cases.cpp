// The drawing helpers the case generators share, and the list of every family.
#include "generated_cases.h"

#include <algorithm>

namespace grove::gen {

int64_t Draw::dim(int64_t most) {
  static const std::vector<int64_t> edges = {1, 1, 2, 3, 4, 5, 7, 8, 9, 13, 15, 16, 17, 31, 32, 33};
  int64_t v = chance(0.5) ? between(1, 6) : pick(edges);
  return std::min(v, most);
}

Shape Draw::shape(size_t rank, int64_t volume, int64_t most) {
  Shape s(rank);
  for (auto& x : s) x = dim(most);
  // Shrink from the back until the volume fits: the leading dims keep their draws.
  for (size_t d = rank; d-- > 0;) {
    int64_t v = 1;
    for (int64_t x : s) v *= std::max<int64_t>(x, 1);
    if (v <= volume) break;
    s[d] = std::max<int64_t>(1, s[d] * volume / v);
  }
  return s;
}

Tensor Draw::f32(const Shape& shape, double lo, double hi) {
  Tensor t(DType::f32, shape);
  for (float& v : t.span<float>()) v = static_cast<float>(real(lo, hi));
  return t;
}

Tensor Draw::ints(DType dtype, const Shape& shape, int64_t lo, int64_t hi) {
  Tensor t(dtype, shape);
  for (int64_t k = 0; k < t.numel(); ++k) {
    const int64_t v = between(lo, hi);
    switch (dtype) {
      case DType::i8: t.data<int8_t>()[k] = static_cast<int8_t>(v); break;
      case DType::u8: t.data<uint8_t>()[k] = static_cast<uint8_t>(v); break;
      case DType::i16: t.data<int16_t>()[k] = static_cast<int16_t>(v); break;
      case DType::u16: t.data<uint16_t>()[k] = static_cast<uint16_t>(v); break;
      case DType::i32: t.data<int32_t>()[k] = static_cast<int32_t>(v); break;
      case DType::u32: t.data<uint32_t>()[k] = static_cast<uint32_t>(v); break;
      case DType::i64: t.data<int64_t>()[k] = v; break;
      case DType::u64: t.data<uint64_t>()[k] = static_cast<uint64_t>(v); break;
      default: throw Error("ints: not an integer dtype");
    }
  }
  return t;
}

Tensor Draw::booleans(const Shape& shape) {
  Tensor t(DType::boolean, shape);
  for (bool& v : t.span<bool>()) v = chance(0.5);
  return t;
}

Tensor i64s(const std::vector<int64_t>& values) {
  return Tensor::from<int64_t>({static_cast<int64_t>(values.size())}, values);
}

Tensor scalar(DType dtype, double v) {
  Tensor t(dtype, {});
  switch (dtype) {
    case DType::f32: t.data<float>()[0] = static_cast<float>(v); break;
    case DType::i64: t.data<int64_t>()[0] = static_cast<int64_t>(v); break;
    case DType::i32: t.data<int32_t>()[0] = static_cast<int32_t>(v); break;
    case DType::u8: t.data<uint8_t>()[0] = static_cast<uint8_t>(v); break;
    case DType::i8: t.data<int8_t>()[0] = static_cast<int8_t>(v); break;
    default: throw Error("scalar: unsupported dtype");
  }
  return t;
}

Shape broadcast_from(Draw& d, const Shape& out) {
  const size_t drop = static_cast<size_t>(d.between(0, static_cast<int64_t>(out.size())));
  Shape s(out.begin() + static_cast<std::ptrdiff_t>(d.chance(0.5) ? 0 : drop), out.end());
  for (auto& x : s)
    if (d.chance(0.3)) x = 1;
  return s;
}

Node node(const std::string& op, int opset, size_t inputs, size_t outputs, const std::string& domain) {
  Node n;
  n.name = "generated_" + op;
  n.op_type = op;
  n.domain = domain;
  n.opset = opset;
  for (size_t i = 0; i < inputs; ++i) n.inputs.push_back("in" + std::to_string(i));
  for (size_t i = 0; i < outputs; ++i) n.outputs.push_back("out" + std::to_string(i));
  return n;
}

namespace {
Attribute& fresh(Node& n, const std::string& key, Attribute::Kind kind) {
  Attribute& a = n.attrs[key] = Attribute{};
  a.kind = kind;
  return a;
}
}  // namespace

void set_attr(Node& n, const std::string& key, int64_t v) { fresh(n, key, Attribute::Kind::i).i = v; }
void set_attr(Node& n, const std::string& key, float v) { fresh(n, key, Attribute::Kind::f).f = v; }
void set_attr(Node& n, const std::string& key, const std::string& v) { fresh(n, key, Attribute::Kind::s).s = v; }
void set_attr(Node& n, const std::string& key, const std::vector<int64_t>& v) {
  fresh(n, key, Attribute::Kind::ints).ints = v;
}
void set_attr(Node& n, const std::string& key, const std::vector<float>& v) {
  fresh(n, key, Attribute::Kind::floats).floats = v;
}

std::vector<Family> all_families() {
  std::vector<Family> families;
  add_elementwise_families(families);
  add_row_and_movement_families(families);
  add_nn_families(families);
  add_quantized_families(families);
  add_fused_families(families);
  return families;
}

}  // namespace grove::gen
