#pragma once
// The reference executor: runs a bound graph node by node with each op's reference
// implementation. It stays simple forever; it is the oracle every fast path is tested against.
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "graph/graph.h"
#include "graph/limits.h"
#include "grove/cancel.h"

namespace grove {

// Checks that `inputs` match the graph's bound inputs by name, dtype and shape; throws an
// Error naming the input otherwise. The values form also checks sequences and optionals
// against their declarations (kind and element dtype).
void check_inputs(const Graph& bound, const TensorMap& inputs);
void check_inputs(const Graph& bound, const ValueMap& inputs);
// Whether every input and output the graph declares is a tensor (no sequence or optional).
bool has_only_tensor_io(const Graph& graph);

// Whether `inputs` feed any of the graph's overridable defaults (Graph::defaults).
bool feeds_defaults(const Graph& imported, const TensorMap& inputs);
// The imported graph with each default that `inputs` feeds turned from an initializer into a
// runtime input of the fed tensor's dtype and shape.
Graph with_fed_defaults(const Graph& imported, const TensorMap& inputs);

// The values of the graphs enclosing a subgraph, which it reads by name (Node::captures):
// each graph's computed values and initializers, innermost first.
struct Scope {
  const ValueMap* values = nullptr;
  const std::map<std::string, Tensor>* initializers = nullptr;
  const Scope* parent = nullptr;
  // What the enclosing graphs' runs hold around this one (RunBody's held_outside): this
  // run's Loops and Scans charge what they collect on top of it.
  int64_t held_outside = 0;
  // The value of `name` (a cheap copy: tensors share their buffers), or nullopt.
  std::optional<Value> find(const std::string& name) const;
};

// A node's inputs as values, held while it runs; pointers[i] is null for a missing optional
// input. lookup(name) gives the value of a name.
struct HeldInputs {
  std::vector<Value> values;
  std::vector<const Value*> pointers;
};
template <class Lookup>
HeldInputs hold_inputs(const Node& node, Lookup&& lookup) {
  HeldInputs h;
  h.values.reserve(node.inputs.size());  // pointers into it stay valid
  for (const auto& name : node.inputs) {
    if (name.empty()) {
      h.pointers.push_back(nullptr);
      continue;
    }
    h.values.push_back(lookup(name));
    h.pointers.push_back(&h.values.back());
  }
  return h;
}

// Runs `bound` (after bind_shapes) and returns its outputs by name. Intermediate tensors are
// dropped after their last use, so peak memory stays near the live set. Weights, inputs and
// live tensors together stay under limits.max_memory: a node whose outputs (their shapes
// can depend on input values here) would pass it is an Error before it allocates.
// If, Loop, Scan and SequenceMap run their subgraphs the same way, naively, with `outer`
// (null for a model's main graph) giving the values of enclosing graphs. Sequence ops
// (ops/control_flow/sequence.h) run on values. The tensor form is an Error if an output is not a tensor.
// `cancel` is checked before every node and every subgraph run (each Loop iteration): once
// it is stopped, the run throws its Error (kind `cancelled`). `peak_bytes`, when given, gets
// the most the run held at once besides the graph's initializers: its inputs and live values,
// with what a subgraph run held on top of the values live around it.
ValueMap run_reference_values(const Graph& bound, const ValueMap& inputs, const Limits& limits = {},
                              const Scope* outer = nullptr, const CancelToken& cancel = {},
                              int64_t* peak_bytes = nullptr);
TensorMap run_reference(const Graph& bound, const TensorMap& inputs, const Limits& limits = {},
                        const CancelToken& cancel = {}, int64_t* peak_bytes = nullptr);

}  // namespace grove
