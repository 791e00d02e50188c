#include "ops/control_flow/control_flow.h"

#include <algorithm>
#include <cstring>
#include <limits>

#include "ops/op.h"
#include "ops/op_util.h"
#include "ops/control_flow/sequence.h"

namespace grove {
namespace {

std::string count_str(size_t n, const char* what) { return std::to_string(n) + " " + what + (n == 1 ? "" : "s"); }

// Element `index` of `t` along `axis`, with that axis removed.
Tensor slice_along(const Tensor& t, int64_t axis, int64_t index) {
  const Shape& s = t.shape();
  int64_t outer = 1, inner = static_cast<int64_t>(dtype_size(t.dtype()));
  for (int64_t d = 0; d < axis; ++d) outer *= s[static_cast<size_t>(d)];
  for (size_t d = static_cast<size_t>(axis) + 1; d < s.size(); ++d) inner *= s[d];
  Shape out_shape = s;
  out_shape.erase(out_shape.begin() + axis);
  Tensor out(t.dtype(), out_shape);
  const int64_t n = s[static_cast<size_t>(axis)];
  for (int64_t o = 0; o < outer; ++o)
    std::memcpy(out.raw() + o * inner, t.raw() + (o * n + index) * inner, static_cast<size_t>(inner));
  return out;
}

// Equally shaped `parts` stacked along a new `axis` of the result (part k at index k).
Tensor stack_along(const std::vector<Tensor>& parts, int64_t axis) {
  const Tensor& first = parts.front();
  for (const Tensor& p : parts)
    if (p.shape() != first.shape() || p.dtype() != first.dtype())
      throw Error("scan output changes from " + shape_str(first.shape()) + " " + std::string(dtype_name(first.dtype())) + " to " +
                  shape_str(p.shape()) + " " + std::string(dtype_name(p.dtype())) + " between iterations");
  const Shape& s = first.shape();
  int64_t outer = 1, inner = static_cast<int64_t>(dtype_size(first.dtype()));
  for (int64_t d = 0; d < axis; ++d) outer *= s[static_cast<size_t>(d)];
  for (size_t d = static_cast<size_t>(axis); d < s.size(); ++d) inner *= s[d];
  Shape out_shape = s;
  const int64_t n = static_cast<int64_t>(parts.size());
  out_shape.insert(out_shape.begin() + axis, n);
  Tensor out(first.dtype(), out_shape);
  for (int64_t k = 0; k < n; ++k)
    for (int64_t o = 0; o < outer; ++o)
      std::memcpy(out.raw() + (o * n + k) * inner, parts[static_cast<size_t>(k)].raw() + o * inner,
                  static_cast<size_t>(inner));
  return out;
}

// A scan output of zero iterations: shape [0] followed by the body's declared element shape
// where it is static.
Tensor empty_stack(const ValueDecl& decl) {
  Shape shape{0};
  for (const Dim& d : decl.dims) shape.push_back(d.value < 0 ? 0 : d.value);
  return Tensor(decl.dtype == DType::undefined ? DType::f32 : decl.dtype, shape);
}

bool read_condition(const Value* v, const char* what) {
  if (!v) throw Error(std::string(what) + " is missing");
  if (!v->is_tensor()) throw Error(std::string(what) + " must be a tensor, got " + v->describe());
  const Tensor* t = &v->tensor();
  if (t->numel() != 1) throw Error(std::string(what) + " must hold one value, it has shape " + shape_str(t->shape()));
  if (t->dtype() == DType::boolean) return t->data<bool>()[0];
  throw Error(std::string(what) + " must be bool, got " + std::string(dtype_name(t->dtype())));
}

// A tensor input of a node that also takes sequences; nullptr when missing.
const Tensor* tensor_or_null(std::span<const Value* const> in, size_t i, const std::string& what) {
  if (i >= in.size() || !in[i]) return nullptr;
  if (!in[i]->is_tensor()) throw Error(what + " must be a tensor, got " + in[i]->describe());
  return &in[i]->tensor();
}

std::vector<Value> run_if(const Node& node, std::span<const Value* const> in, const RunBody& run_body,
                          int64_t held_bytes) {
  const bool cond = read_condition(in.empty() ? nullptr : in[0], "the condition");
  std::vector<Value> out = run_body(node.attr_graph(cond ? "then_branch" : "else_branch"), {}, held_bytes);
  if (out.size() != node.outputs.size())
    throw Error("the branch gave " + count_str(out.size(), "output") + " for the node's " + std::to_string(node.outputs.size()));
  return out;
}

// The per-iteration outputs a Loop, Scan or SequenceMap collects, charged to the run's memory
// limit as they arrive. They grow with the iteration count, which only the model's values decide
// (a trip count near 2^63, a condition that stays true), so binding could not charge them: each
// part is checked here before it is kept, and the stacked result is allocated only once every
// part has passed. `copies` is 2 where the parts are stacked into one new tensor at the end
// (parts and stack are held together for that moment), 1 where they are kept as they are.
class CollectedBytes {
 public:
  CollectedBytes(const Limits& limits, int64_t held_bytes, int copies)
      : limit_(limits.memory_limit()), held_(std::max<int64_t>(held_bytes, 0)), copies_(copies) {}

  void add(const Tensor& part, int64_t iteration) {
    const int64_t bytes = static_cast<int64_t>(part.bytes());
    // In long double: the sums cannot wrap however large the parts claim to be.
    const long double need = static_cast<long double>(collected_ + bytes) * copies_;
    if (need + static_cast<long double>(held_) > static_cast<long double>(limit_))
      throw Error("its outputs collected over " + std::to_string(iteration + 1) + " iterations need " +
                  std::to_string(static_cast<int64_t>(need)) + " bytes" +
                  (copies_ > 1 ? " (the parts, and as much again to stack them)" : "") + ", with " +
                  std::to_string(held_) + " bytes already held by the run, over the memory limit of " +
                  std::to_string(limit_) + " bytes (raise it with --max-memory or Limits::max_memory)");
    collected_ += bytes;
  }
  // What the run holds outside the body's next run: `held_bytes` and what is collected so far.
  int64_t held_now() const {
    const long double now = static_cast<long double>(held_) + static_cast<long double>(collected_) * copies_;
    return now >= static_cast<long double>(std::numeric_limits<int64_t>::max()) ? std::numeric_limits<int64_t>::max()
                                                                                : static_cast<int64_t>(now);
  }

 private:
  int64_t limit_, held_, copies_;
  int64_t collected_ = 0;
};

std::vector<Value> run_loop(const Node& node, std::span<const Value* const> in, const RunBody& run_body,
                            const Limits& limits, int64_t held_bytes) {
  const int64_t max_iterations = limits.max_loop_iterations;
  const Graph& body = node.attr_graph("body");
  const size_t carried = in.size() - 2;
  const size_t scans = body.outputs.size() - 1 - carried;
  const Tensor* trip = tensor_or_null(in, 0, "the trip count M");
  const Value* cond = in.size() > 1 ? in[1] : nullptr;
  int64_t max_trips = std::numeric_limits<int64_t>::max();
  if (trip) {
    if (trip->numel() != 1) throw Error("the trip count M must hold one value, it has shape " + shape_str(trip->shape()));
    max_trips = trip->to_i64()[0];
    if (max_trips < 0) throw Error("the trip count M is " + std::to_string(max_trips) + "; it must not be negative");
  } else if (!cond) {
    throw Error("has neither a trip count M nor a condition: it would never end");
  }
  bool keep_going = cond ? read_condition(cond, "the condition") : true;
  std::vector<Value> state;
  for (size_t k = 0; k < carried; ++k) {
    if (!in[2 + k]) throw Error("loop-carried input " + std::to_string(k) + " is missing");
    state.push_back(*in[2 + k]);
  }
  std::vector<std::vector<Tensor>> scan_parts(scans);
  CollectedBytes collected(limits, held_bytes, 2);
  for (int64_t i = 0; i < max_trips && keep_going; ++i) {
    if (i == max_iterations)
      throw Error("ran " + std::to_string(i) + " iterations, the limit (Limits::max_loop_iterations, --max-loop-iterations)");
    std::vector<Value> formal{Tensor::scalar<int64_t>(i), Tensor::scalar<bool>(keep_going)};
    formal.insert(formal.end(), state.begin(), state.end());
    std::vector<Value> out = run_body(body, std::move(formal), collected.held_now());
    keep_going = read_condition(&out[0], "the body's condition output");
    for (size_t k = 0; k < carried; ++k) state[k] = std::move(out[1 + k]);
    for (size_t k = 0; k < scans; ++k) {
      if (!out[1 + carried + k].is_tensor())
        throw Error("scan output " + std::to_string(k) + " must be a tensor, got " + out[1 + carried + k].describe());
      collected.add(out[1 + carried + k].tensor(), i);
      scan_parts[k].push_back(out[1 + carried + k].tensor());
    }
  }
  std::vector<Value> result = std::move(state);
  for (size_t k = 0; k < scans; ++k)
    result.push_back(scan_parts[k].empty() ? empty_stack(body.outputs[1 + carried + k])
                                           : stack_along(scan_parts[k], 0));
  result.resize(node.outputs.size());  // trailing outputs the node leaves unnamed are dropped by the caller
  return result;
}

// Scan's per-input or per-output axis or direction attribute; `fallback` when absent.
std::vector<int64_t> per_value(const Node& node, const char* key, size_t count, int64_t fallback) {
  std::vector<int64_t> v = node.attr_ints(key, std::vector<int64_t>(count, fallback));
  if (v.size() != count)
    throw Error("attribute '" + std::string(key) + "' has " + std::to_string(v.size()) + " values for " + std::to_string(count));
  return v;
}

std::vector<Value> run_scan(const Node& node, std::span<const Value* const> in, const RunBody& run_body,
                            const Limits& limits, int64_t held_bytes) {
  const Graph& body = node.attr_graph("body");
  const size_t scan_inputs = static_cast<size_t>(node.attr_int("num_scan_inputs", 0));
  const size_t states = in.size() - scan_inputs;
  const size_t scan_outputs = body.outputs.size() - states;
  const std::vector<int64_t> in_axes = per_value(node, "scan_input_axes", scan_inputs, 0);
  const std::vector<int64_t> in_dirs = per_value(node, "scan_input_directions", scan_inputs, 0);
  const std::vector<int64_t> out_axes = per_value(node, "scan_output_axes", scan_outputs, 0);
  const std::vector<int64_t> out_dirs = per_value(node, "scan_output_directions", scan_outputs, 0);
  int64_t length = -1;
  std::vector<int64_t> axes(scan_inputs);
  for (size_t k = 0; k < scan_inputs; ++k) {
    const Tensor* t = tensor_or_null(in, states + k, "scan input " + std::to_string(k));
    if (!t) throw Error("scan input " + std::to_string(k) + " is missing");
    axes[k] = normalize_axis(node, in_axes[k], t->rank());
    const int64_t n = t->dim(axes[k]);
    if (length >= 0 && n != length)
      throw Error("scan inputs disagree on the sequence length (" + std::to_string(length) + " and " +
                  std::to_string(n) + ")");
    length = n;
  }
  std::vector<Value> state;
  for (size_t k = 0; k < states; ++k) {
    if (!in[k]) throw Error("state input " + std::to_string(k) + " is missing");
    state.push_back(*in[k]);
  }
  std::vector<std::vector<Tensor>> parts(scan_outputs);
  CollectedBytes collected(limits, held_bytes, 2);
  for (int64_t i = 0; i < std::max<int64_t>(length, 0); ++i) {
    std::vector<Value> formal = state;
    for (size_t k = 0; k < scan_inputs; ++k)
      formal.push_back(slice_along(in[states + k]->tensor(), axes[k], in_dirs[k] ? length - 1 - i : i));
    std::vector<Value> out = run_body(body, std::move(formal), collected.held_now());
    for (size_t k = 0; k < states; ++k) state[k] = std::move(out[k]);
    for (size_t k = 0; k < scan_outputs; ++k) {
      if (!out[states + k].is_tensor())
        throw Error("scan output " + std::to_string(k) + " must be a tensor, got " + out[states + k].describe());
      collected.add(out[states + k].tensor(), i);
      parts[k].push_back(out[states + k].tensor());
    }
  }
  std::vector<Value> result = std::move(state);
  for (size_t k = 0; k < scan_outputs; ++k) {
    if (parts[k].empty()) {
      result.push_back(empty_stack(body.outputs[states + k]));
      continue;
    }
    if (out_dirs[k]) std::reverse(parts[k].begin(), parts[k].end());
    result.push_back(stack_along(parts[k], normalize_axis(node, out_axes[k], parts[k].front().rank() + 1)));
  }
  return result;
}

// SequenceMap: the body runs once per position of the first input (a sequence); the other
// inputs give it their item at that position (sequences) or themselves (tensors). Each body
// output is collected into one output sequence.
std::vector<Value> run_sequence_map(const Node& node, std::span<const Value* const> in, const RunBody& run_body,
                                    const Limits& limits, int64_t held_bytes) {
  const Graph& body = node.attr_graph("body");
  if (in.empty() || !in[0] || !in[0]->is_sequence())
    throw Error("input 0 must be a sequence, got " + (in.empty() || !in[0] ? std::string("nothing") : in[0]->describe()));
  const size_t length = in[0]->items().size();
  for (size_t k = 0; k < in.size(); ++k) {
    if (!in[k]) throw Error("input " + std::to_string(k) + " is missing");
    if (in[k]->is_none()) throw Error("input " + std::to_string(k) + " is an empty optional");
    if (in[k]->is_sequence() && in[k]->items().size() != length)
      throw Error("input sequences differ in length (" + std::to_string(length) + " and " +
                  std::to_string(in[k]->items().size()) + ")");
  }
  std::vector<std::vector<Tensor>> outputs(body.outputs.size());
  CollectedBytes collected(limits, held_bytes, 1);  // the items become the sequences, uncopied
  for (size_t i = 0; i < length; ++i) {
    std::vector<Value> formal;
    for (const Value* v : in) formal.push_back(v->is_sequence() ? Value(v->items()[i]) : *v);
    std::vector<Value> out = run_body(body, std::move(formal), collected.held_now());
    for (size_t k = 0; k < outputs.size(); ++k) {
      if (!out[k].is_tensor()) throw Error("body output " + std::to_string(k) + " must be a tensor, got " + out[k].describe());
      collected.add(out[k].tensor(), static_cast<int64_t>(i));
      outputs[k].push_back(out[k].tensor());
    }
  }
  std::vector<Value> result;
  for (size_t k = 0; k < outputs.size(); ++k) {
    const DType element = outputs[k].empty() ? body.outputs[k].dtype : outputs[k].front().dtype();
    result.push_back(Value::sequence(element == DType::undefined ? DType::f32 : element, std::move(outputs[k])));
  }
  return result;
}

void check_counts(const Node& node, const Graph& body, const char* key, size_t inputs, size_t outputs) {
  if (body.inputs.size() != inputs)
    throw Error(node.describe() + ": its " + key + " takes " + count_str(body.inputs.size(), "input") + ", the node gives it " +
                std::to_string(inputs));
  if (body.outputs.size() < outputs)
    throw Error(node.describe() + ": its " + key + " gives " + count_str(body.outputs.size(), "output") + ", the node needs " +
                std::to_string(outputs));
}

// Shapes come from running the subgraph: binding stops here and the graph runs in segments.
void infer_control_flow(const Node& node, std::span<const ValueInfo>, std::span<ValueInfo>) {
  check_control_flow(node);
  throw DataDependentShape("control flow: what runs, and the shapes it makes, are known only when it runs");
}

void reference_control_flow(const Node&, std::span<const Tensor* const>, std::span<Tensor* const>) {
  throw Error("control flow runs through its executor's subgraph callback, not as a plain op");
}

}  // namespace

bool is_control_flow(const Node& node) {
  return node.domain.empty() &&
         (node.op_type == "If" || node.op_type == "Loop" || node.op_type == "Scan" || node.op_type == "SequenceMap");
}

bool needs_segments(const Graph& graph) {
  for (const Node& n : graph.nodes)
    if (is_control_flow(n) || is_sequence_op(n)) return true;
  for (const auto* decls : {&graph.inputs, &graph.outputs})
    for (const ValueDecl& d : *decls)
      if (d.kind != ValueKind::tensor) return true;
  return false;
}

void check_control_flow(const Node& node) {
  if (node.op_type == "If") {
    if (node.inputs.empty() || node.inputs[0].empty()) throw Error(node.describe() + ": has no condition input");
    for (const char* key : {"then_branch", "else_branch"}) {
      const Graph& branch = node.attr_graph(key);
      if (branch.outputs.size() != node.outputs.size())
        throw Error(node.describe() + ": its " + key + " gives " + count_str(branch.outputs.size(), "output") +
                    ", the node has " + std::to_string(node.outputs.size()) + " (both branches must give one per output)");
    }
  } else if (node.op_type == "Loop") {
    if (node.inputs.size() < 2) throw Error(node.describe() + ": needs inputs M and cond (either may be \"\")");
    const size_t carried = node.inputs.size() - 2;
    const Graph& body = node.attr_graph("body");
    check_counts(node, body, "body", 2 + carried, 1 + carried);
    if (node.outputs.size() > body.outputs.size() - 1)
      throw Error(node.describe() + ": has " + std::to_string(node.outputs.size()) + " outputs, its body makes " +
                  std::to_string(body.outputs.size() - 1));
  } else if (node.op_type == "SequenceMap") {
    if (node.inputs.empty() || node.inputs[0].empty()) throw Error(node.describe() + ": has no input sequence");
    const Graph& body = node.attr_graph("body");
    check_counts(node, body, "body", node.inputs.size(), node.outputs.size());
  } else if (node.op_type == "Scan") {
    if (node.opset < 9)
      throw Unsupported(node.describe() + ": Scan before opset 9 (batch axis and sequence_lens) is not supported");
    const int64_t scan_inputs = node.attr_int("num_scan_inputs", -1);
    if (scan_inputs < 1 || static_cast<size_t>(scan_inputs) > node.inputs.size())
      throw Error(node.describe() + ": num_scan_inputs is " + std::to_string(scan_inputs) + " for " +
                  std::to_string(node.inputs.size()) + " inputs");
    const size_t states = node.inputs.size() - static_cast<size_t>(scan_inputs);
    const Graph& body = node.attr_graph("body");
    check_counts(node, body, "body", node.inputs.size(), states);
    if (node.outputs.size() != body.outputs.size())
      throw Error(node.describe() + ": has " + std::to_string(node.outputs.size()) + " outputs, its body makes " +
                  std::to_string(body.outputs.size()));
  }
}

std::vector<Value> run_control_flow(const Node& node, std::span<const Value* const> in, const RunBody& run_body,
                                    const Limits& limits, int64_t held_bytes) {
  try {
    check_control_flow(node);
    if (node.op_type == "If") return run_if(node, in, run_body, held_bytes);
    if (node.op_type == "Loop") return run_loop(node, in, run_body, limits, held_bytes);
    if (node.op_type == "SequenceMap") return run_sequence_map(node, in, run_body, limits, held_bytes);
    return run_scan(node, in, run_body, limits, held_bytes);
  } catch (const Error& e) {
    if (std::string(e.what()).find("node '") != std::string::npos) throw;
    throw e.prefixed(node.describe() + ": ");
  }
}

void register_control_flow_ops(OpRegistry& r) {
  for (const char* op : {"If", "Loop", "Scan", "SequenceMap"}) r.add(op, {infer_control_flow, reference_control_flow});
}

}  // namespace grove
