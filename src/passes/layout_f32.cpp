// Float convolutions to channels-last: each Conv the channels-last GEMM path takes becomes
// grove.internal ConvNhwc, reading an NHWC copy of x (and of a fused residual) and writing an
// NHWC y, with a Transpose back to NCHW for every other reader. A conv whose inputs already
// have a channels-last copy reads it, so a chain of convs (a ResNet's blocks, with the residual
// Add and Relu fused in) runs channels-last from its first conv to its last; the Transposes
// no one reads are removed as dead. Convs linked by channels-last values go back to NCHW
// together where their Transposes would cost more than a tenth of their products. Depthwise
// convs (one group per channel) become DepthwiseConvNhwc, so a MobileNet's blocks (1x1 expand,
// depthwise, 1x1 project, residual add) run channels-last from end to end. A Concat over the
// channels of values that all have channels-last copies concatenates those copies along their
// last dim, and a MaxPool of such a value pools the copy (MaxPoolNhwc), so a SqueezeNet fire
// module or an inception module (whose pool branch reads the module's input) hands
// channels-last values to the next one instead of a Transpose back and forth per branch. An Add
// of two such values (a residual added after the activation) adds the copies, and a Slice of
// some of such a value's channels (a group of a split grouped conv) slices the copy.
// Why: on the NCHW path the pixels fill the GEMM's vector lanes, so a 7x7 plane (49 pixels)
// wastes a quarter of them, and any conv but a 1x1 lays out an im2col panel per tile.
// Channels-last the output channels fill the lanes and each window row is one copied run
// (docs/layout.md has the numbers).
#include <map>
#include <set>

#include "graph/node_decisions.h"
#include "kernels/conv_rows.h"
#include "kernels/gemm.h"
#include "ops/conv/channels_last.h"
#include "ops/op.h"
#include "ops/op_names.h"
#include "ops/conv/tile_conv_winograd.h"
#include "ops/tile_util.h"
#include "passes/flops.h"
#include "passes/graph_lookup.h"
#include "passes/layout_nodes.h"
#include "passes/passes.h"

namespace grove {
namespace {

// Fewer input channels than this (an image's 3) stay NCHW, each window row copied in runs of a
// few floats, unless the row conv adds the taps in registers (a stem: few_channel_stem). Few
// output channels do not keep a conv NCHW: a 16-channel 1x1 conv leaves half the panel's lanes
// empty channels-last, but its NCHW neighbours' Transposes cost more (docs/layout.md).
constexpr int64_t kMinChannels = 16;
// A group of convs keeps channels-last only if its FLOPs are at least this many times what its
// Transposes move, in FLOPs: the layout is taken to gain about a tenth of the convs' time.
constexpr double kFlopsPerMove = 10;

// One group per input channel, one output channel per group (a depth multiplier of 1).
bool is_depthwise(const Node& n, const Shape& x) {
  return x.size() == 4 && x[1] > 1 && n.attr_int("group", 1) == x[1];
}

bool is_conv_nhwc(const Node& n) {
  return n.domain == kGroveDomain && (n.op_type == kConvNhwc || n.op_type == kDepthwiseConvNhwc);
}

void set_axis(Node& n, int64_t axis) {
  n.attrs["axis"].kind = Attribute::Kind::i;
  n.attrs["axis"].i = axis;
}

// A MaxPool (2-D, no Indices output) of a float value that has a channels-last copy already.
bool pool_takes_channels_last(const Graph& g, const Node& n, const std::map<std::string, std::string>& twin) {
  if (n.op_type != kMaxPool || !n.domain.empty() || n.inputs.size() != 1 || n.outputs.size() != 1) return false;
  return twin.count(n.inputs[0]) && f32_4d(info(g, n.inputs[0])) && f32_4d(info(g, n.outputs[0])) &&
         n.attr_int("storage_order", 0) == 0;
}

// An Add of two float values of one shape (no broadcast) that both have channels-last copies:
// adding the copies gives the copy of the sum. A residual added after the activation (YOLOv3's
// darknet blocks: x + leaky(conv(conv(x)))) is not fused into the conv's epilogue, and as an
// NCHW op it cut each block's convs off from the next block's with a Transpose both ways.
bool add_takes_channels_last(const Graph& g, const Node& n, const std::map<std::string, std::string>& twin) {
  if (n.op_type != kAdd || !n.domain.empty() || n.inputs.size() != 2 || n.outputs.size() != 1) return false;
  const ValueInfo *a = info(g, n.inputs[0]), *b = info(g, n.inputs[1]), *y = info(g, n.outputs[0]);
  return twin.count(n.inputs[0]) && twin.count(n.inputs[1]) && f32_4d(a) && f32_4d(b) && f32_4d(y) &&
         a->shape == b->shape && a->shape == y->shape;
}

// A float GlobalAveragePool of a value with a channels-last copy: GlobalAveragePoolNhwc reads
// the copy and writes the NCHW output itself ([N, C, 1, 1] has the bytes of [N, 1, 1, C]).
bool global_pool_takes_channels_last(const Graph& g, const Node& n, const std::map<std::string, std::string>& twin) {
  if (n.op_type != kGlobalAveragePool || !n.domain.empty() || n.inputs.size() != 1 || n.outputs.size() != 1)
    return false;
  return twin.count(n.inputs[0]) && f32_4d(info(g, n.inputs[0]));
}

// A Concat along the channels of 4-D float values that all have channels-last copies already.
bool concat_takes_channels_last(const Graph& g, const Node& n, const std::map<std::string, std::string>& twin) {
  if (n.op_type != kConcat || !n.domain.empty() || n.outputs.size() != 1 || n.inputs.empty()) return false;
  if (!f32_4d(info(g, n.outputs[0]))) return false;
  const int64_t axis = n.attr_int("axis", 0);
  if (axis != 1 && axis != -3) return false;
  for (const std::string& in : n.inputs)
    if (!twin.count(in) || !f32_4d(info(g, in))) return false;
  return true;
}

// A Slice of some channels of a value that has a channels-last copy (the groups of a split
// grouped conv, passes/split_grouped_convs.cpp): constant starts and ends on axis 1 only, step
// 1. It slices the copy along its last dim instead, so a path's convs read channels-last
// channels with no Transpose back and forth.
bool slice_takes_channels_last(const Graph& g, const Node& n, const std::map<std::string, std::string>& twin) {
  if (n.op_type != kSlice || !n.domain.empty() || n.outputs.size() != 1 || n.inputs.size() < 4 || n.inputs.size() > 5)
    return false;
  if (!twin.count(n.inputs[0]) || !f32_4d(info(g, n.inputs[0])) || !f32_4d(info(g, n.outputs[0]))) return false;
  const Tensor* axes = constant(g, n.inputs[3]);
  if (!axes || axes->numel() != 1 || !constant(g, n.inputs[1]) || !constant(g, n.inputs[2])) return false;
  const int64_t axis = axes->dtype() == DType::i64 ? axes->data<int64_t>()[0]
                       : axes->dtype() == DType::i32 ? axes->data<int32_t>()[0]
                                                     : 0;
  if (axis != 1 && axis != -3) return false;
  if (n.inputs.size() == 5 && !n.inputs[4].empty()) {
    const Tensor* steps = constant(g, n.inputs[4]);
    if (!steps || steps->numel() != 1 || steps->to_f64()[0] != 1) return false;
  }
  return true;
}

// A conv of few input channels and a kernel wider than 1x1 (a network's stem on an image):
// channels-last, float32, where conv_rows adds its taps in registers, it beats the NCHW direct
// kernel (docs/layout.md); it reads the image as it is (stems_read_nchw).
bool few_channel_stem(const Node& n, const Tensor& w) {
  return n.attr_int("group", 1) == 1 && w.dim(2) * w.dim(3) > 1 && !runs_in_bf16(n) &&
         kernels::conv_row_supported(kernels::active_isa(), kernels::Precision::f32);
}

// The rule: a conv the channels-last path can run, not kept NCHW by a choice, with enough input
// channels or a stem. A conv chosen "nhwc", "winograd_nhwc" or "winograd_f2x3_nhwc" (grove
// tune) goes whatever the rule says, the latter two on a channels-last Winograd. Winograd
// layers go too: on the GEMM (few input channels, where conv_rows adds the taps in registers)
// or on the channels-last Winograd (keeps_winograd).
bool takes_channels_last(const Graph& g, const Node& n, const std::set<std::string>& keep) {
  if (!can_run_channels_last(g, n)) return false;
  const ConvPrimitive chosen = conv_primitive_choice(n);
  if (channels_last_choice(chosen)) return true;
  if (keep.count(n.name) || chosen != ConvPrimitive::unset) return false;
  const Shape& x = g.values.at(n.inputs[0]).shape;
  const Tensor& w = *constant(g, n.inputs[1]);
  return x[1] >= kMinChannels || few_channel_stem(n, w);
}

// A conv the rule runs on Winograd (never one the plan marked bf16), by its NCHW shapes.
bool on_winograd_by_rule(const Graph& g, const Node& n) {
  return conv_primitive_choice(n) == ConvPrimitive::unset && !runs_in_bf16(n) &&
         tiling::conv_node_uses_winograd(n, g.values.at(n.inputs[0]).shape, constant(g, n.inputs[1])->shape());
}

// A conv the rule runs on the channels-last Winograd once it goes channels-last: the NCHW
// rule's layers, and smaller planes, where the channels-last form may win (where the probe
// said so, kernels/conv_probe.h) and the NCHW one loses.
bool on_channels_last_winograd_by_rule(const Graph& g, const Node& n) {
  return conv_primitive_choice(n) == ConvPrimitive::unset && !runs_in_bf16(n) &&
         tiling::conv_node_uses_winograd_channels_last(n, g.values.at(n.inputs[0]).shape,
                                                       constant(g, n.inputs[1])->shape());
}

// Whether a Winograd layer that goes channels-last stays on Winograd: where the channels-last
// GEMM adds its taps in registers (kernels/conv_rows.h) it may beat Winograd on few input
// channels, whose transforms then outweigh their GEMMs. From how many on Winograd wins depends
// on the core (kernels/conv_probe.h); the plan carries the measured count.
bool keeps_winograd(const Shape& x, int64_t winograd_min_channels) {
  return x[1] >= winograd_min_channels || !kernels::conv_row_supported(kernels::active_isa(), kernels::Precision::f32);
}

// Convs, Concats, Adds and pools that share channels-last values (one reads another's y, or both read
// one copy) form a component: together they stay channels-last or go back. A component keeps channels-last
// only if its FLOPs are at least kFlopsPerMove times what its Transposes move, in FLOPs (the
// plan's transpose_flops per element); otherwise every conv of it becomes the NCHW Conv again and
// its Transposes, unread, are dead. A group holding a conv chosen "nhwc" stays whole: that
// conv reads its neighbours' channels-last outputs, which going back would remove. Two kinds of
// conv (`riders`) pay for no Transposes with their FLOPs and stay only in a component the
// others pay for: Winograd layers run channels-last at about their NCHW speed, and a stem
// gains a fraction of its time, less than its output's Transpose back would cost. Returns how
// many convs went back.
int revert_costly_components(Graph& g, const std::map<std::string, std::string>& nchw_of,
                             const std::set<std::string>& movers, const std::set<std::string>& riders,
                             double transpose_flops) {
  auto channels_last = [&](const Node& n) {
    return is_conv_nhwc(n) || (n.outputs.size() == 1 && movers.count(n.outputs[0]));
  };
  std::vector<size_t> convs;
  std::map<std::string, size_t> producer;
  std::map<std::string, int> reads;
  for (size_t i = 0; i < g.nodes.size(); ++i) {
    for (const auto& o : g.nodes[i].outputs) producer[o] = i;
    for (const auto& in : g.nodes[i].inputs) ++reads[in];
    if (channels_last(g.nodes[i])) convs.push_back(i);
  }
  for (const auto& o : g.outputs) ++reads[o.name];
  std::map<size_t, size_t> parent;  // union-find over the convs' node indices
  for (size_t c : convs) parent[c] = c;
  auto root = [&](size_t c) {
    while (parent[c] != c) c = parent[c] = parent[parent[c]];
    return c;
  };
  auto twin_inputs = [&](const Node& c) {
    if (c.op_type == kConcat || c.op_type == kAdd) return c.inputs;
    if (c.op_type == kSlice) return std::vector<std::string>{c.inputs[0]};
    std::vector<std::string> v = {c.inputs[0]};
    if (c.inputs.size() > kEpilogueResidualInput && !c.inputs[kEpilogueResidualInput].empty())
      v.push_back(c.inputs[kEpilogueResidualInput]);
    return v;
  };
  std::map<std::string, size_t> first_reader;
  for (size_t c : convs)
    for (const std::string& t : twin_inputs(g.nodes[c])) {
      auto p = producer.find(t);
      if (p != producer.end() && parent.count(p->second)) parent[root(c)] = root(p->second);
      auto [it, fresh] = first_reader.emplace(t, c);
      if (!fresh) parent[root(c)] = root(it->second);
    }
  std::map<size_t, double> flops, moved;
  std::set<size_t> chosen;  // groups holding a conv chosen channels-last: they stay so whole
  for (size_t c : convs) {
    const Node& n = g.nodes[c];
    if (channels_last_choice(conv_primitive_choice(n))) chosen.insert(root(c));
    if (!riders.count(n.name)) flops[root(c)] += double(node_flops(g, n));
    auto y = nchw_of.find(n.outputs[0]);  // none for a global pool: its output is NCHW already
    if (y != nchw_of.end() && reads[y->second] > 0)
      moved[root(c)] += double(numel(g.values.at(y->second).shape));  // its Transpose back is read
  }
  for (const auto& [t, c] : first_reader) {
    auto p = producer.find(t);
    if (p == producer.end() || !parent.count(p->second)) moved[root(c)] += double(numel(g.values.at(t).shape));
  }
  std::set<std::string> dropped;  // the Transposes back of the convs that go back
  int reverted = 0;
  for (size_t c : convs) {
    const size_t r = root(c);
    Node& n = g.nodes[c];
    if (chosen.count(r) || flops[r] >= kFlopsPerMove * transpose_flops * moved[r]) continue;
    if (n.op_type == kConcat || n.op_type == kAdd) {
      if (n.op_type == kConcat) set_axis(n, 1);
      for (std::string& in : n.inputs) in = nchw_of.at(in);
    } else if (n.op_type == kSlice) {  // its NCHW axes went as dead with the NCHW Slice: anew
      n.inputs[0] = nchw_of.at(n.inputs[0]);
      n.inputs[3] = add_i64_constant(g, nchw_of.at(n.outputs[0]) + "/axes", 1);
    } else if (n.op_type == kGlobalAveragePoolNhwc) {
      n.op_type = kGlobalAveragePool;
      n.domain.clear();
      n.inputs[0] = nchw_of.at(n.inputs[0]);
      continue;  // its output was NCHW all along
    } else if (n.op_type == kMaxPoolNhwc) {
      n.op_type = kMaxPool;
      n.domain.clear();
      n.inputs[0] = nchw_of.at(n.inputs[0]);
    } else {
      n.op_type = kConv;
      n.domain.clear();
      n.decisions.conv = ConvPrimitive::unset;  // a Winograd layer's mark (a chosen conv never went)
      n.decisions.conv_source = DecisionSource::rule;
      n.inputs[0] = nchw_of.at(n.inputs[0]);
      if (n.inputs.size() > kEpilogueResidualInput && !n.inputs[kEpilogueResidualInput].empty())
        n.inputs[kEpilogueResidualInput] = nchw_of.at(n.inputs[kEpilogueResidualInput]);
      ++reverted;
    }
    dropped.insert(n.outputs[0]);
    n.outputs[0] = nchw_of.at(n.outputs[0]);
  }
  std::vector<Node> kept;
  for (auto& n : g.nodes)
    if (!(n.op_type == kTranspose && n.inputs.size() == 1 && dropped.count(n.inputs[0]))) kept.push_back(std::move(n));
  g.nodes = std::move(kept);
  return reverted;
}

// A channels-last stem whose x is the channels-last copy of an NCHW value reads that value
// instead (Decisions::x_nchw): its row copies gather the few channels themselves, and the image's
// Transpose, one tile that every stem tile waits for, goes unless something else reads the
// copy. Only on the row path (the stems few_channel_stem sends), float32, no residual.
void stems_read_nchw(Graph& g, const std::map<std::string, std::string>& nchw_of) {
  // The NCHW values still in the graph: a conv's NCHW y whose Transpose back no one read is gone.
  std::set<std::string> present;
  for (const ValueDecl& in : g.inputs) present.insert(in.name);
  for (const Node& n : g.nodes) present.insert(n.outputs.begin(), n.outputs.end());
  for (Node& n : g.nodes) {
    if (n.op_type != kConvNhwc || n.domain != kGroveDomain || conv_primitive_choice(n) != ConvPrimitive::unset) continue;
    auto x = nchw_of.find(n.inputs[0]);
    if (x == nchw_of.end() || !present.count(x->second) ||
        (n.inputs.size() > kEpilogueResidualInput && !n.inputs[kEpilogueResidualInput].empty()))
      continue;
    const ValueInfo* v = info(g, x->second);
    const Tensor* w = constant(g, n.inputs[1]);
    if (!f32_4d(v) || !w || w->rank() != 4 || v->shape[1] >= kMinChannels || !few_channel_stem(n, *w)) continue;
    n.inputs[0] = x->second;
    n.decisions.x_nchw = true;
  }
}

}  // namespace

bool can_run_channels_last(const Graph& g, const Node& n) {
  if (n.op_type != kConv || !n.domain.empty() || n.inputs.size() < 2 || n.outputs.size() != 1) return false;
  const ValueInfo *x = info(g, n.inputs[0]), *y = info(g, n.outputs[0]);
  const Tensor* w = constant(g, n.inputs[1]);
  if (!f32_4d(x) || !f32_4d(y) || !w || w->dtype() != DType::f32 || w->rank() != 4) return false;
  if (n.attr_int("group", 1) != 1 && !(is_depthwise(n, x->shape) && w->dim(0) == x->shape[1] && w->dim(1) == 1))
    return false;
  if (n.inputs.size() > 2 && !n.inputs[2].empty() && !info(g, n.inputs[2])) return false;
  return n.inputs.size() <= kEpilogueResidualInput || n.inputs[kEpilogueResidualInput].empty() ||
         f32_4d(info(g, n.inputs[kEpilogueResidualInput]));
}

bool is_few_channel_stem(const Graph& g, const Node& n) {
  if (!can_run_channels_last(g, n) || n.attr_int("group", 1) != 1) return false;
  const Tensor& w = *constant(g, n.inputs[1]);
  return info(g, n.inputs[0])->shape[1] < kMinChannels && w.dim(2) * w.dim(3) > 1 &&
         kernels::conv_row_supported(kernels::active_isa(), kernels::Precision::f32);
}

int to_channels_last_f32(Graph& g, const std::set<std::string>& keep, double transpose_flops,
                         int64_t winograd_min_channels, bool winograd_small_planes) {
  std::map<std::string, std::string> twin;     // NCHW value -> its channels-last copy
  std::map<std::string, std::string> nchw_of;  // and back
  std::vector<Node> out;
  // The Concats, Adds and pools that take channels-last copies, by the value they write (node
  // names may be empty).
  std::set<std::string> movers;
  std::set<std::string> riders;  // Winograd layers, and stems (revert_costly_components)
  int converted = 0;
  auto channels_last = [&](const std::string& value) {
    const std::string name = channels_last_copy(g, value, twin, out);
    nchw_of[name] = value;
    return name;
  };
  // y (NCHW) gets the channels-last twin `name`, written by the node just added to `out`, and
  // a Transpose back for any NCHW reader.
  auto add_twin = [&](const std::string& y) {
    const std::string name = channels_last_name(y);
    const ValueInfo v = g.values.at(y);
    g.values[name] = ValueInfo{v.dtype, nhwc_shape(v.shape), nullptr, true};
    out.back().outputs[0] = name;
    out.push_back(transpose_node(name + "/Transpose", name, y, {0, 3, 1, 2}));
    twin[y] = name;
    nchw_of[name] = y;
  };
  for (const auto& n : g.nodes) {
    const bool concat = concat_takes_channels_last(g, n, twin);
    if (concat || add_takes_channels_last(g, n, twin)) {  // the same node over the copies
      Node c = n;
      if (concat) set_axis(c, 3);
      for (std::string& in : c.inputs) in = twin.at(in);
      out.push_back(std::move(c));
      add_twin(n.outputs[0]);
      movers.insert(twin.at(n.outputs[0]));
      continue;
    }
    if (slice_takes_channels_last(g, n, twin)) {  // the same Slice on the copy's last dim
      Node c = n;
      c.inputs[0] = twin.at(n.inputs[0]);
      c.inputs[3] = add_i64_constant(g, n.outputs[0] + "/nhwc/axes", 3);
      out.push_back(std::move(c));
      add_twin(n.outputs[0]);
      movers.insert(twin.at(n.outputs[0]));
      continue;
    }
    const bool global_pool = global_pool_takes_channels_last(g, n, twin);
    if (global_pool || pool_takes_channels_last(g, n, twin)) {
      Node p = n;
      p.op_type = global_pool ? kGlobalAveragePoolNhwc : kMaxPoolNhwc;
      p.domain = kGroveDomain;
      p.inputs[0] = twin.at(n.inputs[0]);
      out.push_back(std::move(p));
      if (!global_pool) add_twin(n.outputs[0]);  // a global pool's output stays the NCHW value
      movers.insert(global_pool ? n.outputs[0] : twin.at(n.outputs[0]));
      continue;
    }
    if (!takes_channels_last(g, n, keep)) {
      out.push_back(n);
      continue;
    }
    const Shape& x = g.values.at(n.inputs[0]).shape;
    const bool winograd = on_winograd_by_rule(g, n);
    if (winograd || x[1] < kMinChannels) riders.insert(n.name);
    Node c = n;
    c.op_type = n.attr_int("group", 1) == 1 ? kConvNhwc : kDepthwiseConvNhwc;
    c.domain = kGroveDomain;
    const bool small_plane = winograd_small_planes && on_channels_last_winograd_by_rule(g, n);
    if ((winograd || small_plane) && keeps_winograd(x, winograd_min_channels)) {
      c.decisions.conv = ConvPrimitive::winograd;
      c.decisions.conv_source = DecisionSource::rule;
    }
    c.inputs[0] = channels_last(n.inputs[0]);
    if (c.inputs.size() > kEpilogueResidualInput && !c.inputs[kEpilogueResidualInput].empty())
      c.inputs[kEpilogueResidualInput] = channels_last(n.inputs[kEpilogueResidualInput]);
    out.push_back(std::move(c));
    add_twin(n.outputs[0]);
    ++converted;
  }
  g.nodes = std::move(out);
  remove_dead_nodes(g);  // the Transposes back that nothing reads, before they count as moves
  const int reverted = revert_costly_components(g, nchw_of, movers, riders, transpose_flops);
  stems_read_nchw(g, nchw_of);
  remove_dead_nodes(g);
  // The channels-last values of the groups that went back are read and written by nothing now;
  // left in, they would change the plan's graph (and its hash) for nothing.
  std::set<std::string> used;
  for (const Node& n : g.nodes) {
    used.insert(n.inputs.begin(), n.inputs.end());
    used.insert(n.outputs.begin(), n.outputs.end());
  }
  for (const auto& [name, nchw] : nchw_of)
    if (!used.count(name)) g.values.erase(name);
  return converted - reverted;
}

}  // namespace grove
