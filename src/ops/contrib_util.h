#pragma once
// What the com.microsoft contrib op files (contrib_microsoft.cpp, contrib_attention.cpp,
// contrib_lstm.cpp) share: their references are compositions of standard ONNX ops run
// through the builtin references, and these helpers build and run those steps.
#include <algorithm>
#include <cstring>
#include <initializer_list>
#include <string>
#include <vector>

#include "ops/evaluate.h"
#include "ops/op.h"

namespace grove::contrib {

// A standard node for a step of a composition, named like the contrib node so that an error
// inside it names the node the user sees.
inline Node step(const Node& outer, const std::string& op, size_t inputs, int opset) {
  Node n;
  n.name = outer.name;
  n.op_type = op;
  n.opset = opset;
  for (size_t i = 0; i < inputs; ++i) n.inputs.push_back("in" + std::to_string(i));
  n.outputs = {"out0"};
  return n;
}
inline void set_i(Node& n, const std::string& k, int64_t v) {
  Attribute& a = n.attrs[k];
  a.kind = Attribute::Kind::i, a.i = v;
}
inline void set_f(Node& n, const std::string& k, float v) {
  Attribute& a = n.attrs[k];
  a.kind = Attribute::Kind::f, a.f = v;
}
inline void set_s(Node& n, const std::string& k, const std::string& v) {
  Attribute& a = n.attrs[k];
  a.kind = Attribute::Kind::s, a.s = v;
}
inline void set_ints(Node& n, const std::string& k, std::vector<int64_t> v) {
  Attribute& a = n.attrs[k];
  a.kind = Attribute::Kind::ints, a.ints = std::move(v);
}

inline Tensor eval(const Node& n, std::vector<const Tensor*> in) { return evaluate_node(n, in).at(0); }
inline ValueInfo infer1(const Node& n, std::vector<ValueInfo> in) { return infer_node(n, in).at(0); }

// Writes a computed tensor into the output the executor allocated from infer's answer.
inline void put(const Node& node, Tensor* out, const Tensor& value) {
  if (!out) return;
  if (out->dtype() != value.dtype() || out->shape() != value.shape())
    throw Error(node.describe() + ": computed " + shape_str(value.shape()) + ", inferred " + shape_str(out->shape()));
  std::memcpy(out->raw(), value.raw(), value.bytes());
}

// Outputs past the first that grove does not compute: named ones are an error.
inline void only_outputs(const Node& node, std::initializer_list<size_t> computed) {
  for (size_t i = 1; i < node.outputs.size(); ++i)
    if (!node.outputs[i].empty() && std::find(computed.begin(), computed.end(), i) == computed.end())
      throw Unsupported(node.describe() + ": output " + std::to_string(i) + " is not supported; leave it unnamed");
}

inline bool output_named(const Node& node, size_t i) { return i < node.outputs.size() && !node.outputs[i].empty(); }

}  // namespace grove::contrib

namespace grove {
// Registered from register_microsoft_ops (contrib_microsoft.cpp).
void register_microsoft_attention_ops(OpRegistry&);  // contrib_attention.cpp: Attention, MultiHeadAttention, RotaryEmbedding
void register_microsoft_lstm_op(OpRegistry&);        // contrib_lstm.cpp: DynamicQuantizeLSTM
}  // namespace grove
