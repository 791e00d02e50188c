// LayerNorm as exporters before opset 17 write it (torch.onnx at opset 13, TF converters),
// rebuilt into one LayerNormalization node, which has a one-pass row kernel:
//   m = ReduceMean(x, last axis)   d = Sub(x, m)   v = ReduceMean(Mul(d, d), last axis)
//   s = Sqrt(Add(v, eps))          n = Div(d, s)  or  Mul(d, Reciprocal(s))
//   [Mul(n, gamma)]  [Add(., beta)]           (gamma and beta constants over the last axis)
// Pow(d, 2) and Pow(., -0.5) arrive here as Mul and Sqrt/Reciprocal (rewrite_pow.cpp runs
// first). The ReduceMean axes are an attribute before opset 18 and a constant input from 18.
// Epsilon outside the Sqrt (d / (sqrt(v) + eps)) is another function and is left alone.
// RMSNorm (LLaMA's: no mean, no beta) the same way, from Mul(x, x), into RMSNormalization.
// Every intermediate must be read only inside the pattern and not be a graph output; the
// fused node takes the place of the chain's last node, keeping its output name.
#include <algorithm>
#include <optional>
#include <set>

#include "ops/op_names.h"
#include "passes/passes.h"

namespace grove {
namespace {

class LayerNormFuser {
 public:
  explicit LayerNormFuser(Graph& g) : g_(g), dropped_(g.nodes.size(), false), placed_(g.nodes.size()) {
    for (size_t i = 0; i < g.nodes.size(); ++i) {
      std::set<std::string> seen;  // a node reading a value twice (Mul(d, d)) is one reader
      for (const auto& in : g.nodes[i].inputs)
        if (!in.empty() && seen.insert(in).second) readers_[in].push_back(i);
    }
    for (const auto& o : g.outputs) graph_outputs_.insert(o.name);
  }

  int run() {
    int fused = 0;
    // LayerNorm first: its Mul(d, d) -> ReduceMean would also read as an RMSNorm of d.
    for (size_t i = 0; i < g_.nodes.size(); ++i)
      if (!dropped_[i] && try_fuse_layernorm(i)) ++fused;
    for (size_t i = 0; i < g_.nodes.size(); ++i)
      if (!dropped_[i] && try_fuse_rmsnorm(i)) ++fused;
    std::vector<Node> kept;
    for (size_t i = 0; i < g_.nodes.size(); ++i) {
      if (placed_[i]) kept.push_back(std::move(*placed_[i]));
      else if (!dropped_[i]) kept.push_back(std::move(g_.nodes[i]));
    }
    g_.nodes = std::move(kept);
    return fused;
  }

 private:
  const ValueInfo* info(const std::string& v) const {
    auto it = g_.values.find(v);
    return it == g_.values.end() ? nullptr : &it->second;
  }
  const Tensor* constant(const std::string& v) const {
    auto it = g_.initializers.find(v);
    return it == g_.initializers.end() || it->second.dtype() != DType::f32 ? nullptr : &it->second;
  }
  // The nodes reading `v`, or none when v is a graph output (it must then stay).
  std::vector<size_t> readers(const std::string& v) const {
    auto it = readers_.find(v);
    if (graph_outputs_.count(v) || it == readers_.end()) return {};
    return it->second;
  }
  const Node* node_if(size_t i, std::string_view op) const {
    const Node& n = g_.nodes[i];
    return !dropped_[i] && n.domain.empty() && n.op_type == op && n.outputs.size() == 1 ? &n : nullptr;
  }
  // The node alone reading `v`, if it is `op`.
  const Node* only_reader(const std::string& v, std::string_view op, size_t& at) const {
    std::vector<size_t> r = readers(v);
    if (r.size() != 1) return nullptr;
    at = r[0];
    return node_if(at, op);
  }
  static std::string other_input(const Node& n, const std::string& v) {
    if (n.inputs.size() != 2 || n.inputs[0] == n.inputs[1]) return "";
    return n.inputs[0] == v ? n.inputs[1] : n.inputs[0];
  }

  // ReduceMean over the last axis of its input only, keeping dims.
  bool mean_over_last_axis(const Node& n) const {
    const ValueInfo* x = info(n.inputs[0]);
    if (!x || x->dtype != DType::f32 || x->shape.empty() || n.attr_int("keepdims", 1) != 1) return false;
    std::vector<int64_t> axes;
    if (n.opset >= 18) {
      if (n.inputs.size() < 2 || n.inputs[1].empty()) return false;
      auto it = g_.initializers.find(n.inputs[1]);
      if (it == g_.initializers.end() || it->second.dtype() != DType::i64) return false;
      const int64_t* a = it->second.data<int64_t>();
      axes.assign(a, a + it->second.numel());
    } else {
      if (n.inputs.size() != 1) return false;
      axes = n.attr_ints("axes");
    }
    const int64_t rank = static_cast<int64_t>(x->shape.size());
    return axes.size() == 1 && (axes[0] == -1 || axes[0] == rank - 1);
  }

  // A constant of C values along the last axis (leading dims 1).
  bool per_column(const Tensor* t, int64_t c) const {
    if (!t || t->numel() != c || t->rank() == 0 || t->dim(t->rank() - 1) != c) return false;
    return true;
  }

  // What follows the variance in both norms: Add eps -> Sqrt -> Div(d, s) or Mul(d,
  // Reciprocal(s)) -> [Mul gamma] -> [Add beta] (beta only for LayerNorm).
  struct Tail {
    std::vector<size_t> nodes;
    size_t norm = 0;  // the Div or Mul applying 1/s to d
    float epsilon = 0;
    std::string gamma, beta, output;
  };
  std::optional<Tail> match_tail(const std::string& var, const std::string& d, int64_t cols, bool with_beta) const {
    Tail t;
    size_t ai = 0, ri = 0, at = 0, rci = 0;
    const Node* add_eps = only_reader(var, kAdd, ai);
    if (!add_eps) return std::nullopt;
    const Tensor* eps = constant(other_input(*add_eps, var));
    if (!eps || eps->numel() != 1) return std::nullopt;
    t.epsilon = eps->data<float>()[0];
    const Node* root = only_reader(add_eps->outputs[0], kSqrt, ri);
    if (!root) return std::nullopt;
    t.nodes = {ai, ri};
    const Node* norm = nullptr;
    if (const Node* div = only_reader(root->outputs[0], kDiv, at)) {
      if (div->inputs.size() == 2 && div->inputs[0] == d && div->inputs[1] == root->outputs[0]) norm = div;
    } else if (const Node* rec = only_reader(root->outputs[0], kReciprocal, rci)) {
      const Node* mul = only_reader(rec->outputs[0], kMul, at);
      if (mul && other_input(*mul, rec->outputs[0]) == d) norm = mul;
      t.nodes.push_back(rci);
    }
    if (!norm) return std::nullopt;
    t.norm = at;
    t.nodes.push_back(at);
    t.output = norm->outputs[0];
    size_t gi = 0, bi = 0;
    if (const Node* mul = only_reader(t.output, kMul, gi); mul && per_column(constant(other_input(*mul, t.output)), cols)) {
      t.gamma = other_input(*mul, t.output);
      t.nodes.push_back(gi);
      t.output = mul->outputs[0];
    }
    if (const Node* add = with_beta ? only_reader(t.output, kAdd, bi) : nullptr;
        add && per_column(constant(other_input(*add, t.output)), cols)) {
      t.beta = other_input(*add, t.output);
      t.nodes.push_back(bi);
      t.output = add->outputs[0];
    }
    return t;
  }

  // The fused node in place of the chain's last node; a missing gamma becomes ones.
  bool replace(std::string_view op, const std::string& x, int64_t cols, Tail& t, std::vector<size_t> chain) {
    const ValueInfo* y = info(t.output);
    if (!y || y->shape != info(x)->shape) return false;  // gamma or beta broadcast x up
    if (t.gamma.empty()) {
      t.gamma = t.output + "_grove_ones";
      g_.initializers[t.gamma] = Tensor::from<float>({cols}, std::vector<float>(static_cast<size_t>(cols), 1.0f));
      g_.values[t.gamma] = ValueInfo{DType::f32, {cols}, nullptr, true};
    }
    chain.insert(chain.end(), t.nodes.begin(), t.nodes.end());
    Node n;
    n.name = g_.nodes[chain[0]].name + (op == kLayerNormalization ? "_layernorm" : "_rmsnorm");
    n.op_type = op;
    n.opset = op == kLayerNormalization ? 17 : 23;
    n.inputs = {x, t.gamma};
    if (!t.beta.empty()) n.inputs.push_back(t.beta);
    n.outputs = {t.output};
    n.attrs["axis"].kind = Attribute::Kind::i;
    n.attrs["axis"].i = -1;
    n.attrs["epsilon"].kind = Attribute::Kind::f;
    n.attrs["epsilon"].f = t.epsilon;
    size_t last = 0;
    for (size_t k : chain) {
      dropped_[k] = true;
      last = std::max(last, k);
    }
    placed_[last] = std::move(n);
    return true;
  }

  // From the first ReduceMean: mean, Sub, Mul(d, d), ReduceMean, then the tail.
  bool try_fuse_layernorm(size_t mi) {
    const Node* mean = node_if(mi, kReduceMean);
    if (!mean || mean->inputs.empty() || !mean_over_last_axis(*mean)) return false;
    const std::string x = mean->inputs[0];
    const int64_t cols = info(x)->shape.back();
    size_t si = 0, qi = 0, vi = 0;
    const Node* sub = only_reader(mean->outputs[0], kSub, si);
    if (!sub || sub->inputs.size() != 2 || sub->inputs[0] != x || sub->inputs[1] != mean->outputs[0]) return false;
    const std::string d = sub->outputs[0];
    std::vector<size_t> d_readers = readers(d);
    if (d_readers.size() != 2) return false;
    const Node* square = nullptr;
    size_t norm_candidate = 0;
    for (int k = 0; k < 2 && !square; ++k) {
      const Node* n = node_if(d_readers[k], kMul);
      if (n && n->inputs.size() == 2 && n->inputs[0] == d && n->inputs[1] == d) {
        square = n;
        qi = d_readers[k];
        norm_candidate = d_readers[1 - k];
      }
    }
    if (!square) return false;
    const Node* var = only_reader(square->outputs[0], kReduceMean, vi);
    if (!var || var->inputs.empty() || !mean_over_last_axis(*var)) return false;
    std::optional<Tail> t = match_tail(var->outputs[0], d, cols, true);
    if (!t || t->norm != norm_candidate) return false;  // d has no reader outside the pattern
    return replace(kLayerNormalization, x, cols, *t, {mi, si, qi, vi});
  }

  // From Mul(x, x): ReduceMean, then the tail without beta. x keeps its other readers.
  bool try_fuse_rmsnorm(size_t qi) {
    const Node* square = node_if(qi, kMul);
    if (!square || square->inputs.size() != 2 || square->inputs[0] != square->inputs[1]) return false;
    const std::string x = square->inputs[0];
    const ValueInfo* xi = info(x);
    if (!xi || xi->dtype != DType::f32 || xi->shape.empty()) return false;
    const int64_t cols = xi->shape.back();
    size_t vi = 0;
    const Node* var = only_reader(square->outputs[0], kReduceMean, vi);
    if (!var || var->inputs.empty() || !mean_over_last_axis(*var)) return false;
    std::optional<Tail> t = match_tail(var->outputs[0], x, cols, false);
    return t && replace(kRMSNormalization, x, cols, *t, {qi, vi});
  }

  Graph& g_;
  std::map<std::string, std::vector<size_t>> readers_;
  std::set<std::string> graph_outputs_;
  std::vector<bool> dropped_;
  std::vector<std::optional<Node>> placed_;
};

}  // namespace

int fuse_layernorm(Graph& g) { return LayerNormFuser(g).run(); }

}  // namespace grove
