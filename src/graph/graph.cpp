#include "graph/graph.h"

namespace grove {

std::string Node::describe() const {
  std::string d = "node '" + name + "' (" + op_type;
  if (!domain.empty() && domain != "ai.onnx") d += ", domain " + domain;
  return d + ")";
}

namespace {
const Attribute* find(const Node& n, const std::string& key, Attribute::Kind kind, const char* kind_name) {
  auto it = n.attrs.find(key);
  if (it == n.attrs.end()) return nullptr;
  if (it->second.kind != kind) throw Error(n.describe() + ": attribute '" + key + "' should be " + kind_name);
  return &it->second;
}
}  // namespace

int64_t Node::attr_int(const std::string& key, int64_t fallback) const {
  const Attribute* a = find(*this, key, Attribute::Kind::i, "an int");
  return a ? a->i : fallback;
}
float Node::attr_float(const std::string& key, float fallback) const {
  const Attribute* a = find(*this, key, Attribute::Kind::f, "a float");
  return a ? a->f : fallback;
}
std::string Node::attr_string(const std::string& key, const std::string& fallback) const {
  const Attribute* a = find(*this, key, Attribute::Kind::s, "a string");
  return a ? a->s : fallback;
}
std::vector<int64_t> Node::attr_ints(const std::string& key, std::vector<int64_t> fallback) const {
  const Attribute* a = find(*this, key, Attribute::Kind::ints, "a list of ints");
  return a ? a->ints : fallback;
}
std::vector<float> Node::attr_floats(const std::string& key, std::vector<float> fallback) const {
  const Attribute* a = find(*this, key, Attribute::Kind::floats, "a list of floats");
  return a ? a->floats : fallback;
}
const Tensor& Node::attr_tensor(const std::string& key) const {
  const Attribute* a = find(*this, key, Attribute::Kind::tensor, "a tensor");
  if (!a) throw Error(describe() + ": missing attribute '" + key + "'");
  return a->t;
}
const Graph& Node::attr_graph(const std::string& key) const {
  const Attribute* a = find(*this, key, Attribute::Kind::graph, "a graph");
  if (!a || !a->g) throw Error(describe() + ": missing subgraph attribute '" + key + "'");
  return *a->g;
}

const ValueDecl* Graph::find_input(const std::string& n) const {
  for (const auto& v : inputs)
    if (v.name == n) return &v;
  return nullptr;
}

const ValueDecl* Graph::find_default(const std::string& n) const {
  for (const auto& v : defaults)
    if (v.name == n) return &v;
  return nullptr;
}

int64_t Graph::parameter_count() const {
  int64_t n = 0;
  for (const auto& [name, t] : initializers)
    if (t.dtype() == DType::f32 || t.dtype() == DType::f16 || t.dtype() == DType::bf16 || t.dtype() == DType::f64) n += t.numel();
  return n;
}

}  // namespace grove
