// Replaces the scaled dot-product attention subgraph that torch.onnx.export emits for
// BERT and GPT-2 by one grove.internal Attention node (ops/attention/attention.cpp):
//
//   MatMul(Q, KT) -> Mul|Div by a scalar constant -> [Where(keep, ., scalar constant)]
//     -> [Add(., mask)] -> Softmax(last axis) -> MatMul(., V)
//
// Every value inside the chain must be read only by the next node (and not be a graph
// output), everything float32 (keep bool), Q, KT and V 4-D with the same [B, H], and the
// mask and keep must not widen the score shape. Anything else leaves the graph unchanged.
//
// When Q, K^T and V are each Transpose(Reshape(rows)) of a [B, S, H * D] value (or of one
// output of a Split along its last axis, every output of which feeds this chain), and the
// result's only reader is Transpose(perm 0 2 1 3), the node takes the sequence-major form of
// ops/attention/attention.h instead: it reads the rows (the Split's input) at column offsets and writes
// [B, S, H, Dv], and those Split, Reshape and Transpose nodes go too. They were copies of
// every Q, K, V and output element (GPT-2's Split and four Transposes per layer).
// Otherwise, when KT is Transpose(perm 0 1 3 2) of K (a decoder's KT of its cache), the node
// reads K and that Transpose goes (take_keys_as_rows); when K and V are grouped-query
// attention's repeats of fewer heads, it reads those (take_kv_groups); and when K and V are
// then each a Concat of two parts along the keys (the cache and the new tokens) read only
// here, it reads the parts and the Concats go (take_cache_parts).
#include <algorithm>
#include <optional>
#include <set>

#include "passes/passes.h"
#include "ops/op.h"
#include "ops/op_names.h"

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
  const Node* link(const std::string& value, std::string_view op_type, size_t* index = nullptr) const {
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

// The index of the one node reading `value`, if exactly one does and it is not a graph output.
std::optional<size_t> only_reader(const GraphIndex& ix, const std::string& value) {
  if (ix.outputs.count(value) || ix.readers.count(value) == 0 || ix.readers.at(value) != 1) return std::nullopt;
  for (size_t i = 0; i < ix.g.nodes.size(); ++i)
    for (const auto& in : ix.g.nodes[i].inputs)
      if (in == value) return i;
  return std::nullopt;
}

void set_int(Node& n, const char* key, int64_t value) {
  Attribute a;
  a.kind = Attribute::Kind::i;
  a.i = value;
  n.attrs[key] = a;
}

bool is_4d(const ValueInfo* v, DType dtype) { return v && v->dtype == dtype && v->shape.size() == 4; }

// A [.., rank <= 4] operand that broadcasts into `scores` without widening it.
bool fits_scores(const ValueInfo* v, DType dtype, const Shape& scores) {
  if (!v || v->dtype != dtype || v->shape.size() > 4) return false;
  const size_t lead = 4 - v->shape.size();
  for (size_t d = 0; d < v->shape.size(); ++d)
    if (v->shape[d] != 1 && v->shape[d] != scores[lead + d]) return false;
  return true;
}

void to_sequence_major(const GraphIndex& ix, Node& fused, std::vector<size_t>& replaced);

// The two inputs of `value` when it is Concat(first, second) along axis 2 of a 4-D value and
// read only by the chain; else nullopt.
std::optional<std::pair<std::string, std::string>> concat_parts(const GraphIndex& ix, const std::string& value,
                                                                size_t& at) {
  const Node* concat = ix.link(value, kConcat, &at);
  if (!concat || concat->inputs.size() != 2 || concat->inputs[0].empty() || concat->inputs[1].empty()) return std::nullopt;
  const int64_t axis = concat->attr_int("axis", 0);
  if ((axis != 2 && axis != -2) || !is_4d(ix.info(value), DType::f32)) return std::nullopt;
  return std::make_pair(concat->inputs[0], concat->inputs[1]);
}

// When the key_rows node's K and V are each Concat(cache, new) along the keys, read by nothing
// else, the node reads the four parts (inputs 1, 2, 5, 6) and both Concats go: a decoder whose
// presents are not graph outputs (the Generator's step, src/generate/decoder_step.h) then never
// copies its cache.
void take_cache_parts(const GraphIndex& ix, Node& fused, std::vector<size_t>& replaced) {
  size_t k_at = 0, v_at = 0;
  const auto k = concat_parts(ix, fused.inputs[1], k_at);
  const auto v = concat_parts(ix, fused.inputs[2], v_at);
  if (!k || !v) return;
  const ValueInfo *kp = ix.info(k->first), *vp = ix.info(v->first), *kn = ix.info(k->second), *vn = ix.info(v->second);
  if (!is_4d(kp, DType::f32) || !is_4d(vp, DType::f32) || !is_4d(kn, DType::f32) || !is_4d(vn, DType::f32) ||
      kp->shape[2] != vp->shape[2] || kn->shape[2] != vn->shape[2])
    return;
  fused.inputs[1] = k->first;
  fused.inputs[2] = v->first;
  fused.inputs.resize(5);
  fused.inputs.push_back(k->second);
  fused.inputs.push_back(v->second);
  replaced.push_back(k_at);
  replaced.push_back(v_at);
}

// Grouped-query attention's repeat of the key/value heads, as the exporters write it:
// Reshape([B, G * n, T, D]) of Expand([B, G, n, T, D]) of Unsqueeze (a 1 inserted at axis 2) of
// x [B, G, T, D], each link read only by the next. Returns x and sets `group` to n; nullopt
// otherwise. Query head h then reads x's head h / n.
std::optional<std::string> repeated_heads(const GraphIndex& ix, const std::string& value, int64_t& group,
                                          std::vector<size_t>& nodes) {
  size_t reshape_at = 0, expand_at = 0, unsqueeze_at = 0;
  const Node* reshape = ix.link(value, kReshape, &reshape_at);
  if (!reshape || reshape->inputs.empty()) return std::nullopt;
  const Node* expand = ix.link(reshape->inputs[0], kExpand, &expand_at);
  if (!expand || expand->inputs.empty()) return std::nullopt;
  const Node* unsqueeze = ix.link(expand->inputs[0], kUnsqueeze, &unsqueeze_at);
  if (!unsqueeze || unsqueeze->inputs.empty()) return std::nullopt;
  const ValueInfo *x = ix.info(unsqueeze->inputs[0]), *u = ix.info(unsqueeze->outputs[0]),
                  *e = ix.info(expand->outputs[0]), *r = ix.info(value);
  if (!is_4d(x, DType::f32) || !is_4d(r, DType::f32) || !u || !e || u->shape.size() != 5 || e->shape.size() != 5)
    return std::nullopt;
  const Shape &xs = x->shape, &us = u->shape, &es = e->shape, &rs = r->shape;
  const Shape unsqueezed{xs[0], xs[1], 1, xs[2], xs[3]};
  const Shape expanded{xs[0], xs[1], es[2], xs[2], xs[3]};
  if (us != unsqueezed || es != expanded || es[2] < 1 || rs != Shape{xs[0], xs[1] * es[2], xs[2], xs[3]})
    return std::nullopt;
  group = es[2];
  nodes.insert(nodes.end(), {reshape_at, expand_at, unsqueeze_at});
  return unsqueeze->inputs[0];
}

// When the key_rows node's K and V are each grouped-query attention's repeat of fewer heads
// (the same number of times), the node reads the unrepeated K and V (attribute kv_group) and
// the repeats go: they copied the cache once per query head of a group, every step.
void take_kv_groups(const GraphIndex& ix, Node& fused, std::vector<size_t>& replaced) {
  int64_t k_group = 0, v_group = 0;
  std::vector<size_t> nodes;
  const auto k = repeated_heads(ix, fused.inputs[1], k_group, nodes);
  const auto v = repeated_heads(ix, fused.inputs[2], v_group, nodes);
  if (!k || !v || k_group != v_group || k_group < 2) return;
  fused.inputs[1] = *k;
  fused.inputs[2] = *v;
  set_int(fused, "kv_group", k_group);
  replaced.insert(replaced.end(), nodes.begin(), nodes.end());
}

// When the head-major fused node's KT is Transpose(perm 0 1 3 2) of a 4-D K read by nothing
// else, the node reads K itself (attribute key_rows, ops/attention/attention.h) and the
// Transpose goes: a decoder's K is the whole cache, which the Transpose copied every step.
void take_keys_as_rows(const GraphIndex& ix, Node& fused, std::vector<size_t>& replaced) {
  size_t at = 0;
  const Node* transpose = ix.link(fused.inputs[1], kTranspose, &at);
  if (!transpose || transpose->inputs.size() != 1 || transpose->attr_ints("perm") != std::vector<int64_t>{0, 1, 3, 2})
    return;
  if (!is_4d(ix.info(transpose->inputs[0]), DType::f32)) return;
  fused.inputs[1] = transpose->inputs[0];
  Attribute a;
  a.kind = Attribute::Kind::i;
  a.i = 1;
  fused.attrs["key_rows"] = a;
  replaced.push_back(at);
  take_kv_groups(ix, fused, replaced);
  take_cache_parts(ix, fused, replaced);
}

// Tries to fuse the chain ending in the MatMul at `pv_index`; returns the fused node and
// marks the nodes it replaces, or returns false with nothing changed.
bool match(const GraphIndex& ix, size_t pv_index, Node& fused, std::vector<size_t>& replaced) {
  const Node& pv = ix.g.nodes[pv_index];
  if (pv.op_type != kMatMul || !pv.domain.empty() || pv.inputs.size() != 2) return false;
  size_t at = 0;
  const Node* softmax = ix.link(pv.inputs[0], kSoftmax, &at);
  if (!softmax) return false;
  std::vector<size_t> chain{pv_index, at};
  const ValueInfo* sm_in = ix.info(softmax->inputs[0]);
  if (!is_4d(sm_in, DType::f32)) return false;
  const int64_t axis = softmax->attr_int("axis", softmax->opset > 0 && softmax->opset < 13 ? 1 : -1);
  if (axis != -1 && axis != 3) return false;
  const Shape scores = sm_in->shape;

  std::string value = softmax->inputs[0], mask, keep;
  float fill = 0;
  if (const Node* add = ix.link(value, kAdd, &at)) {
    if (add->inputs.size() != 2) return false;
    // Either operand may be the scores: float addition commutes exactly.
    const std::string& first = add->inputs[0];
    const bool scores_first = ix.link(first, kWhere) || ix.link(first, kMul) || ix.link(first, kDiv);
    value = add->inputs[scores_first ? 0 : 1];
    mask = add->inputs[scores_first ? 1 : 0];
    if (!fits_scores(ix.info(mask), DType::f32, scores)) return false;
    chain.push_back(at);
  }
  if (const Node* where = ix.link(value, kWhere, &at)) {
    if (where->inputs.size() != 3 || !ix.scalar_constant(where->inputs[2], fill)) return false;
    keep = where->inputs[0];
    if (!fits_scores(ix.info(keep), DType::boolean, scores)) return false;
    value = where->inputs[1];
    chain.push_back(at);
  }
  const Node* scale_node = ix.link(value, kMul, &at);
  if (!scale_node) scale_node = ix.link(value, kDiv, &at);
  if (!scale_node || scale_node->inputs.size() != 2) return false;
  float scale = 0;
  size_t scores_at = 0;  // which operand of the Mul/Div is the product
  if (ix.scalar_constant(scale_node->inputs[1], scale)) scores_at = 0;
  else if (scale_node->op_type == kMul && ix.scalar_constant(scale_node->inputs[0], scale)) scores_at = 1;
  else return false;
  chain.push_back(at);
  const Node* qk = ix.link(scale_node->inputs[scores_at], kMatMul, &at);
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
  fused.op_type = kAttention;
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
  to_sequence_major(ix, fused, replaced);
  if (!fused.attrs.count("heads")) take_keys_as_rows(ix, fused, replaced);
  return true;
}

// Where one head-major operand of the chain comes from, for the sequence-major form.
struct HeadRows {
  std::string rows;       // the [B, S, C] value its heads sit side by side in
  int64_t offset = 0;     // the column of head 0 in `rows`
  int64_t heads = 0, width = 0;
  std::optional<size_t> split;  // the Split that produced the Reshape's input, if one did
  std::string split_output;
  std::vector<size_t> nodes;    // the Reshape and Transpose it replaces
};

// `value` = Transpose(perm) of Reshape(x) with x [B, S, H * D] and the Reshape [B, S, H, D].
bool head_rows(const GraphIndex& ix, const std::string& value, const std::vector<int64_t>& perm, HeadRows& out) {
  size_t transpose_at = 0, reshape_at = 0;
  const Node* transpose = ix.link(value, kTranspose, &transpose_at);
  if (!transpose || transpose->inputs.size() != 1 || transpose->attr_ints("perm") != perm) return false;
  const Node* reshape = ix.link(transpose->inputs[0], kReshape, &reshape_at);
  if (!reshape || reshape->inputs.empty()) return false;
  const ValueInfo* split_heads = ix.info(reshape->outputs[0]);
  const ValueInfo* rows = ix.info(reshape->inputs[0]);
  if (!is_4d(split_heads, DType::f32) || !rows || rows->dtype != DType::f32 || rows->shape.size() != 3) return false;
  const Shape &h = split_heads->shape, &x = rows->shape;
  if (x[0] != h[0] || x[1] != h[1] || x[2] != h[2] * h[3]) return false;
  out = HeadRows{reshape->inputs[0], 0, h[2], h[3], std::nullopt, {}, {transpose_at, reshape_at}};
  // One output of a Split along the last axis: read the Split's input at that output's columns.
  auto p = ix.producer.find(reshape->inputs[0]);
  if (p == ix.producer.end() || ix.outputs.count(reshape->inputs[0]) || ix.readers.at(reshape->inputs[0]) != 1)
    return true;
  const Node& split = ix.g.nodes[p->second];
  if (split.op_type != kSplit || !split.domain.empty() || split.inputs.empty()) return true;
  const ValueInfo* whole = ix.info(split.inputs[0]);
  if (!whole || whole->dtype != DType::f32 || whole->shape.size() != 3) return true;
  int64_t axis = split.attr_int("axis", 0);
  if (axis < 0) axis += 3;
  if (axis != 2) return true;
  int64_t offset = 0;
  for (const auto& o : split.outputs) {
    if (o == reshape->inputs[0]) {
      out.rows = split.inputs[0];
      out.offset = offset;
      out.split = p->second;
      out.split_output = o;
      return true;
    }
    const ValueInfo* part = ix.info(o);
    if (!part || part->shape.size() != 3) return true;
    offset += part->shape[2];
  }
  return true;
}

// Turns the head-major `fused` (inputs Q, KT, V, [mask], [keep]) into the sequence-major form
// when the chain's surroundings allow it (top of file), adding the nodes it absorbs to
// `replaced`; else leaves both unchanged.
void to_sequence_major(const GraphIndex& ix, Node& fused, std::vector<size_t>& replaced) {
  HeadRows q, k, v;
  if (!head_rows(ix, fused.inputs[0], {0, 2, 1, 3}, q) || !head_rows(ix, fused.inputs[1], {0, 2, 3, 1}, k) ||
      !head_rows(ix, fused.inputs[2], {0, 2, 1, 3}, v))
    return;
  if (q.heads != k.heads || q.heads != v.heads || q.width != k.width) return;
  const std::optional<size_t> out_at = only_reader(ix, fused.outputs[0]);
  if (!out_at) return;
  const Node& out = ix.g.nodes[*out_at];
  if (out.op_type != kTranspose || !out.domain.empty() || out.outputs.size() != 1 ||
      out.attr_ints("perm") != std::vector<int64_t>{0, 2, 1, 3})
    return;
  // A Split is absorbed only whole: each of its outputs is one of these three.
  std::vector<size_t> absorbed{*out_at};
  for (const HeadRows* h : {&q, &k, &v}) {
    absorbed.insert(absorbed.end(), h->nodes.begin(), h->nodes.end());
    if (!h->split) continue;
    for (const auto& o : ix.g.nodes[*h->split].outputs)
      if (o != q.split_output && o != k.split_output && o != v.split_output) return;
    if (std::find(absorbed.begin(), absorbed.end(), *h->split) == absorbed.end()) absorbed.push_back(*h->split);
  }
  fused.inputs[0] = q.rows;
  fused.inputs[1] = k.rows;
  fused.inputs[2] = v.rows;
  fused.outputs = out.outputs;
  set_int(fused, "heads", q.heads);
  set_int(fused, "head_dim", q.width);
  set_int(fused, "value_dim", v.width);
  set_int(fused, "q_offset", q.offset);
  set_int(fused, "k_offset", k.offset);
  set_int(fused, "v_offset", v.offset);
  replaced.insert(replaced.end(), absorbed.begin(), absorbed.end());
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
