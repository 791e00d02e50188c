#include "passes/flops.h"

#include <set>
#include <string>

#include "graph/node_decisions.h"
#include "ops/attention.h"
#include "ops/op.h"

namespace grove {
namespace {

const Shape* shape_of(const Graph& g, const std::string& name) {
  if (name.empty()) return nullptr;
  auto it = g.values.find(name);
  return it == g.values.end() ? nullptr : &it->second.shape;
}

// Shapes here are bound and bounded by Limits, but a FLOP count multiplies several of them:
// every product is checked (Error rather than signed overflow).
int64_t product(const Shape& s, size_t from) {
  int64_t n = 1;
  for (size_t i = from; i < s.size(); ++i) n = checked_mul(n, s[i]);
  return n;
}

int64_t mul(int64_t a, int64_t b) { return checked_mul(a, b); }
int64_t mul(int64_t a, int64_t b, int64_t c) { return checked_mul(checked_mul(a, b), c); }

int64_t add(int64_t a, int64_t b) {
  int64_t r = 0;
  if (__builtin_add_overflow(a, b, &r)) throw Error("FLOP count overflows int64");
  return r;
}

// Ops that only move or reinterpret data: no arithmetic.
bool moves_data_only(const std::string& op) {
  static const std::set<std::string> kOps = {
      "Reshape", "Flatten", "Squeeze", "Unsqueeze", "Identity", "Dropout", "Shape", "Size",
      "Transpose", "Concat", "Split", "Slice", "Gather", "GatherElements", "GatherND", "Expand",
      "Tile", "Pad", "Constant", "ConstantOfShape", "DepthToSpace", "SpaceToDepth"};
  return kOps.count(op) != 0;
}

bool reads_every_input_once(const std::string& op) {
  return op == "GlobalAveragePool" || op == "GlobalMaxPool" || op == "GlobalLpPool" || op == "ArgMax" ||
         op == "ArgMin" || op.rfind("Reduce", 0) == 0;
}

}  // namespace

// grove.internal Attention (fuse_attention): what the ops it replaced counted, the two
// MatMuls and one operation per score for the scale, the Where, the mask Add and the Softmax.
static int64_t attention_flops(const Graph& g, const Node& n) {
  const Shape* q = n.inputs.empty() ? nullptr : shape_of(g, n.inputs[0]);
  const Shape* k = n.inputs.size() < 2 ? nullptr : shape_of(g, n.inputs[1]);
  const Shape* v = n.inputs.size() < 3 ? nullptr : shape_of(g, n.inputs[2]);
  if (!q || !k || !v) return 0;
  AttentionLayout l;
  try {
    l = attention_layout(n, *q, *k, *v);
  } catch (const Error&) {
    return 0;
  }
  const int64_t scores = numel(l.scores());
  const int64_t per_score = 2 + (n.inputs.size() > 3 && !n.inputs[3].empty()) + (n.inputs.size() > 4 && !n.inputs[4].empty());
  return add(add(mul(2, scores, l.head_dim), mul(2, scores, l.value_dim)), mul(per_score, scores));
}

int64_t node_flops(const Graph& g, const Node& n) {
  if (n.domain == kGroveDomain && n.op_type == "Attention" && !n.outputs.empty()) return attention_flops(g, n);
  if (n.domain == kGroveDomain && n.op_type == "QLinearAdd" && !n.outputs.empty()) {  // fuse_qdq: one per element
    const Shape* y = shape_of(g, n.outputs[0]);
    return y ? numel(*y) : 0;
  }
  if (n.domain == kGroveDomain && n.op_type == "QLinearConvNhwc" && n.inputs.size() > 3 && !n.outputs.empty()) {
    const Shape* y = shape_of(g, n.outputs[0]);  // layout_int8: QLinearConv's products, channels-last
    const Shape* wq = shape_of(g, n.inputs[3]);
    if (!y || !wq || wq->empty()) return 0;
    const int64_t residual = n.inputs.size() > 9 ? numel(*y) : 0;  // a fused QLinearAdd: one per element
    return add(mul(2, numel(*y), product(*wq, 1)), residual);
  }
  if (n.domain == kGroveDomain && (n.op_type == "ConvNhwc" || n.op_type == "DepthwiseConvNhwc" || n.op_type == "ConvNchwc") &&
      n.inputs.size() > 1 && !n.outputs.empty()) {
    const Shape* y = shape_of(g, n.outputs[0]);  // layout_f32 and layout_nchwc: Conv's products
    const Shape* wc = shape_of(g, n.inputs[1]);
    if (!y || !wc || wc->empty()) return 0;
    return add(mul(2, numel(*y), product(*wc, 1)), n.decisions.epilogue.fused_flops);
  }
  if (n.domain == kGroveDomain && n.op_type == "ExpandDepthwiseNhwc" && n.inputs.size() > 3 && !n.outputs.empty()) {
    const Shape* y = shape_of(g, n.outputs[0]);  // the depthwise taps; the expand conv's FLOPs are fused ones
    const Shape* wd = shape_of(g, n.inputs[3]);
    if (!y || !wd || wd->empty()) return 0;
    return add(mul(2, numel(*y), product(*wd, 1)), n.decisions.epilogue.fused_flops);
  }
  // The expand, depthwise and project convs' FLOPs, all fused ones.
  if (n.domain == kGroveDomain && n.op_type == "InvertedResidualNhwc") return n.decisions.epilogue.fused_flops;
  if (n.domain == kGroveDomain && n.op_type == "MaxPoolNhwc" && !n.outputs.empty()) {  // one compare per tap
    const Shape* y = shape_of(g, n.outputs[0]);
    int64_t window = 1;
    for (int64_t k : n.attr_ints("kernel_shape")) window = mul(window, k);
    return y ? mul(numel(*y), window) : 0;
  }
  if (n.domain == kGroveDomain && n.op_type == "ConvMaxPoolNhwc" && !n.outputs.empty()) {  // the pool's compares
    const Shape* y = shape_of(g, n.outputs[0]);  // and the conv's FLOPs, a fused node's
    int64_t window = 1;
    for (int64_t k : n.attr_ints("pool.kernel_shape")) window = mul(window, k);
    return add(y ? mul(numel(*y), window) : 0, n.decisions.epilogue.fused_flops);
  }
  if (n.domain == kGroveDomain && n.op_type == "PrunedConv" && n.inputs.size() > 1 && !n.outputs.empty()) {
    const Shape* y = shape_of(g, n.outputs[0]);  // the products over the kept channels only
    const Shape* wp = shape_of(g, n.inputs[1]);
    if (!y || !wp || wp->size() != 4) return 0;
    return add(mul(2, numel(*y), mul(n.attr_int("channels", 0), (*wp)[2] * (*wp)[3])), n.decisions.epilogue.fused_flops);
  }
  if (n.domain == kGroveDomain && n.op_type == "AttentionKeep" && !n.inputs.empty()) {  // both means
    const Shape* x = shape_of(g, n.inputs[0]);
    return x ? mul(2, numel(*x)) : 0;
  }
  if (!n.domain.empty() || n.outputs.empty()) return 0;
  const Shape* out = shape_of(g, n.outputs[0]);
  const Shape* x = n.inputs.empty() ? nullptr : shape_of(g, n.inputs[0]);
  const Shape* w = n.inputs.size() < 2 ? nullptr : shape_of(g, n.inputs[1]);
  if (!out) return 0;
  const std::string& op = n.op_type;

  // A fused epilogue counts what its fused nodes counted, so fusion never changes a model's FLOPs.
  const int64_t epilogue = n.decisions.epilogue.fused_flops;
  if (op == "Conv" && w && !w->empty()) return add(mul(2, numel(*out), product(*w, 1)), epilogue);
  // The integer products count as FLOPs too (one multiply and one add each), so GFLOP/s of a
  // quantized model compares with its float original.
  const size_t weight_input = op == "QLinearConv" ? 3 : 1;
  if ((op == "ConvInteger" || op == "QLinearConv" || op == "ConvIntegerScaled") && n.inputs.size() > weight_input) {
    const Shape* wq = shape_of(g, n.inputs[weight_input]);
    if (wq && !wq->empty()) return add(mul(2, numel(*out), product(*wq, 1)), epilogue);
  }
  if ((op == "MatMulInteger" || op == "QLinearMatMul") && x && !x->empty()) return mul(2, numel(*out), x->back());
  if (op == "ConvTranspose" && w && x && !w->empty()) return mul(2, numel(*x), product(*w, 1));
  if (op == "MatMul" && x && !x->empty()) return add(mul(2, numel(*out), x->back()), epilogue);
  if (op == "Gemm" && x && x->size() == 2) {
    int64_t k = n.attr_int("transA", 0) ? (*x)[0] : (*x)[1];
    return add(mul(2, numel(*out), k), epilogue);
  }
  if (op == "MaxPool" || op == "AveragePool" || op == "LpPool") {
    int64_t window = 1;
    for (int64_t k : n.attr_ints("kernel_shape")) window = mul(window, k);
    return mul(numel(*out), window);
  }
  if (reads_every_input_once(op)) return x ? numel(*x) : 0;
  if (moves_data_only(op)) return 0;
  return add(numel(*out), epilogue);  // a DequantizeLinear may carry a bias and activation
}

int64_t graph_flops(const Graph& g) {
  int64_t total = 0;
  for (const auto& n : g.nodes) total = add(total, node_flops(g, n));
  return total;
}

}  // namespace grove
