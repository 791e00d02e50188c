#include "runtime/reference_executor.h"

#include <algorithm>
#include <set>

#include "ops/control_flow/control_flow.h"
#include "ops/evaluate.h"
#include "ops/control_flow/sequence.h"

namespace grove {

bool feeds_defaults(const Graph& g, const TensorMap& inputs) {
  for (const auto& d : g.defaults)
    if (inputs.count(d.name)) return true;
  return false;
}

Graph with_fed_defaults(const Graph& imported, const TensorMap& inputs) {
  Graph g = imported;
  g.defaults.clear();
  for (const auto& d : imported.defaults) {
    auto fed = inputs.find(d.name);
    if (fed == inputs.end()) {
      g.defaults.push_back(d);
      continue;
    }
    // The initializer's dtype is the one the graph was written for.
    const Tensor& stored = g.initializers.at(d.name);
    if (fed->second.dtype() != stored.dtype())
      throw Error(g.path + ": input '" + d.name + "' must be " + std::string(dtype_name(stored.dtype())) + ", got " +
                  std::string(dtype_name(fed->second.dtype())));
    ValueDecl in{d.name, stored.dtype(), {}, true};
    for (int64_t v : fed->second.shape()) in.dims.push_back(Dim{v, ""});
    g.inputs.push_back(in);
    g.initializers.erase(d.name);
  }
  return g;
}

namespace {

std::string known_inputs(const Graph& g) {
  std::string known;
  for (const auto& in : g.inputs) known += (known.empty() ? "" : ", ") + in.name;
  return known;
}

// Whether `v` is what `decl` declares: its kind, and the dtype of the tensor or of the
// sequence's tensors (an empty optional fits either optional kind).
std::string mismatch(const ValueDecl& decl, const Value& v) {
  const bool optional = decl.kind == ValueKind::optional_tensor || decl.kind == ValueKind::optional_sequence;
  if (v.is_none()) return optional ? "" : "is an empty optional";
  const bool wants_sequence = decl.kind == ValueKind::sequence || decl.kind == ValueKind::optional_sequence;
  if (v.is_sequence() != wants_sequence)
    return "must be a " + std::string(value_kind_name(decl.kind)) + ", got " + v.describe();
  const DType got = v.is_sequence() ? v.element_dtype() : v.tensor().dtype();
  if (decl.dtype != DType::undefined && got != decl.dtype)
    return "must hold " + std::string(dtype_name(decl.dtype)) + ", got " + std::string(dtype_name(got));
  return "";
}

// A tensor input against its declaration: dtype, and shape when the graph is bound.
void check_tensor_input(const Graph& g, const ValueDecl& in, const Tensor& t) {
  if (t.dtype() != in.dtype)
    throw Error(g.path + ": input '" + in.name + "' must be " + std::string(dtype_name(in.dtype)) + ", got " +
                std::string(dtype_name(t.dtype())));
  auto bound = g.bound_inputs.find(in.name);
  if (bound != g.bound_inputs.end() && bound->second != t.shape())
    throw Error(g.path + ": input '" + in.name + "' has shape " + shape_str(t.shape()) + ", the model is bound to " +
                shape_str(bound->second));
}

template <class Map>
void check_names(const Graph& g, const Map& inputs) {
  for (const auto& [name, value] : inputs)
    if (!g.find_input(name) && !g.find_default(name))
      throw Error(g.path + ": the model has no input named '" + name + "' (inputs: " + known_inputs(g) + ")");
}

}  // namespace

bool has_only_tensor_io(const Graph& g) {
  for (const auto* decls : {&g.inputs, &g.outputs})
    for (const ValueDecl& d : *decls)
      if (d.kind != ValueKind::tensor) return false;
  return true;
}

void check_inputs(const Graph& g, const TensorMap& inputs) {
  check_names(g, inputs);
  for (const auto& in : g.inputs) {
    if (in.kind != ValueKind::tensor)
      throw Error(g.path + ": input '" + in.name + "' is a " + std::string(value_kind_name(in.kind)) +
                  "; pass it with run_values (Session::run_values, Model::run_reference_values)");
    auto it = inputs.find(in.name);
    if (it == inputs.end()) throw Error(g.path + ": input '" + in.name + "' was not given");
    check_tensor_input(g, in, it->second);
  }
}

void check_inputs(const Graph& g, const ValueMap& inputs) {
  check_names(g, inputs);
  for (const auto& in : g.inputs) {
    auto it = inputs.find(in.name);
    if (it == inputs.end()) throw Error(g.path + ": input '" + in.name + "' was not given");
    if (in.kind == ValueKind::tensor && it->second.is_tensor()) {
      check_tensor_input(g, in, it->second.tensor());
      continue;
    }
    if (std::string why = mismatch(in, it->second); !why.empty())
      throw Error(g.path + ": input '" + in.name + "' " + why);
  }
}

std::optional<Value> Scope::find(const std::string& name) const {
  for (const Scope* s = this; s; s = s->parent) {
    if (s->values) {
      auto it = s->values->find(name);
      if (it != s->values->end()) return it->second;
    }
    if (s->initializers) {
      auto it = s->initializers->find(name);
      if (it != s->initializers->end()) return Value(it->second);
    }
  }
  return std::nullopt;
}

ValueMap run_reference_values(const Graph& g, const ValueMap& inputs, const Limits& limits, const Scope* outer,
                              const CancelToken& cancel, int64_t* peak_bytes) {
  // A subgraph's formal inputs are checked by the control-flow node that runs it.
  if (!outer) check_inputs(g, inputs);
  const int64_t limit = limits.memory_limit();
  // Held by the enclosing runs: charged by this graph's Loops and Scans beside what they
  // collect (a plain node is charged by its own level only, so its error names the Loop).
  const int64_t outside = outer ? outer->held_outside : 0;
  int64_t live_bytes = 0;  // initializers, inputs and the live intermediates
  for (const auto& [name, t] : g.initializers) live_bytes += static_cast<int64_t>(t.bytes());
  const int64_t initializer_bytes = live_bytes;
  for (const auto& [name, v] : inputs) live_bytes += static_cast<int64_t>(v.bytes());
  int64_t peak = live_bytes;
  // Last node index that reads each value; graph outputs are never dropped.
  std::map<std::string, size_t> last_use;
  for (size_t i = 0; i < g.nodes.size(); ++i) {
    for (const auto& name : g.nodes[i].inputs) last_use[name] = i;
    for (const auto& name : g.nodes[i].captures) last_use[name] = i;
  }
  std::set<std::string> outputs;
  for (const auto& o : g.outputs) outputs.insert(o.name);

  ValueMap live = inputs;
  auto lookup = [&](const std::string& name) -> Value {
    auto it = live.find(name);
    if (it != live.end()) return it->second;
    auto init = g.initializers.find(name);
    if (init != g.initializers.end()) return init->second;
    if (outer)
      if (std::optional<Value> v = outer->find(name)) return *v;
    throw Error(g.path + ": value '" + name + "' is used before it is computed");
  };

  for (size_t i = 0; i < g.nodes.size(); ++i) {
    const Node& node = g.nodes[i];
    cancel.throw_if_stopped();
    const HeldInputs held = hold_inputs(node, lookup);
    const std::vector<const Value*>& in = held.pointers;
    std::vector<Value> out;
    try {
      if (is_control_flow(node)) {
        out = run_control_flow(node, in, [&](const Graph& body, std::vector<Value> formal, int64_t held_outside) {
          const Scope here{&live, &g.initializers, outer, held_outside};
          // Every iteration: a body without nodes would not reach the check above.
          cancel.throw_if_stopped();
          ValueMap body_inputs;
          for (size_t k = 0; k < formal.size(); ++k) body_inputs[body.inputs[k].name] = std::move(formal[k]);
          int64_t body_peak = 0;
          ValueMap body_outputs = run_reference_values(body, body_inputs, limits, &here, cancel, &body_peak);
          peak = std::max(peak, live_bytes + body_peak);
          std::vector<Value> result;
          for (const auto& o : body.outputs) result.push_back(body_outputs.at(o.name));
          return result;
        }, limits, live_bytes + outside);
      } else if (runs_on_values(node, in)) {
        out = run_sequence_op(node, in);
      } else {
        std::vector<const Tensor*> tensors;
        for (size_t k = 0; k < in.size(); ++k) {
          if (in[k] && !in[k]->is_tensor())
            throw Error(node.describe() + ": input '" + node.inputs[k] + "' is " + in[k]->describe() +
                        "; the op takes tensors");
          tensors.push_back(in[k] ? &in[k]->tensor() : nullptr);
        }
        for (Tensor& t : evaluate_node(node, tensors, std::max<int64_t>(0, limit - live_bytes)))
          out.emplace_back(std::move(t));
      }
    } catch (const Error& e) {
      throw e.prefixed(g.path + ": ");
    }
    for (size_t k = 0; k < node.outputs.size(); ++k)
      if (!node.outputs[k].empty() && k < out.size()) {
        live_bytes += static_cast<int64_t>(out[k].bytes());
        live[node.outputs[k]] = std::move(out[k]);
      }
    peak = std::max(peak, live_bytes);  // the node's outputs beside its inputs
    std::vector<std::string> read = node.inputs;
    read.insert(read.end(), node.captures.begin(), node.captures.end());
    for (const auto& name : read) {
      if (name.empty() || last_use[name] != i || outputs.count(name)) continue;
      auto it = live.find(name);
      if (it == live.end()) continue;
      live_bytes -= static_cast<int64_t>(it->second.bytes());
      live.erase(it);
    }
  }

  ValueMap result;
  for (const auto& o : g.outputs) result[o.name] = lookup(o.name);
  if (peak_bytes) *peak_bytes = peak - initializer_bytes;
  return result;
}

TensorMap run_reference(const Graph& g, const TensorMap& inputs, const Limits& limits, const CancelToken& cancel,
                        int64_t* peak_bytes) {
  check_inputs(g, inputs);
  return to_tensors(run_reference_values(g, to_values(inputs), limits, nullptr, cancel, peak_bytes), g.path + ": output ");
}

}  // namespace grove
