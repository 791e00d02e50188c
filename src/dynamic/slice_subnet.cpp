#include "dynamic/slice_subnet.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <map>
#include <numeric>
#include <optional>
#include <set>

#include "graph/error.h"
#include "ops/op.h"
#include "ops/op_names.h"
#include "passes/bind.h"

namespace grove {
namespace {

// The channels of one value that survive in the sub-net: indices along `axis` out of `full`.
// A value without an entry keeps everything.
struct Keep {
  int64_t axis = 0;
  int64_t full = 0;
  std::vector<int64_t> idx;
  std::string layer;  // the layer whose slicing this comes from, for messages
  bool same_channels(const Keep& o) const { return axis == o.axis && full == o.full && idx == o.idx; }
};

Tensor gather_axis(const Tensor& t, int64_t axis, const std::vector<int64_t>& idx) {
  Shape shape = t.shape();
  const size_t elem = dtype_size(t.dtype());
  int64_t outer = 1, inner = 1;
  for (int64_t i = 0; i < axis; ++i) outer *= shape[i];
  for (int64_t i = axis + 1; i < t.rank(); ++i) inner *= shape[i];
  const int64_t n = shape[axis];
  shape[axis] = static_cast<int64_t>(idx.size());
  Tensor out(t.dtype(), shape);
  const size_t row = static_cast<size_t>(inner) * elem;
  for (int64_t o = 0; o < outer; ++o)
    for (size_t j = 0; j < idx.size(); ++j)
      std::memcpy(out.raw() + (static_cast<size_t>(o) * idx.size() + j) * row,
                  t.raw() + (static_cast<size_t>(o * n + idx[j])) * row, row);
  return out;
}

std::vector<int64_t> prefix(int64_t k) {
  std::vector<int64_t> v(static_cast<size_t>(k));
  std::iota(v.begin(), v.end(), 0);
  return v;
}

// Shapes of the full model with symbolic dims set to 1: what Flatten, Reshape and the
// broadcasting rules need to know about ranks and inner sizes.
Graph bind_full(const Graph& imported) {
  Graph bound = imported;
  ShapeMap shapes;
  for (const auto& in : imported.inputs) {
    if (!in.has_shape) continue;
    Shape s;
    for (const auto& d : in.dims) s.push_back(d.value < 0 ? 1 : d.value);
    shapes[in.name] = s;
  }
  try {
    bind_shapes(bound, shapes);
  } catch (const Error&) {
    bound.values.clear();  // ops that need a shape will say so
  }
  return bound;
}

class Slicer {
 public:
  Slicer(const Graph& imported, const DynamicSpec& spec, const SubnetSpec& subnet)
      : in_(imported), spec_(spec), subnet_(subnet), bound_(bind_full(imported)) {
    out_.graph = imported;
    apply_overrides();
    find_layers();
  }

  SlicedSubnet run() {
    for (size_t i = 0; i < out_.graph.nodes.size(); ++i) {
      current_ = &in_.nodes[i];
      Node& n = out_.graph.nodes[i];
      slice_node(n);
      for (size_t j = 0; j < n.inputs.size(); ++j) use_override(n, j);
    }
    for (const auto& o : out_.graph.outputs)
      if (auto it = keep_.find(o.name); it != keep_.end())
        throw fail("output '" + o.name + "' would lose channels: mark layer '" + it->second.layer + "' exempt");
    drop_unused_initializers();
    return std::move(out_);
  }

 private:
  Error fail(const std::string& what) const { return Error("sub-net '" + subnet_.name + "': " + what); }
  Error fail(const Node& n, const std::string& what) const {
    return Error("sub-net '" + subnet_.name + "': " + n.describe() + ": " + what);
  }

  // Initializers named NAME@SUBNET replace NAME in that sub-net; every such variant is
  // dropped from every sub-net's graph.
  void apply_overrides() {
    std::set<std::string> names;
    for (const auto& s : spec_.subnets) names.insert(s.name);
    auto& inits = out_.graph.initializers;
    for (auto it = inits.begin(); it != inits.end();) {
      const auto at = it->first.rfind('@');
      if (at == std::string::npos || !names.count(it->first.substr(at + 1))) {
        ++it;
        continue;
      }
      const std::string base = it->first.substr(0, at);
      if (it->first.substr(at + 1) == subnet_.name) {
        if (!inits.count(base)) throw fail("initializer '" + it->first + "' overrides '" + base + "', which the model lacks");
        overridden_[base] = it->second;
      }
      it = inits.erase(it);
    }
  }

  const Tensor* constant(const std::string& name) const {
    auto it = in_.initializers.find(name);
    return it == in_.initializers.end() ? nullptr : &it->second;
  }
  const Shape* shape_of(const std::string& name) const {
    if (const Tensor* t = constant(name)) return &t->shape();
    auto it = bound_.values.find(name);
    return it == bound_.values.end() ? nullptr : &it->second.shape;
  }
  int64_t rank_of(const Node& n, const std::string& name) const {
    const Shape* s = shape_of(name);
    if (!s) throw fail(n, "the shape of '" + name + "' is unknown, so its channels cannot be followed");
    return static_cast<int64_t>(s->size());
  }

  // A layer: Conv, Gemm or MatMul whose weight is an initializer.
  static bool is_layer_op(const Node& n) { return n.op_type == kConv || n.op_type == kGemm || n.op_type == kMatMul; }
  bool is_layer(const Node& n) const {
    if (!n.domain.empty() || !is_layer_op(n) || n.inputs.size() < 2 || !constant(n.inputs[1])) return false;
    if (n.op_type == kMatMul && constant(n.inputs[1])->rank() != 2) return false;
    // A grouped (not depthwise) conv cannot lose output channels without breaking its groups,
    // and a depthwise one follows its input: neither is a layer of its own.
    return n.op_type != kConv || n.attr_int("group", 1) == 1;
  }
  static std::string layer_name(const Node& n) { return n.name.empty() ? n.inputs[1] : n.name; }

  void find_layers() {
    std::vector<const Node*> layers;
    for (const auto& n : in_.nodes)
      if (is_layer(n)) layers.push_back(&n);
    if (layers.empty()) throw fail("the model has no Conv, Gemm or MatMul with constant weights to slice");
    std::map<std::string, const Node*> by_name;
    for (const Node* n : layers) {
      by_name[n->name] = n;
      by_name[n->inputs[1]] = n;
    }
    auto lookup = [&](const std::string& name, const char* where) {
      auto it = by_name.find(name);
      if (it == by_name.end()) {
        std::string known;
        for (size_t i = 0; i < layers.size() && i < 12; ++i) known += (i ? ", " : "") + layer_name(*layers[i]);
        throw fail(std::string(where) + " names unknown layer '" + name + "' (layers: " + known +
                   (layers.size() > 12 ? ", ..." : "") + ")");
      }
      return it->second;
    };
    if (spec_.exempt_given) {
      for (const auto& e : spec_.exempt) exempt_.insert(lookup(e, "the exempt list"));
    } else {
      exempt_.insert(layers.back());
    }
    for (const auto& [name, count] : subnet_.channels) wanted_[lookup(name, "its channel list")] = count;
  }

  // Output channels a layer keeps in this sub-net.
  int64_t kept_channels(const Node& n, int64_t full) const {
    const Node* key = current_;
    if (exempt_.count(key)) {
      if (wanted_.count(key)) throw fail(n, "is exempt but the sub-net gives it a channel count");
      return full;
    }
    if (!subnet_.channels.empty()) {
      auto it = wanted_.find(key);
      if (it == wanted_.end()) return full;
      if (it->second > full)
        throw fail(n, "keeps " + std::to_string(it->second) + " channels but the layer has " + std::to_string(full));
      return it->second;
    }
    return std::clamp<int64_t>(std::llround(subnet_.ratio * static_cast<double>(full)), 1, full);
  }

  // Replaces node input `i` (an initializer) by its slice along `axis`.
  void slice_input(Node& n, size_t i, int64_t axis, const std::vector<int64_t>& idx) {
    const std::string& name = n.inputs[i];
    // The tensor as this sub-net has it so far: its override, or the input already sliced
    // along another axis (a conv's weight is cut by input and by output channels).
    auto over = overridden_.find(name);
    auto current = out_.graph.initializers.find(name);
    if (over == overridden_.end() && current == out_.graph.initializers.end())
      throw fail(n, "'" + name + "' is not a constant, so it cannot be sliced");
    const Tensor src = over != overridden_.end() ? over->second : current->second;
    if (axis < 0 || axis >= src.rank()) throw fail(n, "cannot slice '" + name + "' along axis " + std::to_string(axis));
    Tensor sliced;
    if (src.dim(axis) == static_cast<int64_t>(idx.size()) && over != overridden_.end()) {
      sliced = src;  // a private variant already has the sub-net's width
    } else if (idx.back() >= src.dim(axis)) {
      throw fail(n, "'" + name + "' has " + std::to_string(src.dim(axis)) + " entries along axis " +
                        std::to_string(axis) + ", fewer than the channels it is sliced to");
    } else {
      sliced = gather_axis(src, axis, idx);
    }
    const std::string new_name = name + "@" + subnet_.name + "#" + std::to_string(serial_++);
    out_.graph.initializers[new_name] = sliced;
    n.inputs[i] = new_name;
  }

  // An input that names an overridden initializer and was not sliced reads the override.
  void use_override(Node& n, size_t i) {
    auto over = overridden_.find(n.inputs[i]);
    if (over == overridden_.end()) return;
    const std::string new_name = n.inputs[i] + "@" + subnet_.name;
    out_.graph.initializers[new_name] = over->second;
    n.inputs[i] = new_name;
  }

  const Keep* keep_of(const std::string& v) const {
    auto it = keep_.find(v);
    return it == keep_.end() ? nullptr : &it->second;
  }

  void slice_node(Node& n) {
    for (const auto& c : n.captures)
      if (keep_of(c)) throw fail(n, "its subgraph reads '" + c + "', whose channels are sliced");
    bool any = false;
    for (const auto& v : n.inputs) any |= keep_of(v) != nullptr;
    if (!n.domain.empty()) {
      if (any) throw unsupported(n);
      return;
    }
    const std::string& op = n.op_type;
    if (op == kConv) return slice_conv(n);
    if (op == kGemm || op == kMatMul) return slice_matmul(n);
    if (!any) return;
    const OpSpec* spec = OpRegistry::builtin().find(n);
    const ChannelFlow flow = spec ? spec->traits.channels : ChannelFlow::stops;
    if (flow == ChannelFlow::broadcast) return slice_elementwise(n);
    if (op == kConcat) return slice_concat(n);
    // The rest carry channels through their first input only: sliced channels that reach one
    // by another input (a Clip's bound, a Reshape's shape, a BatchNormalization's statistics)
    // are not channels of its output.
    if (!keep_of(n.inputs[0])) throw unsupported(n);
    if (op == kBatchNormalization) return slice_batchnorm(n);
    if (flow == ChannelFlow::per_channel) return pass(n, *keep_of(n.inputs[0]));
    if (op == kFlatten || op == kReshape) return slice_flatten(n);
    if (op == kTranspose) return slice_transpose(n);
    if (flow == ChannelFlow::reduces) return slice_reduce(n);
    throw unsupported(n);
  }

  Error unsupported(const Node& n) const {
    return fail(n, "cannot take sliced channels; mark the layer that feeds it exempt");
  }

  void pass(const Node& n, Keep k) {
    if (n.op_type == kMaxPool && n.outputs.size() > 1 && !n.outputs[1].empty()) throw unsupported(n);
    keep_[n.outputs[0]] = std::move(k);
  }

  void slice_conv(Node& n) {
    const Keep* in = keep_of(n.inputs[0]);
    for (size_t i = 1; i < n.inputs.size(); ++i)
      if (keep_of(n.inputs[i])) throw unsupported(n);
    const Tensor* w = constant(n.inputs[1]);
    const int64_t group = n.attr_int("group", 1);
    if (!w || w->rank() < 3) {
      if (in) throw fail(n, "its weights are not constant, so its input channels cannot be sliced");
      return;
    }
    if (group != 1) {
      const bool depthwise = w->dim(1) == 1 && w->dim(0) == group;
      if (!in) return;
      if (!depthwise || in->axis != 1) throw fail(n, "a grouped conv (not depthwise) cannot take sliced channels");
      slice_input(n, 1, 0, in->idx);
      if (n.inputs.size() > 2 && !n.inputs[2].empty()) slice_input(n, 2, 0, in->idx);
      n.attrs["group"].i = static_cast<int64_t>(in->idx.size());
      keep_[n.outputs[0]] = *in;
      return;
    }
    if (in) {
      if (in->axis != 1) throw unsupported(n);
      slice_input(n, 1, 1, in->idx);
    }
    slice_layer_output(n, 0, 2, w->dim(0), 1);
  }

  // Cuts a layer's output channels: weight input 1 along `w_axis`, the bias (input
  // `bias_input`, when present) along its last axis.
  void slice_layer_output(Node& n, int64_t w_axis, size_t bias_input, int64_t full, int64_t out_axis) {
    const int64_t kept = kept_channels(n, full);
    out_.layers.push_back(LayerWidth{layer_name(n), full, kept});
    if (kept == full) return;
    const auto idx = prefix(kept);
    slice_input(n, 1, w_axis, idx);
    if (bias_input < n.inputs.size() && !n.inputs[bias_input].empty()) {
      const Shape* b = shape_of(n.inputs[bias_input]);
      if (!constant(n.inputs[bias_input]) || !b || b->empty()) throw fail(n, "its bias is not a constant vector");
      if (b->back() == full) slice_input(n, bias_input, static_cast<int64_t>(b->size()) - 1, idx);
    }
    keep_[n.outputs[0]] = Keep{out_axis, full, idx, layer_name(n)};
  }

  void slice_matmul(Node& n) {
    const Keep* in = keep_of(n.inputs[0]);
    if (keep_of(n.inputs[1]) || (n.inputs.size() > 2 && keep_of(n.inputs[2]))) throw unsupported(n);
    if (!is_layer(n)) {
      if (in) throw fail(n, "its weights are not constant, so its input channels cannot be sliced");
      return;
    }
    const bool gemm = n.op_type == kGemm;
    const bool trans_b = gemm && n.attr_int("transB", 0) != 0;
    const Tensor& b = *constant(n.inputs[1]);
    const int64_t k_axis = trans_b ? 1 : 0, n_axis = 1 - k_axis;
    if (in) {
      const int64_t rank = rank_of(n, n.inputs[0]);
      if (in->axis != rank - 1 || (gemm && n.attr_int("transA", 0) != 0)) throw unsupported(n);
      slice_input(n, 1, k_axis, in->idx);
    }
    const int64_t out_rank = gemm ? 2 : rank_of(n, n.outputs[0]);
    slice_layer_output(n, n_axis, gemm ? 2 : n.inputs.size(), b.dim(n_axis), out_rank - 1);
  }

  void slice_batchnorm(Node& n) {
    const Keep& in = *keep_of(n.inputs[0]);
    if (in.axis != 1) throw unsupported(n);
    for (size_t i = 1; i < n.inputs.size() && i < 5; ++i) {
      if (keep_of(n.inputs[i]) || !constant(n.inputs[i])) throw fail(n, "its statistics are not constant");
      slice_input(n, i, 0, in.idx);
    }
    keep_[n.outputs[0]] = in;
  }

  // Broadcasting ops: every sliced operand must carry the same channels; a constant operand
  // as wide as the full tensor is sliced with it.
  void slice_elementwise(Node& n) {
    const int64_t rank = rank_of(n, n.outputs[0]);
    std::optional<Keep> common;
    for (const auto& v : n.inputs) {
      const Keep* k = keep_of(v);
      if (!k) continue;
      Keep aligned = *k;
      aligned.axis += rank - rank_of(n, v);
      if (common && !common->same_channels(aligned))
        throw fail(n, "adds tensors sliced differently (from layers '" + common->layer + "' and '" + k->layer +
                          "'); give both layers the same channels or exempt them");
      common = aligned;
    }
    for (size_t i = 0; i < n.inputs.size(); ++i) {
      const std::string& v = n.inputs[i];
      if (v.empty() || keep_of(v)) continue;
      const Shape* s = shape_of(v);
      if (!s) throw fail(n, "the shape of '" + v + "' is unknown");
      const int64_t axis = common->axis - (rank - static_cast<int64_t>(s->size()));
      if (axis < 0 || (*s)[axis] == 1) continue;
      if ((*s)[axis] != common->full || !constant(v))
        throw fail(n, "mixes channels sliced by layer '" + common->layer + "' with the whole tensor '" + v +
                          "'; exempt that layer or slice both sides alike");
      slice_input(n, i, axis, common->idx);
    }
    keep_[n.outputs[0]] = *common;
  }

  void slice_concat(Node& n) {
    const int64_t rank = rank_of(n, n.outputs[0]);
    int64_t axis = n.attr_int("axis", 0);
    if (axis < 0) axis += rank;
    Keep out{axis, 0, {}, ""};
    for (const auto& v : n.inputs) {
      const Keep* k = keep_of(v);
      const Shape* s = shape_of(v);
      if (!s) throw fail(n, "the shape of '" + v + "' is unknown");
      if (k && k->axis != axis) throw unsupported(n);
      const int64_t full = k ? k->full : (*s)[axis];
      if (k) {
        for (int64_t i : k->idx) out.idx.push_back(out.full + i);
        out.layer = k->layer;
      } else {
        for (int64_t i = 0; i < full; ++i) out.idx.push_back(out.full + i);
      }
      out.full += full;
    }
    keep_[n.outputs[0]] = out;
  }

  // Flatten at the sliced axis (and a Reshape that flattens [N, C, ...] to [N, -1]): channel c
  // becomes the run of features c*inner .. c*inner + inner - 1.
  void slice_flatten(Node& n) {
    const Keep& in = *keep_of(n.inputs[0]);
    if (n.inputs.size() > 1 && keep_of(n.inputs[1])) throw unsupported(n);
    const Shape* s = shape_of(n.inputs[0]);
    const Shape* o = shape_of(n.outputs[0]);
    if (!s || !o) throw fail(n, "the shapes around it are unknown");
    int64_t axis = n.op_type == kFlatten ? n.attr_int("axis", 1) : 1;
    if (axis < 0) axis += static_cast<int64_t>(s->size());
    const bool flattens = o->size() == 2 && axis == 1 && !s->empty() && (*o)[0] == (*s)[0];
    if (in.axis != axis || !flattens) throw unsupported(n);
    int64_t inner = 1;
    for (size_t i = static_cast<size_t>(axis) + 1; i < s->size(); ++i) inner *= (*s)[i];
    Keep out{1, in.full * inner, {}, in.layer};
    for (int64_t c : in.idx)
      for (int64_t j = 0; j < inner; ++j) out.idx.push_back(c * inner + j);
    if (n.op_type == kReshape && constant(n.inputs[1])) {
      std::vector<int64_t> target = constant(n.inputs[1])->to_i64();
      if (target.size() != 2) throw unsupported(n);
      if (target[1] != -1) target[1] = static_cast<int64_t>(out.idx.size());
      const std::string name = n.inputs[1] + "@" + subnet_.name + "#" + std::to_string(serial_++);
      out_.graph.initializers[name] = Tensor::from<int64_t>({2}, target);
      n.inputs[1] = name;
    }
    keep_[n.outputs[0]] = std::move(out);
  }

  void slice_transpose(Node& n) {
    Keep k = *keep_of(n.inputs[0]);
    const auto perm = n.attr_ints("perm");
    const int64_t rank = rank_of(n, n.inputs[0]);
    if (perm.empty()) {
      k.axis = rank - 1 - k.axis;
    } else {
      auto it = std::find(perm.begin(), perm.end(), k.axis);
      if (it == perm.end()) throw unsupported(n);
      k.axis = it - perm.begin();
    }
    keep_[n.outputs[0]] = std::move(k);
  }

  // Reducing over the sliced axis averages the kept channels (what the narrower network
  // computes too); reducing over other axes keeps the slice, shifted when dims are dropped.
  void slice_reduce(Node& n) {
    Keep k = *keep_of(n.inputs[0]);
    const int64_t rank = rank_of(n, n.inputs[0]);
    std::vector<int64_t> axes = n.attr_ints("axes");
    if (n.inputs.size() > 1 && !n.inputs[1].empty()) {
      if (!constant(n.inputs[1])) throw unsupported(n);
      axes = constant(n.inputs[1])->to_i64();
    }
    for (auto& a : axes) a = a < 0 ? a + rank : a;
    if (axes.empty() || std::count(axes.begin(), axes.end(), k.axis)) return;  // whole channels out
    if (n.attr_int("keepdims", 1) == 0) k.axis -= std::count_if(axes.begin(), axes.end(), [&](int64_t a) { return a < k.axis; });
    keep_[n.outputs[0]] = std::move(k);
  }

  void drop_unused_initializers() {
    std::set<std::string> used;
    for (const auto& n : out_.graph.nodes) used.insert(n.inputs.begin(), n.inputs.end());
    for (const auto& o : out_.graph.outputs) used.insert(o.name);
    for (const auto& d : out_.graph.defaults) used.insert(d.name);
    // Subgraphs read initializers of the outer graph by name.
    for (const auto& n : out_.graph.nodes) used.insert(n.captures.begin(), n.captures.end());
    std::erase_if(out_.graph.initializers, [&](const auto& kv) { return !used.count(kv.first); });
  }

  const Graph& in_;
  const DynamicSpec& spec_;
  const SubnetSpec& subnet_;
  Graph bound_;
  SlicedSubnet out_;
  std::map<std::string, Keep> keep_;
  std::map<std::string, Tensor> overridden_;
  std::set<const Node*> exempt_;
  std::map<const Node*, int64_t> wanted_;
  const Node* current_ = nullptr;  // the imported node being sliced
  int serial_ = 0;
};

}  // namespace

namespace {

// Exporters that share equal weights (torch 1.13's ResNets) pass them through Identity nodes:
// each such output becomes an initializer of its own, as binding would fold it, so the
// slicer sees constants where a conv reads its bias and slices each reader apart.
Graph with_identity_weights_folded(const Graph& imported) {
  Graph g = imported;
  auto is_default = [&](const std::string& name) {
    return std::any_of(g.defaults.begin(), g.defaults.end(), [&](const ValueDecl& d) { return d.name == name; });
  };
  auto is_output = [&](const std::string& name) {
    return std::any_of(g.outputs.begin(), g.outputs.end(), [&](const ValueDecl& d) { return d.name == name; });
  };
  std::vector<Node> kept;
  for (Node& n : g.nodes) {
    const bool foldable = n.op_type == kIdentity && n.domain.empty() && n.inputs.size() == 1 && n.outputs.size() == 1 &&
                          g.initializers.count(n.inputs[0]) && !is_default(n.inputs[0]) && !is_output(n.outputs[0]);
    if (foldable) g.initializers[n.outputs[0]] = g.initializers.at(n.inputs[0]);
    else kept.push_back(std::move(n));
  }
  g.nodes = std::move(kept);
  return g;
}

}  // namespace

SlicedSubnet slice_subnet(const Graph& imported, const DynamicSpec& spec, const SubnetSpec& subnet) {
  return Slicer(with_identity_weights_folded(imported), spec, subnet).run();
}

}  // namespace grove
