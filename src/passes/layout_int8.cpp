// Quantized convolutions to channels-last: each QLinearConv the 8-bit kernel can take becomes
// grove.internal QLinearConvNhwc between two Transposes (NCHW -> NHWC before, back after).
// A conv or residual QLinearAdd whose inputs already have a channels-last twin reads the twin,
// so a chain of them (a ResNet's blocks) runs channels-last from its first conv to its last
// reader that is not one of them; the back Transposes no one reads are removed as dead. A
// conv left alone between NCHW ops goes back to NCHW (the two Transposes would cost more).
// Why: in NCHW each tile laid x's windows out in pixel-major panels (a byte transpose per tile)
// and wasted panel columns on planes that are not a multiple of 16 pixels; channels-last
// pixels are the kernel's rows as they lie in memory (docs/quantization.md has the numbers).
#include <cstdlib>
#include <limits>
#include <map>
#include <set>

#include "graph/node_decisions.h"
#include "kernels/isa.h"
#include "ops/conv/channels_last.h"
#include "ops/op.h"
#include "ops/op_names.h"
#include "passes/graph_lookup.h"
#include "passes/layout_nodes.h"
#include "passes/passes.h"

namespace grove {
namespace {

bool one_byte(DType t) { return t == DType::u8 || t == DType::i8; }

// Everything but x constant, int8 W with zero points 0, one group, per-tensor x and y
// parameters, and sums that fit the kernel's int32 (tile_quant_conv_nhwc.cpp checks again).
bool takes_channels_last(const Graph& g, const Node& n) {
  if (n.op_type != kQLinearConv || !n.domain.empty() || n.inputs.size() < 8 || n.outputs.size() != 1) return false;
  if (n.attr_int("group", 1) != 1) return false;
  auto x = g.values.find(n.inputs[0]), y = g.values.find(n.outputs[0]);
  if (x == g.values.end() || y == g.values.end() || x->second.shape.size() != 4 || !one_byte(x->second.dtype)) return false;
  const Tensor* w = constant(g, n.inputs[3]);
  if (!w || w->dtype() != DType::i8 || w->rank() != 4) return false;
  for (size_t i : {1, 2, 4, 6, 7}) {
    const Tensor* t = constant(g, n.inputs[i]);
    if (!t || (i != 4 && t->numel() != 1)) return false;
  }
  if (!n.inputs[5].empty()) {
    const Tensor* wz = constant(g, n.inputs[5]);
    if (!wz) return false;
    for (int64_t v : wz->to_i64())
      if (v != 0) return false;
  }
  int64_t largest_bias = 0;
  if (n.inputs.size() > 8 && !n.inputs[8].empty()) {
    const Tensor* b = constant(g, n.inputs[8]);
    if (!b) return false;
    for (int64_t v : b->to_i64()) largest_bias = std::max(largest_bias, std::abs(v));
  }
  const int64_t m = w->dim(0), k = w->numel() / std::max<int64_t>(m, 1);
  const int64_t x_zero = std::abs(constant(g, n.inputs[2])->to_i64().at(0)) + 128;
  // |column sum of W| <= 128 k, so the zero-point correction is at most x_zero * 128 k.
  return k * 255 * 128 + largest_bias + x_zero * 128 * k <= std::numeric_limits<int32_t>::max();
}

// A per-tensor scale (> 0) and zero point of a DequantizeLinear or QuantizeLinear, when
// both are constants (an absent zero point is 0).
struct Params {
  bool known = false;
  float scale = 0;
  int64_t zero = 0;
};
Params params_of(const Graph& g, const Node& n) {
  if (n.inputs.size() < 2 || n.has_attr("axis") || n.has_attr("block_size") || n.has_attr("output_dtype")) return {};
  const Tensor* s = constant(g, n.inputs[1]);
  const Tensor* z = n.inputs.size() > 2 && !n.inputs[2].empty() ? constant(g, n.inputs[2]) : nullptr;
  if (!s || s->dtype() != DType::f32 || s->numel() != 1 || (n.inputs.size() > 2 && !n.inputs[2].empty() && !z)) return {};
  if (z && z->numel() != 1) return {};
  const float scale = s->data<float>()[0];
  if (!(scale > 0)) return {};
  return {true, scale, z ? z->to_i64().at(0) : 0};
}

// A channels-last conv whose input was transposed for it alone and whose output only goes
// back to NCHW pays two Transposes for nothing (a quantized conv between float ops): it
// becomes the NCHW QLinearConv again, and the Transposes go (remove_dead_nodes drops the one
// in front). Returns how many.
int revert_lone_convs(Graph& g) {
  std::map<std::string, size_t> producer, transposed_back;  // value -> the node making it / its Transpose
  std::map<std::string, int> reads;
  for (size_t i = 0; i < g.nodes.size(); ++i) {
    for (const auto& o : g.nodes[i].outputs) producer[o] = i;
    for (const auto& in : g.nodes[i].inputs) ++reads[in];
    if (g.nodes[i].op_type == kTranspose && !g.nodes[i].inputs.empty()) transposed_back[g.nodes[i].inputs[0]] = i;
  }
  for (const auto& o : g.outputs) ++reads[o.name];
  std::vector<bool> dropped(g.nodes.size(), false);
  int reverted = 0;
  for (size_t i = 0; i < g.nodes.size(); ++i) {
    Node& c = g.nodes[i];
    if (c.op_type != kQLinearConvNhwc || c.inputs.size() > kResidualInput) continue;
    auto in = producer.find(c.inputs[0]);
    if (in == producer.end() || g.nodes[in->second].op_type != kTranspose || reads[c.inputs[0]] != 1) continue;
    if (reads[c.outputs[0]] != 1) continue;
    auto found = transposed_back.find(c.outputs[0]);
    if (found == transposed_back.end()) continue;
    const size_t back = found->second;
    c.inputs[0] = g.nodes[in->second].inputs[0];
    c.outputs[0] = g.nodes[back].outputs[0];
    c.op_type = kQLinearConv;
    c.domain.clear();
    dropped[back] = true;
    ++reverted;
  }
  std::vector<Node> kept;
  for (size_t i = 0; i < g.nodes.size(); ++i)
    if (!dropped[i]) kept.push_back(std::move(g.nodes[i]));
  g.nodes = std::move(kept);
  return reverted;
}

}  // namespace

int to_channels_last_int8(Graph& g) {
  if (!kernels::isa_supports_avx512_vnni()) return 0;  // without VNNI the NCHW int16 path is the fast one
  std::map<std::string, std::string> twin;  // NCHW value -> its channels-last copy
  std::vector<Node> out;
  int converted = 0;
  // The channels-last copy of `value`: a converted node's output, or a new Transpose.
  auto channels_last = [&](const std::string& value) { return channels_last_copy(g, value, twin, out); };
  // `n` (already reading channels-last inputs) writes a channels-last copy of its output; a
  // Transpose back gives the NCHW value under its old name to every other reader.
  std::map<std::string, size_t> conv_at;  // a converted conv's NCHW output -> its index in `out`
  std::vector<bool> removed;                // entries of `out` a fusion took away
  auto emit = [&](Node n) {
    const std::string y = n.outputs[0], name = channels_last_name(y);
    const ValueInfo info = g.values.at(y);
    g.values[name] = ValueInfo{info.dtype, nhwc_shape(info.shape), nullptr, true};
    n.outputs[0] = name;
    if (n.op_type == kQLinearConvNhwc) conv_at[y] = out.size();
    out.push_back(std::move(n));
    out.push_back(transpose_node(name + "/Transpose", name, y, {0, 3, 1, 2}));
    twin[y] = name;
  };
  // Which nodes read each value (graph outputs count as a reader no pass can see).
  std::map<std::string, std::vector<const Node*>> readers;
  for (const auto& n : g.nodes)
    for (const auto& in : n.inputs) readers[in].push_back(&n);
  for (const auto& o : g.outputs) readers[o.name].push_back(nullptr);
  auto only_reader = [&](const std::string& value, std::string_view op) -> const Node* {
    auto it = readers.find(value);
    if (it == readers.end() || it->second.size() != 1 || !it->second[0]) return nullptr;
    const Node* r = it->second[0];
    return r->op_type == op && r->domain.empty() ? r : nullptr;
  };
  std::map<std::string, const Node*> dequantized;  // value -> the DequantizeLinear making it
  for (const auto& n : g.nodes)
    if (n.op_type == kDequantizeLinear && n.domain.empty() && n.outputs.size() == 1) dequantized[n.outputs[0]] = &n;
  std::map<const Node*, const Node*> pools;  // MaxPool -> the DequantizeLinear before it
  for (const auto& n : g.nodes) {
    if (n.op_type != kMaxPool || !n.domain.empty() || n.outputs.size() != 1 || n.inputs.size() != 1) continue;
    if (!n.has_attr("kernel_shape") || n.attr_ints("kernel_shape").size() != 2) continue;
    if (auto dq = dequantized.find(n.inputs[0]); dq != dequantized.end()) pools[&n] = dq->second;
  }
  std::set<const Node*> dropped;  // the QuantizeLinear after a MaxPool that went channels-last
  for (const auto& n : g.nodes) {
    if (dropped.count(&n)) continue;
    // DequantizeLinear -> MaxPool -> QuantizeLinear with one scale and zero point is MaxPool on
    // the bytes (dequantizing is increasing, and Q(DQ(v)) = v): channels-last when x is.
    if (auto pool = pools.find(&n); pool != pools.end() && twin.count(pool->second->inputs[0])) {
      const Node& dq = *pool->second;
      const Node* q = only_reader(n.outputs[0], kQuantizeLinear);
      const Params a = params_of(g, dq), b = q ? params_of(g, *q) : Params{};
      auto x = g.values.find(dq.inputs[0]);
      auto y = q ? g.values.find(q->outputs[0]) : g.values.end();
      if (a.known && b.known && a.scale == b.scale && a.zero == b.zero && x != g.values.end() && y != g.values.end() &&
          one_byte(x->second.dtype) && y->second.dtype == x->second.dtype) {
        Node m = n;
        m.op_type = kMaxPoolNhwc;
        m.domain = kGroveDomain;
        m.inputs = {twin.at(dq.inputs[0])};
        m.outputs = {q->outputs[0]};
        m.decisions.epilogue.fused = "DequantizeLinear+MaxPool+QuantizeLinear";
        dropped.insert(q);
        emit(std::move(m));
        continue;
      }
    }
    // Copies, not moves: `pools` and `readers` look at nodes not reached yet and at ones passed.
    if (takes_channels_last(g, n)) {
      Node c = n;
      c.inputs[0] = channels_last(n.inputs[0]);
      c.op_type = kQLinearConvNhwc;
      c.domain = kGroveDomain;
      emit(std::move(c));
      ++converted;
      continue;
    }
    // A residual add of two channels-last values stays channels-last (it is elementwise); where
    // one side is a converted conv that nothing else reads, the add goes into that conv's
    // epilogue (ops/conv/channels_last.h): the conv's bytes never reach memory.
    if (n.op_type == kQLinearAdd && n.domain == kGroveDomain && n.inputs.size() == 8 && twin.count(n.inputs[0]) &&
        twin.count(n.inputs[3])) {
      for (size_t side : {0, 3}) {
        auto conv = conv_at.find(n.inputs[side]);
        auto r = readers.find(n.inputs[side]);
        if (conv == conv_at.end() || r == readers.end() || r->second.size() != 1) continue;
        Node fused = out[conv->second];
        if (fused.inputs.size() > kResidualInput) continue;  // one residual add per conv
        fused.inputs.resize(kResidualInput);                 // B may be absent: "" keeps the residual at input 9
        const size_t other = 3 - side;
        for (size_t i : {other, other + 1, other + 2, side + 1, side + 2}) fused.inputs.push_back(i == other ? twin.at(n.inputs[i]) : n.inputs[i]);
        fused.inputs.push_back(n.inputs[6]);
        fused.inputs.push_back(n.inputs[7]);
        std::string& label = fused.decisions.epilogue.fused;
        const bool relu = n.decisions.epilogue.activation == FusedActivation::relu;
        label = (label.empty() ? "" : label + "+") + (relu ? "Add+Relu" : "Add");
        if (relu) fused.decisions.epilogue.residual_activation = FusedActivation::relu;
        fused.outputs[0] = n.outputs[0];
        removed.resize(out.size(), false);
        removed[conv->second] = removed[conv->second + 1] = true;  // the conv and its Transpose back
        conv_at.erase(conv);
        emit(std::move(fused));  // here, after the residual's producer
        break;
      }
      if (!twin.count(n.outputs[0])) {
        Node c = n;
        c.inputs[0] = twin.at(n.inputs[0]);
        c.inputs[3] = twin.at(n.inputs[3]);
        emit(std::move(c));
      }
      continue;
    }
    out.push_back(n);
  }
  removed.resize(out.size(), false);
  g.nodes.clear();
  for (size_t i = 0; i < out.size(); ++i)
    if (!removed[i]) g.nodes.push_back(std::move(out[i]));
  return converted - revert_lone_convs(g);
}

}  // namespace grove
