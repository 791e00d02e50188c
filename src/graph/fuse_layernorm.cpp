// LayerNorm as exporters before opset 17 write it (torch.onnx at opset 13, TF converters),
// rebuilt into one LayerNormalization node, which has a one-pass row kernel:
//   m = ReduceMean(x, last axis)   d = Sub(x, m)   v = ReduceMean(Mul(d, d), last axis)
//   s = Sqrt(Add(v, eps))          n = Div(d, s)  or  Mul(d, Reciprocal(s))
//   [Mul(n, gamma)]  [Add(., beta)]           (gamma and beta constants over the last axis)
// Pow(d, 2) and Pow(., -0.5) arrive here as Mul and Sqrt/Reciprocal (rewrite_pow.cpp runs
// first). The ReduceMean axes are an attribute before opset 18 and a constant input from 18.
// Epsilon outside the Sqrt (d / (sqrt(v) + eps)) is another function and is left alone.
// Every intermediate must be read only inside the pattern and not be a graph output; the
// fused node takes the place of the chain's last node, keeping its output name.
#include <optional>
#include <set>

#include "graph/passes.h"

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
    for (size_t i = 0; i < g_.nodes.size(); ++i)
      if (!dropped_[i] && try_fuse(i)) ++fused;
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
  const Node* node_if(size_t i, const char* op) const {
    const Node& n = g_.nodes[i];
    return !dropped_[i] && n.domain.empty() && n.op_type == op && n.outputs.size() == 1 ? &n : nullptr;
  }
  // The node alone reading `v`, if it is `op`.
  const Node* only_reader(const std::string& v, const char* op, size_t& at) const {
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

  bool try_fuse(size_t mi) {
    const Node* mean = node_if(mi, "ReduceMean");
    if (!mean || mean->inputs.empty() || !mean_over_last_axis(*mean)) return false;
    const std::string x = mean->inputs[0];
    const int64_t cols = info(x)->shape.back();
    size_t si = 0, qi = 0, vi = 0, ai = 0, ri = 0, ni = 0, rci = 0;
    const Node* sub = only_reader(mean->outputs[0], "Sub", si);
    if (!sub || sub->inputs.size() != 2 || sub->inputs[0] != x || sub->inputs[1] != mean->outputs[0]) return false;
    const std::string d = sub->outputs[0];
    std::vector<size_t> d_readers = readers(d);
    if (d_readers.size() != 2) return false;
    const Node* square = nullptr;
    size_t norm_candidate = 0;
    for (int k = 0; k < 2 && !square; ++k) {
      const Node* n = node_if(d_readers[k], "Mul");
      if (n && n->inputs.size() == 2 && n->inputs[0] == d && n->inputs[1] == d) {
        square = n;
        qi = d_readers[k];
        norm_candidate = d_readers[1 - k];
      }
    }
    if (!square) return false;
    const Node* var = only_reader(square->outputs[0], "ReduceMean", vi);
    if (!var || var->inputs.empty() || !mean_over_last_axis(*var)) return false;
    const Node* add_eps = only_reader(var->outputs[0], "Add", ai);
    if (!add_eps) return false;
    const Tensor* eps = constant(other_input(*add_eps, var->outputs[0]));
    if (!eps || eps->numel() != 1) return false;
    const Node* root = only_reader(add_eps->outputs[0], "Sqrt", ri);
    if (!root) return false;
    // d / s, or d * (1 / s).
    std::vector<size_t> chain = {mi, si, qi, vi, ai, ri};
    const Node* norm = nullptr;
    size_t at = 0;
    if (const Node* div = only_reader(root->outputs[0], "Div", at)) {
      if (div->inputs.size() == 2 && div->inputs[0] == d && div->inputs[1] == root->outputs[0]) norm = div;
      ni = at;
    } else if (const Node* rec = only_reader(root->outputs[0], "Reciprocal", rci)) {
      const Node* mul = only_reader(rec->outputs[0], "Mul", at);
      if (mul && other_input(*mul, rec->outputs[0]) == d) norm = mul;
      ni = at;
      chain.push_back(rci);
    }
    if (!norm || ni != norm_candidate) return false;
    chain.push_back(ni);
    std::string v = norm->outputs[0];
    std::string gamma, beta;
    size_t gi = 0, bi = 0;
    if (const Node* mul = only_reader(v, "Mul", gi); mul && per_column(constant(other_input(*mul, v)), cols)) {
      gamma = other_input(*mul, v);
      chain.push_back(gi);
      v = mul->outputs[0];
    }
    if (const Node* add = only_reader(v, "Add", bi); add && per_column(constant(other_input(*add, v)), cols)) {
      beta = other_input(*add, v);
      chain.push_back(bi);
      v = add->outputs[0];
    }
    const ValueInfo* y = info(v);
    if (!y || y->shape != info(x)->shape) return false;  // gamma or beta broadcast x up
    if (gamma.empty()) {
      gamma = v + "_grove_ones";
      g_.initializers[gamma] = Tensor::from<float>({cols}, std::vector<float>(static_cast<size_t>(cols), 1.0f));
      g_.values[gamma] = ValueInfo{DType::f32, {cols}, nullptr, true};
    }
    Node ln;
    ln.name = g_.nodes[mi].name + "_layernorm";
    ln.op_type = "LayerNormalization";
    ln.opset = 17;
    ln.inputs = {x, gamma};
    if (!beta.empty()) ln.inputs.push_back(beta);
    ln.outputs = {v};
    ln.attrs["axis"].kind = Attribute::Kind::i;
    ln.attrs["axis"].i = -1;
    ln.attrs["epsilon"].kind = Attribute::Kind::f;
    ln.attrs["epsilon"].f = eps->data<float>()[0];
    size_t last = 0;
    for (size_t k : chain) {
      dropped_[k] = true;
      last = std::max(last, k);
    }
    placed_[last] = std::move(ln);
    return true;
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
