#include "runtime/reference_executor.h"

#include <algorithm>
#include <set>

#include "ops/control_flow.h"
#include "ops/evaluate.h"

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

void check_inputs(const Graph& g, const TensorMap& inputs) {
  for (const auto& [name, t] : inputs)
    if (!g.find_input(name) && !g.find_default(name)) {
      std::string known;
      for (const auto& in : g.inputs) known += (known.empty() ? "" : ", ") + in.name;
      throw Error(g.path + ": the model has no input named '" + name + "' (inputs: " + known + ")");
    }
  for (const auto& in : g.inputs) {
    auto it = inputs.find(in.name);
    if (it == inputs.end()) throw Error(g.path + ": input '" + in.name + "' was not given");
    const Tensor& t = it->second;
    if (t.dtype() != in.dtype)
      throw Error(g.path + ": input '" + in.name + "' must be " + std::string(dtype_name(in.dtype)) + ", got " +
                  std::string(dtype_name(t.dtype())));
    auto bound = g.bound_inputs.find(in.name);
    if (bound != g.bound_inputs.end() && bound->second != t.shape())
      throw Error(g.path + ": input '" + in.name + "' has shape " + shape_str(t.shape()) + ", the model is bound to " +
                  shape_str(bound->second));
  }
}

const Tensor* Scope::find(const std::string& name) const {
  for (const Scope* s = this; s; s = s->parent) {
    if (s->values) {
      auto it = s->values->find(name);
      if (it != s->values->end()) return &it->second;
    }
    if (s->initializers) {
      auto it = s->initializers->find(name);
      if (it != s->initializers->end()) return &it->second;
    }
  }
  return nullptr;
}

TensorMap run_reference(const Graph& g, const TensorMap& inputs, const Limits& limits, const Scope* outer) {
  // A subgraph's formal inputs are checked by the control-flow node that runs it.
  if (!outer) check_inputs(g, inputs);
  const int64_t limit = limits.memory_limit();
  int64_t live_bytes = 0;  // initializers, inputs and the live intermediates
  for (const auto& [name, t] : g.initializers) live_bytes += static_cast<int64_t>(t.bytes());
  for (const auto& [name, t] : inputs) live_bytes += static_cast<int64_t>(t.bytes());
  // Last node index that reads each value; graph outputs are never dropped.
  std::map<std::string, size_t> last_use;
  for (size_t i = 0; i < g.nodes.size(); ++i) {
    for (const auto& name : g.nodes[i].inputs) last_use[name] = i;
    for (const auto& name : g.nodes[i].captures) last_use[name] = i;
  }
  std::set<std::string> outputs;
  for (const auto& o : g.outputs) outputs.insert(o.name);

  TensorMap live = inputs;
  auto lookup = [&](const std::string& name) -> const Tensor* {
    auto it = live.find(name);
    if (it != live.end()) return &it->second;
    auto init = g.initializers.find(name);
    if (init != g.initializers.end()) return &init->second;
    if (const Tensor* t = outer ? outer->find(name) : nullptr) return t;
    throw Error(g.path + ": value '" + name + "' is used before it is computed");
  };

  for (size_t i = 0; i < g.nodes.size(); ++i) {
    const Node& node = g.nodes[i];
    std::vector<const Tensor*> in;
    for (const auto& name : node.inputs) in.push_back(name.empty() ? nullptr : lookup(name));
    std::vector<Tensor> out;
    try {
      if (is_control_flow(node)) {
        const Scope here{&live, &g.initializers, outer};
        out = run_control_flow(node, in, [&](const Graph& body, std::vector<Tensor> formal) {
          TensorMap body_inputs;
          for (size_t k = 0; k < formal.size(); ++k) body_inputs[body.inputs[k].name] = std::move(formal[k]);
          TensorMap body_outputs = run_reference(body, body_inputs, limits, &here);
          std::vector<Tensor> result;
          for (const auto& o : body.outputs) result.push_back(body_outputs.at(o.name));
          return result;
        }, limits.max_loop_iterations);
      } else {
        out = evaluate_node(node, in, std::max<int64_t>(0, limit - live_bytes));
      }
    } catch (const Error& e) {
      throw e.prefixed(g.path + ": ");
    }
    for (size_t k = 0; k < node.outputs.size(); ++k)
      if (!node.outputs[k].empty() && k < out.size()) {
        live_bytes += static_cast<int64_t>(out[k].bytes());
        live[node.outputs[k]] = std::move(out[k]);
      }
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

  TensorMap result;
  for (const auto& o : g.outputs) result[o.name] = *lookup(o.name);
  return result;
}

}  // namespace grove
