#pragma once
// The plain IR: a Graph is a topologically ordered list of Nodes over named values.
// Initializers are constant values with data. After bind_shapes() every value has a
// dtype and a static shape in Graph::values.
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "graph/node_decisions.h"
#include "graph/tensor.h"
#include "grove/value.h"

namespace grove {

struct Graph;

struct Attribute {
  enum class Kind { none, i, f, s, ints, floats, strings, tensor, graph };
  Kind kind = Kind::none;
  int64_t i = 0;
  float f = 0;
  std::string s;
  std::vector<int64_t> ints;
  std::vector<float> floats;
  std::vector<std::string> strings;
  Tensor t;
  // A subgraph (If's branches, Loop's and Scan's body): shared by every copy of the node and
  // never changed after import.
  std::shared_ptr<const Graph> g;
};

struct Node {
  std::string name;
  std::string op_type;
  std::string domain;                // "" is the default ONNX domain
  std::vector<std::string> inputs;   // "" marks a missing optional input
  std::vector<std::string> outputs;
  std::map<std::string, Attribute> attrs;
  int opset = 0;                     // the model's opset for this node's domain
  // Values of the enclosing graph that this node's subgraphs read by name (outer scope): the
  // node depends on them as on its inputs. Empty for nodes without subgraphs.
  std::vector<std::string> captures;
  // What the planner decided for this node (graph/node_decisions.h); empty as imported.
  NodeDecisions decisions;

  // "node 'conv1' (Conv)": the prefix of every error about this node.
  std::string describe() const;

  bool has_attr(const std::string& key) const { return attrs.count(key) != 0; }
  // Typed attribute readers: the default when absent, an Error when present with another kind.
  int64_t attr_int(const std::string& key, int64_t fallback) const;
  float attr_float(const std::string& key, float fallback) const;
  std::string attr_string(const std::string& key, const std::string& fallback) const;
  std::vector<int64_t> attr_ints(const std::string& key, std::vector<int64_t> fallback = {}) const;
  std::vector<float> attr_floats(const std::string& key, std::vector<float> fallback = {}) const;
  const Tensor& attr_tensor(const std::string& key) const;
  const Graph& attr_graph(const std::string& key) const;
};

// A dimension as declared in the model: a number, or a symbolic name (dim_param) when value < 0.
struct Dim {
  int64_t value = -1;
  std::string param;
};

// A graph input or output as the model declares it.
struct ValueDecl {
  std::string name;
  DType dtype = DType::undefined;  // of the tensor, or of a sequence's tensors
  std::vector<Dim> dims;
  bool has_shape = false;  // false when the model gives no shape at all
  ValueKind kind = ValueKind::tensor;
};

// What is known about a value: dtype and shape, and its data when it is constant.
struct ValueInfo {
  DType dtype = DType::undefined;
  Shape shape;
  const Tensor* data = nullptr;  // non-null for initializers and folded constants
  bool present = true;           // false for a missing optional input
};

struct Graph {
  std::string path;                          // where it was loaded from, for messages
  std::string name;
  std::map<std::string, int> opsets;         // domain -> version
  std::map<std::string, std::string> metadata;  // the model's metadata_props (top level only)
  // The ModelProto's own fields (top level only), for Model::metadata.
  std::string producer_name, producer_version, domain, description, graph_description;
  int64_t model_version = 0;
  std::vector<Node> nodes;                   // topological order
  std::map<std::string, Tensor> initializers;
  std::vector<ValueDecl> inputs;             // runtime inputs (initializers excluded)
  // Graph inputs that also have an initializer: overridable defaults. They are constants (the
  // initializer) unless a run feeds them (ONNX Runtime's behaviour).
  std::vector<ValueDecl> defaults;
  std::vector<ValueDecl> outputs;
  // Filled by bind_shapes(): dtype and shape of every value. `data` stays null here (constants
  // live in `initializers`), so copies of a Graph never point into another Graph.
  std::map<std::string, ValueInfo> values;
  std::map<std::string, Shape> bound_inputs; // the input shapes the graph is bound to
  int64_t declared_bytes = 0;                // bind_shapes(): weights + inputs + every node output, as charged to Limits

  const ValueDecl* find_input(const std::string& name) const;
  const ValueDecl* find_default(const std::string& name) const;
  int64_t parameter_count() const;
};

}  // namespace grove
