#include "passes/bind.h"

#include <charconv>

#include <set>

#include "ops/control_flow/control_flow.h"
#include "ops/evaluate.h"
#include "ops/op_names.h"

namespace grove {

std::pair<std::string, Shape> parse_shape_binding(const std::string& text) {
  auto eq = text.rfind('=');
  if (eq == std::string::npos || eq == 0 || eq + 1 >= text.size())
    throw Error("bad shape '" + text + "': expected NAME=DIMS, e.g. input=1x3x224x224");
  std::string name = text.substr(0, eq), dims = text.substr(eq + 1);
  Shape shape;
  size_t pos = 0;
  while (pos <= dims.size()) {
    size_t end = dims.find_first_of("x,", pos);
    if (end == std::string::npos) end = dims.size();
    int64_t v = -1;
    auto [p, ec] = std::from_chars(dims.data() + pos, dims.data() + end, v);
    if (ec != std::errc() || p != dims.data() + end || v < 0)
      throw Error("bad shape '" + text + "': dimensions must be non-negative integers separated by 'x'");
    shape.push_back(v);
    pos = end + 1;
  }
  return {name, shape};
}

ShapeMap resolve_input_shapes(const Graph& g, const ShapeMap& shapes) {
  for (const auto& [name, shape] : shapes)
    if (!g.find_input(name)) {
      std::string known;
      for (const auto& in : g.inputs) known += (known.empty() ? "" : ", ") + in.name;
      throw Error(g.path + ": the model has no input named '" + name + "' (inputs: " + known + ")");
    }
  ShapeMap out;
  for (const auto& in : g.inputs) {
    if (in.kind != ValueKind::tensor)
      throw Error(g.path + ": input '" + in.name + "' is a " + std::string(value_kind_name(in.kind)) + " (" +
                  std::string(dtype_name(in.dtype)) + "); the CLI, Python and the server take tensor inputs "
                  "(the C++ API's Session::run_values takes sequences and optionals)");
    auto it = shapes.find(in.name);
    if (it != shapes.end()) {
      const Shape& s = it->second;
      if (in.has_shape) {
        if (s.size() != in.dims.size())
          throw Error(g.path + ": input '" + in.name + "' has rank " + std::to_string(in.dims.size()) +
                      ", but shape " + shape_str(s) + " was given");
        for (size_t i = 0; i < s.size(); ++i)
          if (in.dims[i].value >= 0 && in.dims[i].value != s[i])
            throw Error(g.path + ": input '" + in.name + "' has dimension " + std::to_string(i) + " fixed at " +
                        std::to_string(in.dims[i].value) + ", but shape " + shape_str(s) + " was given");
      }
      out[in.name] = s;
      continue;
    }
    Shape s;
    std::string symbolic;
    for (const auto& d : in.dims) {
      if (d.value < 0) symbolic += (symbolic.empty() ? "" : ", ") + d.param;
      s.push_back(d.value);
    }
    if (!in.has_shape)
      throw Error(g.path + ": input '" + in.name + "' declares no shape; give one with --shape " + in.name + "=...");
    if (!symbolic.empty())
      throw Error(g.path + ": input '" + in.name + "' has dynamic dimensions (" + symbolic +
                  "); give its shape with --shape " + in.name + "=...");
    out[in.name] = s;
  }
  return out;
}

namespace {

// Shape and Size depend only on the input's shape, so they fold once shapes are bound.
bool folds_on_shape_alone(const Node& n) { return n.domain.empty() && (n.op_type == kShape || n.op_type == kSize); }

// DequantizeLinear of a constant stays a node here, so passes/fuse_qdq.cpp still sees which
// weights are integers; it folds the ones it does not fuse.
bool folds_later(const Node& n) { return n.domain.empty() && n.op_type == kDequantizeLinear; }

int64_t value_bytes(const ValueInfo& v) { return numel(v.shape) * static_cast<int64_t>(dtype_size(v.dtype)); }

// An If whose condition is now a constant (shape checks such as Size(Shape(x)) == 2 fold
// once shapes are bound) is replaced by the nodes of the branch it takes, and an Identity per
// output: the model stays one TileGraph. Returns false, leaving the node, when the condition
// is not constant or the branch's names would collide with the graph's.
bool inline_constant_if(Graph& g, size_t at) {
  const Node& node = g.nodes[at];
  if (!node.domain.empty() || node.op_type != kIf || node.inputs.empty()) return false;
  auto cond = g.initializers.find(node.inputs[0]);
  if (cond == g.initializers.end() || cond->second.dtype() != DType::boolean || cond->second.numel() != 1) return false;
  check_control_flow(node);
  const Graph& branch = node.attr_graph(cond->second.data<bool>()[0] ? "then_branch" : "else_branch");
  std::set<std::string> taken;
  for (const auto& [name, v] : g.values) taken.insert(name);
  for (const Node& n : g.nodes) taken.insert(n.outputs.begin(), n.outputs.end());
  for (const auto& [name, t] : branch.initializers)
    if (taken.count(name)) return false;
  for (const Node& n : branch.nodes)
    for (const auto& name : n.outputs)
      if (!name.empty() && taken.count(name)) return false;
  std::vector<Node> nodes = branch.nodes;
  for (size_t k = 0; k < node.outputs.size(); ++k) {
    if (node.outputs[k].empty()) continue;
    Node id;
    id.name = node.name + "/output" + std::to_string(k);
    id.op_type = kIdentity;
    id.opset = node.opset;
    id.inputs = {branch.outputs[k].name};
    id.outputs = {node.outputs[k]};
    nodes.push_back(std::move(id));
  }
  for (const auto& [name, t] : branch.initializers) {
    g.initializers[name] = t;
    g.values[name] = ValueInfo{t.dtype(), t.shape(), nullptr, true};
  }
  g.nodes.erase(g.nodes.begin() + static_cast<std::ptrdiff_t>(at));
  g.nodes.insert(g.nodes.begin() + static_cast<std::ptrdiff_t>(at), nodes.begin(), nodes.end());
  return true;
}

}  // namespace

void bind_shapes(Graph& g, const ShapeMap& shapes, const Limits& limits) {
  for (const auto* decls : {&g.inputs, &g.outputs})
    for (const ValueDecl& d : *decls)
      if (d.kind != ValueKind::tensor)
        throw DataDependentShape(g.path + ": '" + d.name + "' is a " + std::string(value_kind_name(d.kind)) +
                                 ": what it holds is known only when the graph runs");
  ShapeMap resolved = resolve_input_shapes(g, shapes);
  g.values.clear();
  g.bound_inputs = resolved;
  int64_t declared = 0;
  for (const auto& [name, t] : g.initializers)
    charge_memory(declared, static_cast<int64_t>(t.bytes()), limits, g.path + ": initializer '" + name + "'");
  for (const auto& in : g.inputs) {
    if (in.dtype == DType::undefined || in.dtype == DType::string)
      throw Unsupported(g.path + ": input '" + in.name + "' has dtype " + std::string(dtype_name(in.dtype)) +
                  ", which grove does not support");
    g.values[in.name] = ValueInfo{in.dtype, resolved[in.name], nullptr, true};
    const std::string what = g.path + ": input '" + in.name + "'";
    int64_t bytes = 0;
    try {
      bytes = value_bytes(g.values[in.name]);
    } catch (const Error& e) {
      throw e.prefixed(what + ": ");
    }
    charge_memory(declared, bytes, limits, what);
  }
  for (auto& [name, t] : g.initializers) g.values[name] = ValueInfo{t.dtype(), t.shape(), nullptr, true};

  std::vector<Node> kept;
  for (size_t at = 0; at < g.nodes.size(); ++at) {
    try {
      // The branch's nodes now stand at `at`: bind them next.
      while (inline_constant_if(g, at)) {}
    } catch (const Error& e) {
      throw e.prefixed(g.path + ": ");
    }
    if (at >= g.nodes.size()) break;
    Node& node = g.nodes[at];
    std::vector<ValueInfo> in;
    bool all_constant = true;
    for (const auto& name : node.inputs) {
      if (name.empty()) {
        in.push_back(ValueInfo{DType::undefined, {}, nullptr, false});
        continue;
      }
      auto it = g.values.find(name);
      if (it == g.values.end())
        throw Error(g.path + ": " + node.describe() + ": input '" + name + "' is not produced by any node");
      ValueInfo info = it->second;
      auto init = g.initializers.find(name);
      if (init != g.initializers.end()) info.data = &init->second;
      else all_constant = false;
      in.push_back(info);
    }
    std::vector<ValueInfo> out;
    try {
      out = infer_node(node, in);
      // Charged before anything is folded or allocated: an output the limit cannot hold is
      // an error here, not an allocation.
      for (const ValueInfo& v : out)
        charge_memory(declared, v.present ? value_bytes(v) : 0, limits, node.describe());
    } catch (const Error& e) {
      throw e.prefixed(g.path + ": ");
    }
    if ((all_constant && !folds_later(node)) || folds_on_shape_alone(node)) {
      std::vector<Tensor> inputs_for_shape;  // Shape/Size read only shapes: stand-in zero tensors
      inputs_for_shape.reserve(in.size());   // no reallocation: ptrs point into it
      std::vector<const Tensor*> ptrs;
      for (size_t i = 0; i < in.size(); ++i) {
        if (!in[i].present) { ptrs.push_back(nullptr); continue; }
        if (in[i].data) { ptrs.push_back(in[i].data); continue; }
        inputs_for_shape.emplace_back(in[i].dtype, in[i].shape);
        ptrs.push_back(&inputs_for_shape.back());
      }
      std::vector<Tensor> results;
      try {
        results = evaluate_node(node, ptrs);
      } catch (const Error& e) {
        throw e.prefixed(g.path + ": ");
      }
      for (size_t i = 0; i < node.outputs.size(); ++i) {
        if (node.outputs[i].empty()) continue;
        Tensor& t = g.initializers[node.outputs[i]] = std::move(results[i]);
        g.values[node.outputs[i]] = ValueInfo{t.dtype(), t.shape(), nullptr, true};
      }
      continue;
    }
    for (size_t i = 0; i < node.outputs.size(); ++i)
      if (!node.outputs[i].empty()) g.values[node.outputs[i]] = out[i];
    kept.push_back(std::move(node));
  }
  g.nodes = std::move(kept);
  g.declared_bytes = declared;
  for (const auto& o : g.outputs)
    if (!g.values.count(o.name)) throw Error(g.path + ": graph output '" + o.name + "' is not produced by any node");
}

}  // namespace grove
