// Epilogue fusion: the elementwise ops right after a Conv, MatMul or Gemm (or a bias and
// a Relu or erf GELU after an 8-bit DequantizeLinear) become part of that node, so their tiles write the final values while the GEMM accumulators are still in
// registers instead of making another pass over memory per op. The chain, in the order of the
// kernels' epilogue act(acc + bias + residual) (kernels/epilogue.h):
//   [Add(constant per-column bias)]   MatMul, or a Gemm without C (torch's Linear export)
//   [Add(residual of the same shape)] ResNet's conv + shortcut, BERT's x + linear(x)
//   [activation]                      Relu, Clip(constant bounds), LeakyRelu, Sigmoid,
//                                     HardSigmoid, HardSwish, the erf and tanh GELUs torch exports,
//                                     the Gelu op (opset 20), x*Sigmoid(x) (SiLU) and x*Sigmoid(c x)
// Each intermediate value must have that one reader and not be a graph output. The fused node
// takes the place of the chain's last node (its inputs all exist by then, and its output keeps
// the last node's name and position), so topological order and every other name stay as they
// were. The representation is graph/node_decisions.h.
#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <optional>
#include <set>

#include "graph/node_decisions.h"
#include "ops/op_names.h"
#include "passes/flops.h"
#include "ops/op.h"
#include "passes/passes.h"

namespace grove {
namespace {

struct Fusion {
  std::vector<size_t> nodes;  // fused nodes, in graph order
  std::string label;          // "Add+Relu"
  void add(size_t node, const char* what) {
    nodes.push_back(node);
    if (!label.empty()) label += '+';
    label += what;
  }
};

class EpilogueFuser {
 public:
  explicit EpilogueFuser(Graph& g) : g_(g), dropped_(g.nodes.size(), false), placed_(g.nodes.size()) {
    for (size_t i = 0; i < g.nodes.size(); ++i)
      for (const auto& in : g.nodes[i].inputs)
        if (!in.empty()) readers_[in].push_back(i);
    for (const auto& o : g.outputs) graph_outputs_.insert(o.name);
  }

  void run() {
    for (size_t i = 0; i < g_.nodes.size(); ++i)
      if (!dropped_[i]) fuse_into(i);
    std::vector<Node> kept;
    for (size_t i = 0; i < g_.nodes.size(); ++i) {
      if (placed_[i]) kept.push_back(std::move(*placed_[i]));
      else if (!dropped_[i]) kept.push_back(std::move(g_.nodes[i]));
    }
    g_.nodes = std::move(kept);
  }

 private:
  const ValueInfo* info(const std::string& v) const {
    auto it = g_.values.find(v);
    return it == g_.values.end() ? nullptr : &it->second;
  }
  bool is_f32(const std::string& v) const {
    const ValueInfo* i = info(v);
    return i && i->dtype == DType::f32;
  }
  const Tensor* constant(const std::string& v) const {
    auto it = g_.initializers.find(v);
    return it == g_.initializers.end() || it->second.dtype() != DType::f32 ? nullptr : &it->second;
  }
  std::optional<float> scalar(const std::string& v) const {
    const Tensor* t = constant(v);
    if (!t || t->numel() != 1) return std::nullopt;
    return t->data<float>()[0];
  }
  // The node that alone reads `v` (not a graph output), if it is a default-domain `op`.
  const Node* only_reader(const std::string& v, std::string_view op, size_t& index) const {
    auto it = readers_.find(v);
    if (graph_outputs_.count(v) || it == readers_.end() || it->second.size() != 1) return nullptr;
    index = it->second[0];
    const Node& n = g_.nodes[index];
    if (dropped_[index] || !n.domain.empty() || n.op_type != op || n.outputs.size() != 1) return nullptr;
    return &n;
  }
  // For a two-input node reading `v`: the other input ("" when it reads v twice).
  static std::string other_input(const Node& n, const std::string& v) {
    if (n.inputs.size() != 2 || n.inputs[0] == n.inputs[1]) return "";
    return n.inputs[0] == v ? n.inputs[1] : n.inputs[0];
  }

  bool same_shape(const std::string& a, const std::string& b) const {
    const ValueInfo *x = info(a), *y = info(b);
    return x && y && x->shape == y->shape;
  }

  bool fusable_producer(const Node& n) const {
    if (!n.domain.empty() || n.outputs.size() != 1 || has_fused_epilogue(n) || !is_f32(n.outputs[0])) return false;
    for (const auto& in : n.inputs)
      if (!in.empty() && !is_f32(in)) return false;
    if (n.op_type == kConv) return n.inputs.size() >= 2 && n.inputs.size() <= 3;
    if (n.op_type == kMatMul) {
      const ValueInfo *a = info(n.inputs[0]), *b = info(n.inputs[1]);
      return n.inputs.size() == 2 && a && b && a->shape.size() >= 2 && b->shape.size() >= 2;
    }
    if (n.op_type == kGemm) {
      if (n.attr_float("alpha", 1.0f) != 1.0f || n.inputs.size() < 2 || n.inputs.size() > 3) return false;
      if (n.inputs.size() < 3 || n.inputs[2].empty()) return true;
      // Only a C that is a per-column bias: the tile rule then adds it in the epilogue.
      const ValueInfo* c = info(n.inputs[2]);
      const ValueInfo* y = info(n.outputs[0]);
      return c && y && n.attr_float("beta", 1.0f) == 1.0f && numel(c->shape) == y->shape[1] &&
             (c->shape.size() == 1 || (c->shape.size() == 2 && c->shape[0] == 1));
    }
    return false;
  }

  // A DequantizeLinear of 8-bit values with one scale (a QDQ model's activation between the
  // integer ops): its float output may take a bias and an activation the tile rule applies
  // (ops/quant/tile_quant_elementwise.cpp), the bias as input 3 after the zero point.
  bool dequantize_producer(const Node& n) const {
    if (n.op_type != kDequantizeLinear || !n.domain.empty() || n.outputs.size() != 1 || has_fused_epilogue(n)) return false;
    if (n.inputs.size() < 2 || n.inputs.size() > 3 || n.has_attr("axis") || n.has_attr("block_size")) return false;
    const ValueInfo *x = info(n.inputs[0]), *s = info(n.inputs[1]);
    return x && s && (x->dtype == DType::u8 || x->dtype == DType::i8) && numel(s->shape) == 1 && is_f32(n.outputs[0]);
  }
  static size_t bias_input(const Node& p) { return p.op_type == kDequantizeLinear ? 3 : kEpilogueBiasInput; }

  // Add(v, constant of N values along the last dim) for a producer with no bias yet.
  bool take_bias(Node& p, std::string& v, Fusion& f) {
    const size_t slot = bias_input(p);
    const bool has_bias = p.inputs.size() > slot && !p.inputs[slot].empty();
    if (p.op_type == kConv || has_bias) return false;
    size_t at = 0;
    const Node* add = only_reader(v, kAdd, at);
    if (!add) return false;
    const std::string bias = other_input(*add, v);
    const Tensor* b = constant(bias);
    const Shape& y = info(v)->shape;
    if (!b || b->numel() != y.back() || !same_shape(add->outputs[0], v)) return false;
    for (int64_t d = 0; d + 1 < b->rank(); ++d)
      if (b->dim(d) != 1) return false;
    // A Gemm's C is scaled by beta.
    if (p.op_type == kGemm && (b->rank() > 2 || p.attr_float("beta", 1.0f) != 1.0f)) return false;
    p.inputs.resize(slot + 1);  // a DequantizeLinear without a zero point gets "" before the bias
    p.inputs[slot] = bias;
    v = add->outputs[0];
    f.add(at, "Bias");
    return true;
  }

  // Add(v, r) with r computed, of v's shape and dtype (no broadcasting).
  bool take_residual(Node& p, std::string& v, Fusion& f) {
    size_t at = 0;
    const Node* add = only_reader(v, kAdd, at);
    if (!add) return false;
    const std::string r = other_input(*add, v);
    if (r.empty() || constant(r) || !is_f32(r) || !same_shape(r, v) || !same_shape(add->outputs[0], v)) return false;
    p.inputs.resize(kEpilogueResidualInput + 1);
    p.inputs[kEpilogueResidualInput] = r;
    v = add->outputs[0];
    f.add(at, "Add");
    return true;
  }

  static void set_activation(Node& p, FusedActivation kind, float alpha, float beta) {
    FusedEpilogue& e = p.decisions.epilogue;
    e.activation = kind;
    e.alpha = alpha;
    e.beta = beta;
  }

  bool take_activation(Node& p, std::string& v, Fusion& f) {
    auto it = readers_.find(v);
    if (graph_outputs_.count(v) || it == readers_.end() || it->second.size() != 1)
      return take_gelu(p, v, f) || take_gelu_tanh(p, v, f) || take_swish(p, v, f);
    const size_t at = it->second[0];
    const Node& n = g_.nodes[at];
    if (dropped_[at] || !n.domain.empty() || n.outputs.size() != 1 || n.inputs.empty() || n.inputs[0] != v) return false;
    const OpSpec* spec = OpRegistry::builtin().find(n);
    if (!spec || !spec->as_epilogue) return false;
    std::vector<ValueInfo> in(n.inputs.size());
    for (size_t k = 0; k < n.inputs.size(); ++k) {
      in[k].present = !n.inputs[k].empty();
      in[k].data = in[k].present ? constant(n.inputs[k]) : nullptr;
    }
    const std::optional<EpilogueActivation> activation = spec->as_epilogue(n, in);
    if (!activation) return false;
    set_activation(p, activation->kind, activation->alpha, activation->beta);
    v = n.outputs[0];
    f.add(at, n.op_type.c_str());
    return true;
  }

  // 0.5 * v * (1 + Erf(v / sqrt 2)) as torch exports it: Div(v, 1.4142135) -> Erf ->
  // Add(1) -> Mul(v, .) -> Mul(0.5), or with the 0.5 applied to v first, or (TF converters)
  // to (1 + Erf) first; the scaling also as Mul(v, 0.70710678).
  bool take_gelu(Node& p, std::string& v, Fusion& f) {
    auto it = readers_.find(v);
    if (graph_outputs_.count(v) || it == readers_.end() || it->second.size() != 2) return false;
    auto near = [](std::optional<float> x, double want) { return x && std::abs(*x - want) < 1e-6 * want; };
    for (int first = 0; first < 2; ++first) {
      const size_t di = it->second[first], mi = it->second[1 - first];
      const Node& div = g_.nodes[di];
      const Node& mul_v = g_.nodes[mi];
      if (dropped_[di] || dropped_[mi] || !div.domain.empty() || !mul_v.domain.empty()) continue;
      if (div.inputs.size() != 2 || mul_v.op_type != kMul) continue;
      const bool by_div = div.op_type == kDiv && div.inputs[0] == v && near(scalar(div.inputs[1]), std::sqrt(2.0));
      const bool by_mul = div.op_type == kMul && near(scalar(other_input(div, v)), std::sqrt(0.5));
      if (!by_div && !by_mul) continue;
      size_t ei = 0, ai = 0, m2i = 0;
      const Node* erf = only_reader(div.outputs[0], kErf, ei);
      const Node* add = erf ? only_reader(erf->outputs[0], kAdd, ai) : nullptr;
      if (!add || !near(scalar(other_input(*add, erf->outputs[0])), 1.0)) continue;
      const std::string m1_other = other_input(mul_v, v);
      // The 0.5 on (1 + Erf): Mul(add, 0.5) -> Mul(v, .), which is mul_v.
      size_t half_reader = 0;
      const Node* half = step(add->outputs[0], kMul, "", 0.5, m2i);
      if (half && m1_other == half->outputs[0] && only_reader(half->outputs[0], kMul, half_reader) &&
          half_reader == mi) {
        set_activation(p, FusedActivation::gelu_erf, 0, 0);
        for (size_t n : {di, ei, ai, m2i}) f.nodes.push_back(n);
        f.add(mi, "Gelu");
        v = mul_v.outputs[0];
        return true;
      }
      const Node* m2 = only_reader(mul_v.outputs[0], kMul, m2i);
      if (!m2) continue;
      const std::string m2_other = other_input(*m2, mul_v.outputs[0]);
      const bool half_last = m1_other == add->outputs[0] && near(scalar(m2_other), 0.5);
      const bool half_first = near(scalar(m1_other), 0.5) && m2_other == add->outputs[0];
      if (!half_last && !half_first) continue;
      size_t add_reader = 0;
      if (!only_reader(add->outputs[0], kMul, add_reader) || add_reader != (half_last ? mi : m2i)) continue;
      set_activation(p, FusedActivation::gelu_erf, 0, 0);
      for (size_t n : {di, mi, ei, ai}) f.nodes.push_back(n);
      f.add(m2i, "Gelu");
      v = m2->outputs[0];
      return true;
    }
    return false;
  }

  // The node alone reading `v` if it is `op` with `other` as its other input (a constant
  // near `value` when `other` is empty).
  const Node* step(const std::string& v, std::string_view op, const std::string& other, double value, size_t& at) const {
    const Node* n = only_reader(v, op, at);
    if (!n) return nullptr;
    const std::string o = other_input(*n, v);
    if (!other.empty()) return o == other ? n : nullptr;
    std::optional<float> c = scalar(o);
    return c && std::abs(*c - value) < 1e-6 * std::abs(value) ? n : nullptr;
  }

  // 0.5 v (1 + Tanh(sqrt(2/pi) (v + 0.044715 v^3))), as GPT-2's export spells it: the cube
  // as Mul(v, Mul(v, v)) or Pow(v, 3), then Mul, Add v, Mul, Tanh, Add 1, Mul v, Mul 0.5.
  bool take_gelu_tanh(Node& p, std::string& v, Fusion& f) {
    auto it = readers_.find(v);
    if (graph_outputs_.count(v) || it == readers_.end()) return false;
    std::multiset<size_t> uses(it->second.begin(), it->second.end()), want;
    std::vector<size_t> chain;
    std::string cube;
    for (size_t r : uses) {
      const Node& n = g_.nodes[r];
      if (dropped_[r] || !n.domain.empty() || n.inputs.size() != 2 || n.outputs.size() != 1) continue;
      size_t m2 = 0;
      const Node* outer = nullptr;
      if (n.op_type == kMul && n.inputs[0] == v && n.inputs[1] == v && (outer = step(n.outputs[0], kMul, v, 0, m2))) {
        chain = {r, m2};
        want = {r, r, m2};
        cube = outer->outputs[0];
      } else if (n.op_type == kPow && n.inputs[0] == v && scalar(n.inputs[1]) == 3.0f) {
        chain = {r};
        want = {r};
        cube = n.outputs[0];
      } else {
        continue;
      }
      break;
    }
    if (cube.empty()) return false;
    size_t at[7];
    const Node* n = step(cube, kMul, "", 0.044715, at[0]);
    if (n) n = step(n->outputs[0], kAdd, v, 0, at[1]);
    if (n) n = step(n->outputs[0], kMul, "", 0.7978845608028654, at[2]);
    if (n) n = only_reader(n->outputs[0], kTanh, at[3]);
    if (n) n = step(n->outputs[0], kAdd, "", 1.0, at[4]);
    if (n) n = step(n->outputs[0], kMul, v, 0, at[5]);
    if (n) n = step(n->outputs[0], kMul, "", 0.5, at[6]);
    if (!n) return false;
    want.insert(at[1]);
    want.insert(at[5]);
    if (want != uses) return false;  // v has a reader outside the pattern
    set_activation(p, FusedActivation::gelu_tanh, 0, 0);
    for (size_t k : chain) f.nodes.push_back(k);
    for (size_t k = 0; k < 6; ++k) f.nodes.push_back(at[k]);
    f.add(at[6], "GeluTanh");
    v = n->outputs[0];
    return true;
  }

  // v * Sigmoid(v) (SiLU, Swish) or v * Sigmoid(c v) (c = 1.702: the sigmoid GELU).
  bool take_swish(Node& p, std::string& v, Fusion& f) {
    auto it = readers_.find(v);
    if (graph_outputs_.count(v) || it == readers_.end() || it->second.size() != 2) return false;
    for (int first = 0; first < 2; ++first) {
      const size_t si = it->second[first], mi = it->second[1 - first];
      const Node& scale_or_sigmoid = g_.nodes[si];
      if (dropped_[si] || !scale_or_sigmoid.domain.empty() || scale_or_sigmoid.outputs.size() != 1) continue;
      std::vector<size_t> nodes;
      float alpha = 1.0f;
      std::string sig_out;
      size_t at = 0;
      if (scale_or_sigmoid.op_type == kSigmoid && scale_or_sigmoid.inputs[0] == v) {
        nodes = {si};
        sig_out = scale_or_sigmoid.outputs[0];
      } else if (scale_or_sigmoid.op_type == kMul) {
        std::optional<float> c = scalar(other_input(scale_or_sigmoid, v));
        const Node* sig = c ? only_reader(scale_or_sigmoid.outputs[0], kSigmoid, at) : nullptr;
        if (!sig) continue;
        alpha = *c;
        nodes = {si, at};
        sig_out = sig->outputs[0];
      } else {
        continue;
      }
      size_t mul_at = 0;
      const Node* mul = step(sig_out, kMul, v, 0, mul_at);
      if (!mul || mul_at != mi) continue;
      set_activation(p, FusedActivation::swish, alpha, 0);
      for (size_t n : nodes) f.nodes.push_back(n);
      f.add(mi, alpha == 1.0f ? "Swish" : "SigmoidGelu");
      v = mul->outputs[0];
      return true;
    }
    return false;
  }

  void fuse_into(size_t i) {
    Node& p = g_.nodes[i];
    const bool dequantize = dequantize_producer(p);
    if (!dequantize && !fusable_producer(p)) return;
    Node fused = p;
    std::string v = fused.outputs[0];
    Fusion f;
    take_bias(fused, v, f);
    if (dequantize) {
      // No residual; of the activations, the ones its tile rule runs on vectors (or cheaply).
      Node with = fused;
      std::string w = v;
      Fusion g = f;
      const FusedActivation kind = take_activation(with, w, g) ? with.decisions.epilogue.activation : FusedActivation::none;
      if (kind == FusedActivation::gelu_erf || kind == FusedActivation::relu) fused = std::move(with), v = w, f = std::move(g);
    } else {
      take_residual(fused, v, f);
      take_activation(fused, v, f);
    }
    if (f.nodes.empty()) return;
    FusedEpilogue& e = fused.decisions.epilogue;
    e.fused = f.label;
    for (size_t n : f.nodes) e.fused_flops += node_flops(g_, g_.nodes[n]);
    fused.outputs[0] = v;
    size_t last = i;
    for (size_t n : f.nodes) {
      dropped_[n] = true;
      last = std::max(last, n);
    }
    dropped_[i] = true;
    placed_[last] = std::move(fused);
  }

  Graph& g_;
  std::map<std::string, std::vector<size_t>> readers_;
  std::set<std::string> graph_outputs_;
  std::vector<bool> dropped_;
  std::vector<std::optional<Node>> placed_;
};

}  // namespace

void fuse_epilogues(Graph& g) { EpilogueFuser(g).run(); }

}  // namespace grove
