// Pow(x, c) with a constant exponent c in {1, 2, 3, 4, 0.5, -0.5, -1, -2} becomes Mul, Sqrt
// and Reciprocal nodes: the general pow is exp(c log x) per element, many times slower than a
// multiply, and torch's export of LayerNorm and GELU writes Pow(x, 2) and Pow(x, 3).
// The new nodes take the Pow's place in the order; the last keeps its output name.
#include <cmath>
#include <optional>

#include "ops/op_names.h"
#include "passes/passes.h"

namespace grove {
namespace {

std::optional<double> scalar_exponent(const Graph& g, const std::string& name) {
  auto it = g.initializers.find(name);
  if (it == g.initializers.end() || it->second.numel() != 1) return std::nullopt;
  const Tensor& t = it->second;
  switch (t.dtype()) {
    case DType::f32: return t.data<float>()[0];
    case DType::f64: return t.data<double>()[0];
    case DType::i64: return static_cast<double>(t.data<int64_t>()[0]);
    case DType::i32: return static_cast<double>(t.data<int32_t>()[0]);
    default: return std::nullopt;
  }
}

// The steps computing x^c: each an op on the previous value ("x" is the Pow's input). Two
// steps are Muls of a kind, named here only: Square (v * v) and MulX (x * v).
constexpr std::string_view kPowSquareStep = "Square", kPowMulXStep = "MulX";
std::optional<std::vector<std::string_view>> steps_for(double c) {
  using Steps = std::vector<std::string_view>;
  if (c == 1) return Steps{kIdentity};
  if (c == 2) return Steps{kPowSquareStep};
  if (c == 3) return Steps{kPowSquareStep, kPowMulXStep};
  if (c == 4) return Steps{kPowSquareStep, kPowSquareStep};
  if (c == 0.5) return Steps{kSqrt};
  if (c == -0.5) return Steps{kSqrt, kReciprocal};
  if (c == -1) return Steps{kReciprocal};
  if (c == -2) return Steps{kPowSquareStep, kReciprocal};
  return std::nullopt;
}

}  // namespace

int rewrite_constant_pow(Graph& g) {
  int rewritten = 0;
  std::vector<Node> out;
  out.reserve(g.nodes.size());
  for (auto& n : g.nodes) {
    std::optional<std::vector<std::string_view>> steps;
    const ValueInfo* x = nullptr;
    if (n.domain.empty() && n.op_type == kPow && n.inputs.size() == 2 && n.outputs.size() == 1) {
      auto xi = g.values.find(n.inputs[0]);
      auto yi = g.values.find(n.outputs[0]);
      x = xi == g.values.end() ? nullptr : &xi->second;
      // The exponent must not broadcast the output beyond x's shape.
      if (x && yi != g.values.end() && x->dtype == DType::f32 && yi->second.shape == x->shape)
        if (std::optional<double> c = scalar_exponent(g, n.inputs[1])) steps = steps_for(*c);
    }
    if (!steps) {
      out.push_back(std::move(n));
      continue;
    }
    const std::string base = n.inputs[0];
    std::string v = base;
    for (size_t k = 0; k < steps->size(); ++k) {
      const std::string_view op = (*steps)[k];
      const bool last = k + 1 == steps->size();
      Node s;
      s.name = n.name + (last ? "" : "_step" + std::to_string(k));
      s.opset = n.opset;
      s.outputs = {last ? n.outputs[0] : n.outputs[0] + "_grove_pow" + std::to_string(k)};
      if (op == kPowSquareStep) {
        s.op_type = kMul;
        s.inputs = {v, v};
      } else if (op == kPowMulXStep) {
        s.op_type = kMul;
        s.inputs = {base, v};
      } else {
        s.op_type = op;
        s.inputs = {v};
      }
      if (!last) g.values[s.outputs[0]] = *x;
      v = s.outputs[0];
      out.push_back(std::move(s));
    }
    ++rewritten;
  }
  g.nodes = std::move(out);
  return rewritten;
}

}  // namespace grove
