// Replaces the scaled dot-product attention subgraph that torch.onnx.export emits for
// BERT and GPT-2 by one grove.internal Attention node (ops/attention.cpp):
//
//   MatMul(Q, KT) -> Mul|Div by a scalar constant -> [Where(keep, ., scalar constant)]
//     -> [Add(., mask)] -> Softmax(last axis) -> MatMul(., V)
//
// Every value inside the chain must be read only by the next node (and not be a graph
// output), everything float32 (keep bool), Q, KT and V 4-D with the same [B, H], and the
// mask and keep must not widen the score shape. Anything else leaves the graph unchanged.
#include <set>

#include "passes/passes.h"
#include "ops/op.h"

namespace grove {
namespace {

struct GraphIndex {
  std::map<std::string, size_t> producer;
  std::map<std::string, int> readers;
  std::set<std::string> outputs;
  const Graph& g;

  explicit GraphIndex(const Graph& graph) : g(graph) {
    for (size_t i = 0; i < g.nodes.size(); ++i)
      for (const auto& o : g.nodes[i].outputs) producer[o] = i;
    for (const auto& n : g.nodes)
      for (const auto& in : n.inputs) ++readers[in];
    for (const auto& o : g.outputs) outputs.insert(o.name);
  }

  // The default-domain node of `op_type` producing `value`, when `value` is an internal
  // link of the chain (one reader, not a graph output); else nullptr.
  const Node* link(const std::string& value, const char* op_type, size_t* index = nullptr) const {
    auto it = producer.find(value);
    if (it == producer.end() || outputs.count(value) || readers.at(value) != 1) return nullptr;
    const Node& n = g.nodes[it->second];
    if (n.op_type != op_type || !n.domain.empty() || n.outputs.size() != 1) return nullptr;
    if (index) *index = it->second;
    return &n;
  }

  const ValueInfo* info(const std::string& value) const {
    auto it = g.values.find(value);
    return it == g.values.end() ? nullptr : &it->second;
  }

  // The value of a one-element float32 initializer, if `value` is one.
  bool scalar_constant(const std::string& value, float& out) const {
    auto it = g.initializers.find(value);
    if (it == g.initializers.end() || it->second.dtype() != DType::f32 || it->second.numel() != 1) return false;
    out = it->second.data<float>()[0];
    return true;
  }
};

bool is_4d(const ValueInfo* v, DType dtype) { return v && v->dtype == dtype && v->shape.size() == 4; }

// A [.., rank <= 4] operand that broadcasts into `scores` without widening it.
bool fits_scores(const ValueInfo* v, DType dtype, const Shape& scores) {
  if (!v || v->dtype != dtype || v->shape.size() > 4) return false;
  const size_t lead = 4 - v->shape.size();
  for (size_t d = 0; d < v->shape.size(); ++d)
    if (v->shape[d] != 1 && v->shape[d] != scores[lead + d]) return false;
  return true;
}

// Tries to fuse the chain ending in the MatMul at `pv_index`; returns the fused node and
// marks the nodes it replaces, or returns false with nothing changed.
bool match(const GraphIndex& ix, size_t pv_index, Node& fused, std::vector<size_t>& replaced) {
  const Node& pv = ix.g.nodes[pv_index];
  if (pv.op_type != "MatMul" || !pv.domain.empty() || pv.inputs.size() != 2) return false;
  size_t at = 0;
  const Node* softmax = ix.link(pv.inputs[0], "Softmax", &at);
  if (!softmax) return false;
  std::vector<size_t> chain{pv_index, at};
  const ValueInfo* sm_in = ix.info(softmax->inputs[0]);
  if (!is_4d(sm_in, DType::f32)) return false;
  const int64_t axis = softmax->attr_int("axis", softmax->opset > 0 && softmax->opset < 13 ? 1 : -1);
  if (axis != -1 && axis != 3) return false;
  const Shape scores = sm_in->shape;

  std::string value = softmax->inputs[0], mask, keep;
  float fill = 0;
  if (const Node* add = ix.link(value, "Add", &at)) {
    if (add->inputs.size() != 2) return false;
    // Either operand may be the scores: float addition commutes exactly.
    const std::string& first = add->inputs[0];
    const bool scores_first = ix.link(first, "Where") || ix.link(first, "Mul") || ix.link(first, "Div");
    value = add->inputs[scores_first ? 0 : 1];
    mask = add->inputs[scores_first ? 1 : 0];
    if (!fits_scores(ix.info(mask), DType::f32, scores)) return false;
    chain.push_back(at);
  }
  if (const Node* where = ix.link(value, "Where", &at)) {
    if (where->inputs.size() != 3 || !ix.scalar_constant(where->inputs[2], fill)) return false;
    keep = where->inputs[0];
    if (!fits_scores(ix.info(keep), DType::boolean, scores)) return false;
    value = where->inputs[1];
    chain.push_back(at);
  }
  const Node* scale_node = ix.link(value, "Mul", &at);
  if (!scale_node) scale_node = ix.link(value, "Div", &at);
  if (!scale_node || scale_node->inputs.size() != 2) return false;
  float scale = 0;
  size_t scores_at = 0;  // which operand of the Mul/Div is the product
  if (ix.scalar_constant(scale_node->inputs[1], scale)) scores_at = 0;
  else if (scale_node->op_type == "Mul" && ix.scalar_constant(scale_node->inputs[0], scale)) scores_at = 1;
  else return false;
  chain.push_back(at);
  const Node* qk = ix.link(scale_node->inputs[scores_at], "MatMul", &at);
  if (!qk || qk->inputs.size() != 2) return false;
  chain.push_back(at);
  // Every intermediate keeps the score shape (no broadcast widening along the chain).
  for (size_t i = 1; i < chain.size(); ++i) {
    const ValueInfo* v = ix.info(ix.g.nodes[chain[i]].outputs[0]);
    if (!v || v->shape != scores) return false;
  }
  const ValueInfo *q = ix.info(qk->inputs[0]), *kt = ix.info(qk->inputs[1]), *v = ix.info(pv.inputs[1]);
  if (!is_4d(q, DType::f32) || !is_4d(kt, DType::f32) || !is_4d(v, DType::f32)) return false;
  for (size_t d = 0; d < 2; ++d)
    if (q->shape[d] != scores[d] || kt->shape[d] != scores[d] || v->shape[d] != scores[d]) return false;
  if (v->shape[2] != scores[3]) return false;

  fused = Node{};
  fused.name = pv.name + "/grove_attention";
  fused.op_type = "Attention";
  fused.domain = kGroveDomain;
  fused.opset = softmax->opset;
  fused.inputs = {qk->inputs[0], qk->inputs[1], pv.inputs[1], mask, keep};
  while (!fused.inputs.empty() && fused.inputs.back().empty()) fused.inputs.pop_back();
  fused.outputs = pv.outputs;
  Attribute a;
  a.kind = Attribute::Kind::f;
  a.f = scale;
  fused.attrs["scale"] = a;
  a.f = fill;
  if (!keep.empty()) fused.attrs["fill"] = a;
  a = Attribute{};
  a.kind = Attribute::Kind::s;
  a.s = scale_node->op_type;
  fused.attrs["scale_op"] = a;
  replaced = chain;
  return true;
}

}  // namespace

int fuse_attention(Graph& g) {
  const GraphIndex ix(g);
  std::vector<bool> drop(g.nodes.size(), false);
  std::map<size_t, Node> fused_at;  // the fused node takes the place of the final MatMul
  for (size_t i = 0; i < g.nodes.size(); ++i) {
    Node fused;
    std::vector<size_t> chain;
    if (!match(ix, i, fused, chain)) continue;
    for (size_t c : chain) drop[c] = true;
    fused_at[i] = std::move(fused);
  }
  if (fused_at.empty()) return 0;
  std::vector<Node> kept;
  for (size_t i = 0; i < g.nodes.size(); ++i) {
    if (auto it = fused_at.find(i); it != fused_at.end()) kept.push_back(std::move(it->second));
    else if (!drop[i]) kept.push_back(std::move(g.nodes[i]));
  }
  g.nodes = std::move(kept);
  // The chain's intermediate values no longer exist.
  std::set<std::string> live;
  for (const auto& n : g.nodes)
    for (const auto& o : n.outputs) live.insert(o);
  for (auto it = g.values.begin(); it != g.values.end();) {
    const bool produced_before = ix.producer.count(it->first) != 0;
    it = produced_before && !live.count(it->first) ? g.values.erase(it) : std::next(it);
  }
  return static_cast<int>(fused_at.size());
}

}  // namespace grove
