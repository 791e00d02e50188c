// QDQ models (QuantizeLinear/DequantizeLinear around float ops, as `grove quantize` and ONNX
// Runtime's quantizer write them) say "this Conv or MatMul runs on 8-bit values". Run as
// written, each such op dequantizes its input and weights, computes in float and quantizes
// again. This pass replaces
//     DequantizeLinear(x) -> Conv(DequantizeLinear(W), DequantizeLinear(B)) [-> Relu] -> QuantizeLinear
// by QLinearConv (integer sums, requantized once; a Relu becomes the clamp at y's zero point),
// and DequantizeLinear(a) -> MatMul(DequantizeLinear(B)) -> QuantizeLinear by QLinearMatMul.
// A residual add, DequantizeLinear(a), DequantizeLinear(b) -> Add [-> Relu] -> QuantizeLinear
// on one shape, becomes grove.internal QLinearAdd (ops/quant/quant_add.cpp), which computes the
// chain's float32 steps on bytes, bit for bit.
// It applies only where the integer form computes the same function: per-tensor activation
// scales, constant integer weights with zero points that are constants, and a bias that is
// int32 at exactly x_scale * w_scale per channel. The result differs from the float chain only
// by the float rounding of the sums (the fused form is exact in int32).
#include <algorithm>
#include <cstring>
#include <optional>
#include <set>

#include "graph/node_decisions.h"
#include "ops/evaluate.h"
#include "ops/op.h"
#include "ops/op_names.h"
#include "passes/flops.h"
#include "passes/graph_lookup.h"
#include "passes/passes.h"

namespace grove {
namespace {

struct Index {
  std::map<std::string, size_t> producer;
  std::map<std::string, int> readers;
  std::set<std::string> graph_outputs;

  explicit Index(const Graph& g) {
    for (size_t i = 0; i < g.nodes.size(); ++i)
      for (const auto& o : g.nodes[i].outputs) producer[o] = i;
    for (const auto& n : g.nodes) {
      for (const auto& in : n.inputs) ++readers[in];
      for (const auto& c : n.captures) ++readers[c];
    }
    for (const auto& o : g.outputs) graph_outputs.insert(o.name);
  }
  // The node producing `value`, if it has op type `op` in the default domain.
  const Node* produced_by(const Graph& g, const std::string& value, std::string_view op) const {
    auto it = producer.find(value);
    if (it == producer.end()) return nullptr;
    const Node& n = g.nodes[it->second];
    return n.op_type == op && n.domain.empty() ? &n : nullptr;
  }
  // The one node reading `value` (which is not a graph output), if it has op type `op`.
  Node* only_reader(Graph& g, const std::string& value, std::string_view op) const {
    auto r = readers.find(value);
    if (r == readers.end() || r->second != 1 || graph_outputs.count(value)) return nullptr;
    for (auto& n : g.nodes)
      for (const auto& in : n.inputs)
        if (in == value) return n.op_type == op && n.domain.empty() ? &n : nullptr;
    return nullptr;
  }
};

bool is_8bit(DType t) { return t == DType::u8 || t == DType::i8; }

// A DequantizeLinear whose scale and zero point are constants, and one per tensor when
// `per_tensor`; its x is 8-bit (or int32 for a bias).
bool plain_dequantize(const Graph& g, const Node& dq, bool per_tensor, bool x_constant) {
  if (dq.inputs.size() < 2 || dq.has_attr("block_size")) return false;
  const Tensor* scale = constant(g, dq.inputs[1]);
  if (!scale || scale->dtype() != DType::f32 || (per_tensor && scale->numel() != 1)) return false;
  if (dq.inputs.size() > 2 && !dq.inputs[2].empty() && !constant(g, dq.inputs[2])) return false;
  return !x_constant || constant(g, dq.inputs[0]);
}

// The zero point input of a DequantizeLinear/QuantizeLinear, made a constant 0 of `dtype` if absent.
std::string zero_point_of(Graph& g, const Node& q, DType dtype) {
  if (q.inputs.size() > 2 && !q.inputs[2].empty()) return q.inputs[2];
  const std::string name = q.outputs[0] + "/zero_point";
  Tensor zero(dtype, {});
  std::memset(zero.raw(), 0, zero.bytes());
  g.values[name] = ValueInfo{dtype, {}, nullptr, true};
  g.initializers[name] = std::move(zero);
  return name;
}

// The int32 bias of a fused Conv: B's own DequantizeLinear input when its scale is exactly
// x_scale * w_scale (per channel) with zero point 0, else "" (no fusion).
std::string integer_bias(const Graph& g, const Index& index, const std::string& bias, float x_scale,
                         const Tensor& w_scale) {
  const Node* dq = index.produced_by(g, bias, kDequantizeLinear);
  if (!dq || !plain_dequantize(g, *dq, false, true)) return {};
  const Tensor* b = constant(g, dq->inputs[0]);
  const Tensor* s = constant(g, dq->inputs[1]);
  if (b->dtype() != DType::i32 || b->rank() != 1) return {};
  if (dq->inputs.size() > 2 && !dq->inputs[2].empty())
    for (int64_t v : constant(g, dq->inputs[2])->to_i64())
      if (v != 0) return {};
  const std::vector<double> bs = s->to_f64(), ws = w_scale.to_f64();
  for (int64_t c = 0; c < b->numel(); ++c) {
    const float w = static_cast<float>(ws[ws.size() == 1 ? 0 : static_cast<size_t>(c)]);
    const float want = x_scale * w;
    if (static_cast<float>(bs[bs.size() == 1 ? 0 : static_cast<size_t>(c)]) != want) return {};
  }
  return dq->inputs[0];
}

// Every DequantizeLinear of constants left (weights of ops that were not fused, and the
// unused ones of fused ops, which remove_dead_nodes would drop anyway) becomes a constant.
void fold_constant_dequantize(Graph& g) {
  std::vector<Node> kept;
  for (auto& n : g.nodes) {
    bool constant_inputs = n.op_type == kDequantizeLinear && n.domain.empty();
    std::vector<const Tensor*> in;
    for (const auto& name : n.inputs) {
      const Tensor* t = name.empty() ? nullptr : constant(g, name);
      constant_inputs = constant_inputs && (name.empty() || t);
      in.push_back(t);
    }
    if (!constant_inputs) {
      kept.push_back(std::move(n));
      continue;
    }
    std::vector<Tensor> out = evaluate_node(n, in);
    g.values[n.outputs[0]] = ValueInfo{out[0].dtype(), out[0].shape(), nullptr, true};
    g.initializers[n.outputs[0]] = std::move(out[0]);
  }
  g.nodes = std::move(kept);
}

}  // namespace

// Removes the nodes at these addresses (the Relu and QuantizeLinear a fused node replaced).
void erase_nodes(Graph& g, const std::set<const Node*>& dropped) {
  std::vector<Node> kept;
  for (auto& n : g.nodes)
    if (!dropped.count(&n)) kept.push_back(std::move(n));
  g.nodes = std::move(kept);
}

// The Add and its chain of fuse_qdq's comment: per-tensor scales, 8-bit values of one dtype
// and one shape, no broadcasting.
void fuse_quantized_adds(Graph& g) {
  Index index(g);
  std::set<const Node*> dropped;
  for (auto& add : g.nodes) {
    if (add.op_type != kAdd || !add.domain.empty() || add.inputs.size() != 2 || add.outputs.size() != 1) continue;
    const Node* da = index.produced_by(g, add.inputs[0], kDequantizeLinear);
    const Node* db = index.produced_by(g, add.inputs[1], kDequantizeLinear);
    if (!da || !db || !plain_dequantize(g, *da, true, false) || !plain_dequantize(g, *db, true, false)) continue;
    auto a = g.values.find(da->inputs[0]), b = g.values.find(db->inputs[0]), sum = g.values.find(add.outputs[0]);
    if (a == g.values.end() || b == g.values.end() || sum == g.values.end()) continue;
    const DType dtype = a->second.dtype;
    if (!is_8bit(dtype) || b->second.dtype != dtype || a->second.shape != sum->second.shape ||
        b->second.shape != sum->second.shape)
      continue;
    Node* relu = index.only_reader(g, add.outputs[0], kRelu);
    const std::string& last = relu ? relu->outputs[0] : add.outputs[0];
    Node* q = index.only_reader(g, last, kQuantizeLinear);
    if (!q || q->inputs.size() < 2 || q->has_attr("block_size") || q->has_attr("output_dtype")) continue;
    const Tensor* y_scale = constant(g, q->inputs[1]);
    if (!y_scale || y_scale->dtype() != DType::f32 || y_scale->numel() != 1) continue;
    if (q->inputs.size() > 2 && !q->inputs[2].empty() && !constant(g, q->inputs[2])) continue;
    auto y = g.values.find(q->outputs[0]);
    if (y == g.values.end() || y->second.dtype != dtype) continue;

    Node n;
    n.name = add.name;
    n.op_type = kQLinearAdd;
    n.domain = kGroveDomain;
    n.inputs = {da->inputs[0], da->inputs[1], zero_point_of(g, *da, dtype),
                db->inputs[0], db->inputs[1], zero_point_of(g, *db, dtype),
                q->inputs[1], zero_point_of(g, *q, dtype)};
    n.outputs = {q->outputs[0]};
    n.decisions.epilogue.fused = relu ? "DequantizeLinear+Add+Relu+QuantizeLinear" : "DequantizeLinear+Add+QuantizeLinear";
    if (relu) {
      n.decisions.epilogue.activation = FusedActivation::relu;
      dropped.insert(relu);
    }
    dropped.insert(q);
    add = std::move(n);
  }
  erase_nodes(g, dropped);
}

namespace {

// A float32 operand that a Mul or Add applies per output channel of an NCHW conv output:
// one value (when `one_ok`), or [C, 1, 1] or [1, C, 1, 1].
bool per_channel_operand(const Graph& g, const std::string& name, int64_t channels, bool one_ok) {
  auto v = g.values.find(name);
  if (v == g.values.end() || v->second.dtype != DType::f32 || v->second.shape.size() > 4) return false;
  const Shape& s = v->second.shape;
  if (one_ok && numel(s) == 1) return true;
  return (s == Shape{channels, 1, 1}) || (s == Shape{1, channels, 1, 1});
}

// ONNX Runtime's dynamic quantization follows each ConvInteger with
//     Cast(to float) -> Mul(x_scale * w_scale) [-> Add(bias)] [-> Relu]
// which grove.internal ConvIntegerScaled (ops/conv/conv_integer_scaled.cpp) computes in the conv's
// tiles, bit for bit, instead of three more passes over the conv's output. The fused node
// takes the chain's last node's place: the scale is often computed after the conv.
void fuse_conv_integer_epilogues(Graph& g) {
  const Index index(g);
  std::set<const Node*> dropped;
  std::map<const Node*, Node> replace;
  for (Node& conv : g.nodes) {
    if (!conv.domain.empty() || conv.op_type != kConvInteger || conv.outputs.size() != 1 || conv.inputs.size() < 2)
      continue;
    auto y = g.values.find(conv.outputs[0]);
    if (y == g.values.end() || y->second.shape.size() != 4) continue;
    const int64_t channels = y->second.shape[1];
    Node* cast = index.only_reader(g, conv.outputs[0], kCast);
    if (!cast || cast->attr_int("to", 0) != 1) continue;
    Node* mul = index.only_reader(g, cast->outputs[0], kMul);
    if (!mul || mul->inputs.size() != 2) continue;
    const std::string scale = mul->inputs[0] == cast->outputs[0] ? mul->inputs[1] : mul->inputs[0];
    if (scale == cast->outputs[0] || !per_channel_operand(g, scale, channels, true)) continue;
    std::vector<Node*> chain = {cast, mul};
    std::string bias;
    if (Node* add = index.only_reader(g, mul->outputs[0], kAdd); add && add->inputs.size() == 2) {
      const std::string other = add->inputs[0] == mul->outputs[0] ? add->inputs[1] : add->inputs[0];
      if (constant(g, other) && per_channel_operand(g, other, channels, false)) bias = other, chain.push_back(add);
    }
    if (Node* relu = index.only_reader(g, chain.back()->outputs[0], kRelu)) chain.push_back(relu);

    Node n;
    n.name = conv.name;
    n.op_type = kConvIntegerScaled;
    n.domain = kGroveDomain;
    n.opset = conv.opset;
    n.attrs = conv.attrs;
    n.decisions = conv.decisions;
    n.inputs = conv.inputs;
    n.inputs.resize(4);
    n.inputs.push_back(scale);
    n.inputs.push_back(bias);
    n.outputs = {chain.back()->outputs[0]};
    std::string label;
    int64_t flops = 0;
    for (const Node* c : chain) {
      label += (label.empty() ? "" : "+") + c->op_type;
      flops += node_flops(g, *c);
    }
    n.decisions.epilogue.fused = label;
    n.decisions.epilogue.fused_flops = flops;
    if (chain.back()->op_type == kRelu) n.decisions.epilogue.activation = FusedActivation::relu;
    dropped.insert(&conv);
    for (size_t i = 0; i + 1 < chain.size(); ++i) dropped.insert(chain[i]);
    replace[chain.back()] = std::move(n);
  }
  for (Node& node : g.nodes)
    if (auto it = replace.find(&node); it != replace.end()) node = std::move(it->second);
  erase_nodes(g, dropped);
}

// A classifier's last Gemm in a QDQ model reads 8-bit x and weights and writes float logits
// (no QuantizeLinear after it). Run as written it multiplies the folded float weights, four
// times the bytes; one vector of logits is bound by reading them. Rewritten as
//     MatMulInteger(x, W as k x n) -> Cast(float) -> Mul(x_scale * w_scale) [-> Add(bias)]
// it reads the int8 weights once on the integer GEMM (exact sums), and the float steps only
// touch the n outputs. The result differs from the float chain by the rounding of the sums,
// as every fused form here. Only alpha = beta = 1, transA = 0, x per tensor, W per tensor or
// per output channel, a constant bias of n values.
void gemm_on_integers(Graph& g) {
  Index index(g);
  std::vector<Node> out;
  std::map<const Node*, size_t> replaced;  // each Gemm: how many nodes replace it
  for (const Node& op : g.nodes) {
    if (op.op_type != kGemm || !op.domain.empty() || op.inputs.size() < 2 || op.outputs.size() != 1) continue;
    if (op.attr_float("alpha", 1.0f) != 1.0f || op.attr_float("beta", 1.0f) != 1.0f || op.attr_int("transA", 0) != 0)
      continue;
    const bool trans_b = op.attr_int("transB", 0) != 0;
    const Node* dx = index.produced_by(g, op.inputs[0], kDequantizeLinear);
    const Node* dw = index.produced_by(g, op.inputs[1], kDequantizeLinear);
    if (!dx || !dw || !plain_dequantize(g, *dx, true, false) || !plain_dequantize(g, *dw, false, true)) continue;
    auto x_info = g.values.find(dx->inputs[0]);
    auto y_info = g.values.find(op.outputs[0]);
    const Tensor& w = *constant(g, dw->inputs[0]);
    if (x_info == g.values.end() || y_info == g.values.end() || !is_8bit(x_info->second.dtype) ||
        x_info->second.shape.size() != 2 || w.dtype() != DType::i8 || w.rank() != 2 || y_info->second.dtype != DType::f32)
      continue;
    const int64_t k = w.dim(trans_b ? 1 : 0), n = w.dim(trans_b ? 0 : 1);
    const Tensor& w_scale = *constant(g, dw->inputs[1]);
    const Tensor* w_zero = dw->inputs.size() > 2 && !dw->inputs[2].empty() ? constant(g, dw->inputs[2]) : nullptr;
    const int64_t axis = dw->attr_int("axis", 1);
    const bool per_channel = w_scale.numel() != 1;
    if (per_channel && (w_scale.numel() != n || axis != (trans_b ? 0 : 1))) continue;
    if (w_zero && w_zero->numel() != w_scale.numel()) continue;
    std::vector<float> bias;
    if (op.inputs.size() > 2 && !op.inputs[2].empty()) {
      std::optional<Tensor> folded;
      const Tensor* c = constant(g, op.inputs[2]);
      if (const Node* dc = index.produced_by(g, op.inputs[2], kDequantizeLinear); !c && dc) {
        std::vector<const Tensor*> in;
        for (const auto& name : dc->inputs) in.push_back(name.empty() ? nullptr : constant(g, name));
        if (std::any_of(dc->inputs.begin(), dc->inputs.end(), [&](const std::string& name) { return !name.empty() && !constant(g, name); }))
          continue;
        folded = evaluate_node(*dc, in).at(0);
        c = &*folded;
      }
      if (!c || c->dtype() != DType::f32 || c->numel() != n || (c->rank() != 1 && c->rank() != 2)) continue;
      for (double v : c->to_f64()) bias.push_back(static_cast<float>(v));
    }

    // W as k x n int8 (MatMulInteger's B), its zero points per column, the scales per column.
    const std::string base = op.outputs[0] + "/integer";
    Tensor b(DType::i8, {k, n});
    const int8_t* wv = w.data<int8_t>();
    int8_t* bv = b.data<int8_t>();
    for (int64_t r = 0; r < k; ++r)
      for (int64_t j = 0; j < n; ++j) bv[r * n + j] = trans_b ? wv[j * k + r] : wv[r * n + j];
    Tensor b_zero(DType::i8, {n});
    const std::vector<int64_t> zeros = w_zero ? w_zero->to_i64() : std::vector<int64_t>{0};
    const std::vector<double> ws = w_scale.to_f64();
    const float x_scale = static_cast<float>(constant(g, dx->inputs[1])->to_f64().at(0));
    Tensor scale(DType::f32, {n});
    for (int64_t j = 0; j < n; ++j) {
      const auto jj = static_cast<size_t>(per_channel ? j : 0);
      b_zero.data<int8_t>()[j] = static_cast<int8_t>(zeros[zeros.size() == 1 ? 0 : jj]);
      scale.data<float>()[j] = x_scale * static_cast<float>(ws[jj]);
    }
    auto add_constant = [&](const std::string& name, Tensor t) {
      g.values[name] = ValueInfo{t.dtype(), t.shape(), nullptr, true};
      g.initializers[name] = std::move(t);
    };
    add_constant(base + "/b", std::move(b));
    add_constant(base + "/b_zero_point", std::move(b_zero));
    add_constant(base + "/scale", std::move(scale));
    const Shape& y_shape = y_info->second.shape;
    g.values[base + "/sums"] = ValueInfo{DType::i32, y_shape, nullptr, true};
    g.values[base + "/floats"] = ValueInfo{DType::f32, y_shape, nullptr, true};
    const std::string scaled = bias.empty() ? op.outputs[0] : base + "/scaled";
    if (!bias.empty()) {
      g.values[scaled] = ValueInfo{DType::f32, y_shape, nullptr, true};
      add_constant(base + "/bias", Tensor::from<float>({n}, bias));
    }
    auto node = [&](std::string_view type, std::vector<std::string> inputs, std::string output) {
      Node m;
      m.name = op.name + "/" + std::string(type);
      m.op_type = type;
      m.opset = op.opset;
      m.inputs = std::move(inputs);
      m.outputs = {std::move(output)};
      return m;
    };
    out.push_back(node(kMatMulInteger, {dx->inputs[0], base + "/b", zero_point_of(g, *dx, x_info->second.dtype), base + "/b_zero_point"},
                       base + "/sums"));
    Node cast = node(kCast, {base + "/sums"}, base + "/floats");
    cast.attrs["to"].kind = Attribute::Kind::i;
    cast.attrs["to"].i = 1;
    out.push_back(std::move(cast));
    out.push_back(node(kMul, {base + "/floats", base + "/scale"}, scaled));
    if (!bias.empty()) out.push_back(node(kAdd, {scaled, base + "/bias"}, op.outputs[0]));
    replaced[&op] = bias.empty() ? 3 : 4;
  }
  if (replaced.empty()) return;
  // The new nodes stand at the Gemm's place, so the order stays topological.
  std::vector<Node> kept;
  size_t next = 0;
  for (auto& node : g.nodes) {
    if (!replaced.count(&node)) {
      kept.push_back(std::move(node));
      continue;
    }
    for (size_t i = 0, count = replaced.at(&node); i < count; ++i) kept.push_back(std::move(out[next++]));
  }
  g.nodes = std::move(kept);
}

}  // namespace

void fuse_qdq(Graph& g) {
  std::vector<Node> fused;
  std::set<const Node*> dropped;
  Index index(g);
  for (size_t i = 0; i < g.nodes.size(); ++i) {
    Node& op = g.nodes[i];
    const bool conv = op.op_type == kConv, matmul = op.op_type == kMatMul;
    if (!op.domain.empty() || !(conv || matmul) || op.inputs.size() < 2 || op.outputs.size() != 1) continue;
    const Node* dx = index.produced_by(g, op.inputs[0], kDequantizeLinear);
    const Node* dw = index.produced_by(g, op.inputs[1], kDequantizeLinear);
    if (!dx || !dw || !plain_dequantize(g, *dx, true, false) || !plain_dequantize(g, *dw, false, true)) continue;
    const Tensor& w = *constant(g, dw->inputs[0]);
    const Tensor& w_scale = *constant(g, dw->inputs[1]);
    auto x_info = g.values.find(dx->inputs[0]);
    if (x_info == g.values.end() || !is_8bit(x_info->second.dtype) || !is_8bit(w.dtype())) continue;
    // Per-channel weights must be along the output channels: axis 0 of a Conv's W, 1 of a MatMul's B.
    if (w_scale.numel() != 1) {
      const int64_t axis = dw->attr_int("axis", 1);
      if (w.rank() != (conv ? 4 : 2) || axis != (conv ? 0 : 1) || w_scale.numel() != w.dim(conv ? 0 : 1)) continue;
    }
    Node* relu = conv ? index.only_reader(g, op.outputs[0], kRelu) : nullptr;
    const std::string& last = relu ? relu->outputs[0] : op.outputs[0];
    Node* q = index.only_reader(g, last, kQuantizeLinear);
    if (!q || q->inputs.size() < 2 || q->has_attr("block_size")) continue;
    const Tensor* y_scale = constant(g, q->inputs[1]);
    if (!y_scale || y_scale->dtype() != DType::f32 || y_scale->numel() != 1) continue;
    if (q->inputs.size() > 2 && !q->inputs[2].empty() && !constant(g, q->inputs[2])) continue;
    auto y_info = g.values.find(q->outputs[0]);
    if (y_info == g.values.end() || !is_8bit(y_info->second.dtype)) continue;
    const float x_scale = static_cast<float>(constant(g, dx->inputs[1])->to_f64().at(0));
    std::string bias;
    if (conv && op.inputs.size() > 2 && !op.inputs[2].empty()) {
      bias = integer_bias(g, index, op.inputs[2], x_scale, w_scale);
      if (bias.empty()) continue;
    }

    Node n;
    n.name = op.name;
    n.op_type = conv ? kQLinearConv : kQLinearMatMul;
    n.opset = op.opset;
    if (conv) n.attrs = op.attrs, n.decisions = op.decisions;
    n.inputs = {dx->inputs[0], dx->inputs[1], zero_point_of(g, *dx, x_info->second.dtype),
                dw->inputs[0], dw->inputs[1], zero_point_of(g, *dw, w.dtype()),
                q->inputs[1], zero_point_of(g, *q, y_info->second.dtype)};
    if (!bias.empty()) n.inputs.push_back(bias);
    n.outputs = {q->outputs[0]};
    if (relu) {
      n.decisions.epilogue.activation = FusedActivation::relu;
      n.decisions.epilogue.fused = kRelu;
      dropped.insert(relu);
    }
    dropped.insert(q);
    op = std::move(n);
  }
  erase_nodes(g, dropped);
  gemm_on_integers(g);
  fuse_quantized_adds(g);
  fuse_conv_integer_epilogues(g);
  remove_dead_nodes(g);
  fold_constant_dequantize(g);
  // The fused node stands at the float op's place, before the readers of its output (the
  // QuantizeLinear's readers), so the order stays topological.
}

}  // namespace grove
