#include "dynamic/channel_flow.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <set>

#include "graph/error.h"
#include "ops/op.h"
#include "ops/op_names.h"
#include "passes/bind.h"

namespace grove {
namespace {

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

// Exporters that share equal weights (torch 1.13's ResNets) pass them through Identity nodes:
// each such output becomes an initializer of its own, as binding would fold it, so the
// follower sees constants where a conv reads its bias and slices each reader apart.
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

// Ops that can turn the small values of new channels into inf or NaN, which a zero weight
// downstream does not cancel (0 * inf is NaN).
bool may_turn_non_finite(const Node& n) {
  return n.op_type == kLog || n.op_type == kSqrt || n.op_type == kReciprocal || n.op_type == kPow;
}

}  // namespace

bool ChannelMap::adds_channels() const {
  return std::find(idx.begin(), idx.end(), kNewChannel) != idx.end();
}

bool is_channel_layer(const Graph& g, const Node& n) {
  const bool layer_op = n.op_type == kConv || n.op_type == kGemm || n.op_type == kMatMul;
  if (!n.domain.empty() || !layer_op || n.inputs.size() < 2) return false;
  auto w = g.initializers.find(n.inputs[1]);
  if (w == g.initializers.end()) return false;
  if (n.op_type == kMatMul && w->second.rank() != 2) return false;
  // A grouped (not depthwise) conv cannot change its output channels without breaking its
  // groups, and a depthwise one follows its input: neither is a layer of its own.
  return n.op_type != kConv || n.attr_int("group", 1) == 1;
}

std::string channel_layer_name(const Node& n) { return n.name.empty() ? n.inputs[1] : n.name; }

int64_t channel_layer_weight_axis(const Node& n) {
  if (n.op_type == kConv) return 0;
  return n.op_type == kGemm && n.attr_int("transB", 0) != 0 ? 0 : 1;
}

ChannelFollower::ChannelFollower(const Graph& imported, std::string context, std::string changed, uint64_t seed)
    : in_(with_identity_weights_folded(imported)),
      out_(in_),
      context_(std::move(context)),
      changed_(std::move(changed)),
      bound_(bind_full(in_)),
      rng_(seed) {}

Error ChannelFollower::fail(const std::string& what) const {
  return Error(context_.empty() ? what : context_ + ": " + what);
}
Error ChannelFollower::fail(const Node& n, const std::string& what) const { return fail(n.describe() + ": " + what); }

const Tensor* ChannelFollower::constant(const std::string& name) const {
  auto it = in_.initializers.find(name);
  return it == in_.initializers.end() ? nullptr : &it->second;
}

const Shape* ChannelFollower::shape_of(const std::string& name) const {
  if (const Tensor* t = constant(name)) return &t->shape();
  auto it = bound_.values.find(name);
  return it == bound_.values.end() ? nullptr : &it->second.shape;
}

int64_t ChannelFollower::rank_of(const Node& n, const std::string& name) const {
  const Shape* s = shape_of(name);
  if (!s) throw fail(n, "the shape of '" + name + "' is unknown, so its channels cannot be followed");
  return static_cast<int64_t>(s->size());
}

const ChannelMap* ChannelFollower::map_of(const std::string& v) const {
  auto it = maps_.find(v);
  return it == maps_.end() ? nullptr : &it->second;
}

Graph ChannelFollower::follow() {
  for (size_t i = 0; i < out_.nodes.size(); ++i) {
    current_ = &in_.nodes[i];
    Node& n = out_.nodes[i];
    follow_node(n);
    after_node(n);
  }
  for (const auto& o : out_.outputs)
    if (const ChannelMap* m = map_of(o.name))
      throw fail("output '" + o.name + "' would " + (m->adds_channels() ? "gain" : "lose") + " channels" +
                 advice(Advice::output, m->layer));
  drop_unused_initializers();
  return std::move(out_);
}

// The tensor with the channels `idx` of `src` along `axis`; new channels hold `fill`.
Tensor ChannelFollower::gather(const Node& n, const Tensor& src, int64_t axis, const std::vector<int64_t>& idx,
                               NewEntries fill) {
  Shape shape = src.shape();
  const size_t elem = dtype_size(src.dtype());
  int64_t outer = 1, inner = 1;
  for (int64_t i = 0; i < axis; ++i) outer *= shape[i];
  for (int64_t i = axis + 1; i < src.rank(); ++i) inner *= shape[i];
  const int64_t width = shape[axis];
  shape[axis] = static_cast<int64_t>(idx.size());
  Tensor out(src.dtype(), shape);
  const size_t row = static_cast<size_t>(inner) * elem;
  const bool adds = std::find(idx.begin(), idx.end(), kNewChannel) != idx.end();
  if (adds && fill != NewEntries::zero && src.dtype() != DType::f32)
    throw fail(n, "cannot add channels to '" + std::string(dtype_name(src.dtype())) + "' weights");
  // New entries of the layer's own weights: a tenth of the weights' RMS, so they start small
  // next to the trained channels but not at zero, where training would never move them.
  float sigma = 0;
  if (adds && fill == NewEntries::small_random) {
    double sum = 0;
    for (float v : src.span<float>()) sum += double(v) * v;
    sigma = src.numel() ? static_cast<float>(0.1 * std::sqrt(sum / double(src.numel()))) : 0.0f;
    if (!(sigma > 0)) sigma = 0.01f;
  }
  std::normal_distribution<float> normal(0.0f, sigma);
  for (int64_t o = 0; o < outer; ++o)
    for (size_t j = 0; j < idx.size(); ++j) {
      std::byte* dst = out.raw() + (static_cast<size_t>(o) * idx.size() + j) * row;
      if (idx[j] != kNewChannel) {
        std::memcpy(dst, src.raw() + static_cast<size_t>(o * width + idx[j]) * row, row);
        continue;
      }
      std::memset(dst, 0, row);
      float* f = reinterpret_cast<float*>(dst);
      if (fill == NewEntries::one) std::fill(f, f + inner, 1.0f);
      if (fill == NewEntries::small_random)
        for (int64_t k = 0; k < inner; ++k) f[k] = normal(rng_);
    }
  return out;
}

// Replaces node input `i` (an initializer) by its slice along `axis`.
void ChannelFollower::slice_input(Node& n, size_t i, int64_t axis, const std::vector<int64_t>& idx, NewEntries fill) {
  const std::string& name = n.inputs[i];
  // The tensor as this graph has it so far: its replacement, or the input already sliced
  // along another axis (a conv's weight is cut by input and by output channels).
  const Tensor* variant = replacement(name);
  auto current = out_.initializers.find(name);
  if (!variant && current == out_.initializers.end())
    throw fail(n, "'" + name + "' is not a constant, so it cannot be " + changed_);
  const Tensor src = variant ? *variant : current->second;
  if (axis < 0 || axis >= src.rank()) throw fail(n, "cannot slice '" + name + "' along axis " + std::to_string(axis));
  const int64_t highest = *std::max_element(idx.begin(), idx.end());
  Tensor sliced;
  if (src.dim(axis) == static_cast<int64_t>(idx.size()) && variant) {
    sliced = src;  // a private variant already has the new width
  } else if (highest >= src.dim(axis)) {
    throw fail(n, "'" + name + "' has " + std::to_string(src.dim(axis)) + " entries along axis " +
                      std::to_string(axis) + ", fewer than the channels it is sliced to");
  } else {
    sliced = gather(n, src, axis, idx, fill);
  }
  const std::string new_name = rewritten_name(name);
  out_.initializers[new_name] = sliced;
  n.inputs[i] = new_name;
}

void ChannelFollower::follow_node(Node& n) {
  for (const auto& c : n.captures)
    if (map_of(c)) throw fail(n, "its subgraph reads '" + c + "', whose channels are " + changed_);
  bool any = false, adds = false;
  for (const auto& v : n.inputs)
    if (const ChannelMap* m = map_of(v)) any = true, adds |= m->adds_channels();
  if (!n.domain.empty()) {
    if (any) throw unsupported(n);
    return;
  }
  if (adds && may_turn_non_finite(n))
    throw fail(n, "could turn the new channels into inf or NaN, which zero weights downstream do not cancel");
  const std::string& op = n.op_type;
  if (op == kConv) return follow_conv(n);
  if (op == kGemm || op == kMatMul) return follow_matmul(n);
  if (!any) return;
  const OpSpec* spec = OpRegistry::builtin().find(n);
  const ChannelFlow flow = spec ? spec->traits.channels : ChannelFlow::stops;
  if (flow == ChannelFlow::broadcast) return follow_elementwise(n);
  if (op == kConcat) return follow_concat(n);
  // The rest carry channels through their first input only: changed channels that reach one
  // by another input (a Clip's bound, a Reshape's shape, a BatchNormalization's statistics)
  // are not channels of its output.
  if (!map_of(n.inputs[0])) throw unsupported(n);
  if (op == kBatchNormalization) return follow_batchnorm(n);
  if (adds) refuse_mixing_new_channels(n);
  if (flow == ChannelFlow::per_channel) return pass(n, *map_of(n.inputs[0]));
  if (op == kFlatten || op == kReshape) return follow_flatten(n);
  if (op == kTranspose) return follow_transpose(n);
  if (flow == ChannelFlow::reduces) return follow_reduce(n);
  throw unsupported(n);
}

// Growing must leave every output as it was. Softmax over the channel axis spreads its
// normalisation over every channel, new ones included; a reduction over it (follow_reduce)
// sums them in. Pruning computes what the narrower network computes, so it may.
void ChannelFollower::refuse_mixing_new_channels(const Node& n) const {
  if (n.op_type != kSoftmax && n.op_type != kLogSoftmax) return;
  const ChannelMap& in = *map_of(n.inputs[0]);
  const int64_t rank = rank_of(n, n.inputs[0]);
  int64_t axis = n.attr_int("axis", n.opset >= 13 ? -1 : 1);
  if (axis < 0) axis += rank;
  // Before opset 13 the op flattens from `axis` on: every axis from there is normalised over.
  if (n.opset >= 13 ? axis == in.axis : axis <= in.axis)
    throw fail(n, "normalises over the channel axis, where new channels would change every output");
}

Error ChannelFollower::unsupported(const Node& n) const {
  return fail(n, "cannot take " + changed_ + " channels" + advice(Advice::unsupported, ""));
}

void ChannelFollower::pass(const Node& n, ChannelMap m) {
  if (n.op_type == kMaxPool && n.outputs.size() > 1 && !n.outputs[1].empty()) throw unsupported(n);
  maps_[n.outputs[0]] = std::move(m);
}

void ChannelFollower::follow_conv(Node& n) {
  const ChannelMap* in = map_of(n.inputs[0]);
  for (size_t i = 1; i < n.inputs.size(); ++i)
    if (map_of(n.inputs[i])) throw unsupported(n);
  const Tensor* w = constant(n.inputs[1]);
  const int64_t group = n.attr_int("group", 1);
  if (!w || w->rank() < 3) {
    if (in) throw fail(n, "its weights are not constant, so its input channels cannot be " + changed_);
    return;
  }
  if (group != 1) {
    const bool depthwise = w->dim(1) == 1 && w->dim(0) == group;
    if (!in) return;
    if (!depthwise || in->axis != 1) throw fail(n, "a grouped conv (not depthwise) cannot take " + changed_ + " channels");
    // A depthwise conv's new channels are channels of its own: their weights start small and
    // random like a layer's, and the reader after it zeroes them.
    slice_input(n, 1, 0, in->idx, NewEntries::small_random);
    if (n.inputs.size() > 2 && !n.inputs[2].empty()) slice_input(n, 2, 0, in->idx, NewEntries::zero);
    n.attrs["group"].i = static_cast<int64_t>(in->idx.size());
    maps_[n.outputs[0]] = *in;
    return;
  }
  if (in) {
    if (in->axis != 1) throw unsupported(n);
    slice_input(n, 1, 1, in->idx, NewEntries::zero);
  }
  follow_layer_output(n, 0, 2, 1);
}

// Changes a layer's output channels: weight input 1 along `w_axis`, the bias (input
// `bias_input`, when present) along its last axis.
void ChannelFollower::follow_layer_output(Node& n, int64_t w_axis, size_t bias_input, int64_t out_axis) {
  const Tensor& w = *constant(current_->inputs[1]);
  const int64_t full = w.dim(w_axis);
  const std::optional<std::vector<int64_t>> idx = layer_output(*current_, w, w_axis);
  if (!idx) return;
  slice_input(n, 1, w_axis, *idx, NewEntries::small_random);
  if (bias_input < n.inputs.size() && !n.inputs[bias_input].empty()) {
    const Shape* b = shape_of(n.inputs[bias_input]);
    if (!constant(n.inputs[bias_input]) || !b || b->empty()) throw fail(n, "its bias is not a constant vector");
    if (b->back() == full) slice_input(n, bias_input, static_cast<int64_t>(b->size()) - 1, *idx, NewEntries::zero);
  }
  maps_[n.outputs[0]] = ChannelMap{out_axis, full, *idx, channel_layer_name(n)};
}

void ChannelFollower::follow_matmul(Node& n) {
  const ChannelMap* in = map_of(n.inputs[0]);
  if (map_of(n.inputs[1]) || (n.inputs.size() > 2 && map_of(n.inputs[2]))) throw unsupported(n);
  if (!is_channel_layer(in_, *current_)) {
    if (in) throw fail(n, "its weights are not constant, so its input channels cannot be " + changed_);
    return;
  }
  const bool gemm = n.op_type == kGemm;
  const bool trans_b = gemm && n.attr_int("transB", 0) != 0;
  const int64_t k_axis = trans_b ? 1 : 0, n_axis = 1 - k_axis;
  if (in) {
    const int64_t rank = rank_of(n, n.inputs[0]);
    if (in->axis != rank - 1 || (gemm && n.attr_int("transA", 0) != 0)) throw unsupported(n);
    slice_input(n, 1, k_axis, in->idx, NewEntries::zero);
  }
  const int64_t out_rank = gemm ? 2 : rank_of(n, n.outputs[0]);
  follow_layer_output(n, n_axis, gemm ? 2 : n.inputs.size(), out_rank - 1);
}

void ChannelFollower::follow_batchnorm(Node& n) {
  const ChannelMap& in = *map_of(n.inputs[0]);
  if (in.axis != 1) throw unsupported(n);
  // scale, bias, mean, variance: a new channel is normalised by mean 0 and variance 1.
  const NewEntries fills[] = {NewEntries::one, NewEntries::zero, NewEntries::zero, NewEntries::one};
  for (size_t i = 1; i < n.inputs.size() && i < 5; ++i) {
    if (map_of(n.inputs[i]) || !constant(n.inputs[i])) throw fail(n, "its statistics are not constant");
    slice_input(n, i, 0, in.idx, fills[i - 1]);
  }
  maps_[n.outputs[0]] = in;
}

// Broadcasting ops: every changed operand must carry the same channels; a constant operand
// as wide as the original tensor is sliced with it.
void ChannelFollower::follow_elementwise(Node& n) {
  const int64_t rank = rank_of(n, n.outputs[0]);
  std::optional<ChannelMap> common;
  for (size_t i = 0; i < n.inputs.size(); ++i) {
    const ChannelMap* m = map_of(n.inputs[i]);
    if (!m) continue;
    // A divisor with new channels may be near zero there.
    if (n.op_type == kDiv && i > 0 && m->adds_channels())
      throw fail(n, "divides by the new channels, which could be near zero");
    ChannelMap aligned = *m;
    aligned.axis += rank - rank_of(n, n.inputs[i]);
    if (common && !common->same_channels(aligned))
      throw fail(n, "adds tensors " + changed_ + " differently (from layers '" + common->layer + "' and '" + m->layer +
                        "')" + advice(Advice::differently, ""));
    common = aligned;
  }
  // A constant's entries for new channels: the identity of the op, so that a new channel
  // passes through it as it came (its reader's zero weights cancel it either way).
  const NewEntries identity = n.op_type == kMul || n.op_type == kDiv ? NewEntries::one : NewEntries::zero;
  for (size_t i = 0; i < n.inputs.size(); ++i) {
    const std::string& v = n.inputs[i];
    if (v.empty() || map_of(v)) continue;
    const Shape* s = shape_of(v);
    if (!s) throw fail(n, "the shape of '" + v + "' is unknown");
    const int64_t axis = common->axis - (rank - static_cast<int64_t>(s->size()));
    if (axis < 0 || (*s)[axis] == 1) continue;
    if ((*s)[axis] != common->full || !constant(v))
      throw fail(n, "mixes channels " + changed_ + " by layer '" + common->layer + "' with the whole tensor '" + v + "'" +
                        advice(Advice::mixes, common->layer));
    slice_input(n, i, axis, common->idx, identity);
  }
  maps_[n.outputs[0]] = *common;
}

void ChannelFollower::follow_concat(Node& n) {
  const int64_t rank = rank_of(n, n.outputs[0]);
  int64_t axis = n.attr_int("axis", 0);
  if (axis < 0) axis += rank;
  ChannelMap out{axis, 0, {}, ""};
  for (const auto& v : n.inputs) {
    const ChannelMap* m = map_of(v);
    const Shape* s = shape_of(v);
    if (!s) throw fail(n, "the shape of '" + v + "' is unknown");
    if (m && m->axis != axis) throw unsupported(n);
    const int64_t full = m ? m->full : (*s)[axis];
    if (m) {
      for (int64_t i : m->idx) out.idx.push_back(i == kNewChannel ? kNewChannel : out.full + i);
      out.layer = m->layer;
    } else {
      for (int64_t i = 0; i < full; ++i) out.idx.push_back(out.full + i);
    }
    out.full += full;
  }
  maps_[n.outputs[0]] = out;
}

// Flatten at the changed axis (and a Reshape that flattens [N, C, ...] to [N, -1]): channel c
// becomes the run of features c*inner .. c*inner + inner - 1.
void ChannelFollower::follow_flatten(Node& n) {
  const ChannelMap& in = *map_of(n.inputs[0]);
  if (n.inputs.size() > 1 && map_of(n.inputs[1])) throw unsupported(n);
  const Shape* s = shape_of(n.inputs[0]);
  const Shape* o = shape_of(n.outputs[0]);
  if (!s || !o) throw fail(n, "the shapes around it are unknown");
  int64_t axis = n.op_type == kFlatten ? n.attr_int("axis", 1) : 1;
  if (axis < 0) axis += static_cast<int64_t>(s->size());
  const bool flattens = o->size() == 2 && axis == 1 && !s->empty() && (*o)[0] == (*s)[0];
  if (in.axis != axis || !flattens) throw unsupported(n);
  int64_t inner = 1;
  for (size_t i = static_cast<size_t>(axis) + 1; i < s->size(); ++i) inner *= (*s)[i];
  ChannelMap out{1, in.full * inner, {}, in.layer};
  for (int64_t c : in.idx)
    for (int64_t j = 0; j < inner; ++j) out.idx.push_back(c == kNewChannel ? kNewChannel : c * inner + j);
  if (n.op_type == kReshape && constant(n.inputs[1])) {
    std::vector<int64_t> target = constant(n.inputs[1])->to_i64();
    if (target.size() != 2) throw unsupported(n);
    if (target[1] != -1) target[1] = static_cast<int64_t>(out.idx.size());
    const std::string name = rewritten_name(n.inputs[1]);
    out_.initializers[name] = Tensor::from<int64_t>({2}, target);
    n.inputs[1] = name;
  }
  maps_[n.outputs[0]] = std::move(out);
}

void ChannelFollower::follow_transpose(Node& n) {
  ChannelMap m = *map_of(n.inputs[0]);
  const auto perm = n.attr_ints("perm");
  const int64_t rank = rank_of(n, n.inputs[0]);
  if (perm.empty()) {
    m.axis = rank - 1 - m.axis;
  } else {
    auto it = std::find(perm.begin(), perm.end(), m.axis);
    if (it == perm.end()) throw unsupported(n);
    m.axis = it - perm.begin();
  }
  maps_[n.outputs[0]] = std::move(m);
}

// Reducing over the changed axis averages the kept channels (what the narrower network
// computes too); reducing over other axes keeps the map, shifted when dims are dropped.
void ChannelFollower::follow_reduce(Node& n) {
  ChannelMap m = *map_of(n.inputs[0]);
  const int64_t rank = rank_of(n, n.inputs[0]);
  std::vector<int64_t> axes = n.attr_ints("axes");
  if (n.inputs.size() > 1 && !n.inputs[1].empty()) {
    if (!constant(n.inputs[1])) throw unsupported(n);
    axes = constant(n.inputs[1])->to_i64();
  }
  for (auto& a : axes) a = a < 0 ? a + rank : a;
  if (axes.empty() || std::count(axes.begin(), axes.end(), m.axis)) {
    if (m.adds_channels()) throw fail(n, "reduces over the channel axis, where new channels would change its output");
    return;  // whole channels out
  }
  if (n.attr_int("keepdims", 1) == 0) m.axis -= std::count_if(axes.begin(), axes.end(), [&](int64_t a) { return a < m.axis; });
  maps_[n.outputs[0]] = std::move(m);
}

void ChannelFollower::drop_unused_initializers() {
  std::set<std::string> used;
  for (const auto& n : out_.nodes) used.insert(n.inputs.begin(), n.inputs.end());
  for (const auto& o : out_.outputs) used.insert(o.name);
  for (const auto& d : out_.defaults) used.insert(d.name);
  // Subgraphs read initializers of the outer graph by name.
  for (const auto& n : out_.nodes) used.insert(n.captures.begin(), n.captures.end());
  std::erase_if(out_.initializers, [&](const auto& kv) { return !used.count(kv.first); });
}

}  // namespace grove
