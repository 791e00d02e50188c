#include "runtime/segmented_graph.h"

#include <mutex>
#include <set>

#include "ops/control_flow/control_flow.h"
#include "ops/op_names.h"
#include "ops/control_flow/sequence.h"
#include "runtime/model.h"
#include "runtime/session.h"

namespace grove {

// A graph of its own (a segment, or a subgraph with its outer-scope reads as inputs) and
// the Session that plans and runs it, made on the first run, when its inputs' dtypes are known.
struct SegmentedGraph::Part {
  Graph graph;                       // inputs are declared by the first run
  std::vector<ValueDecl> formal;     // inputs the caller hands over (a subgraph's parameters)
  std::vector<std::string> reads;    // inputs read by name from the enclosing graph's values
  bool is_segment = false;           // tensors only: sequences and optionals stay between segments
  std::mutex mutex;                  // guards making the session
  std::unique_ptr<Session> session;

  // `inputs` holds every name of `formal` and `reads`.
  // `held_outside`: what the runs around this one hold (RunBody in control_flow.h).
  ValueMap run(Engine& engine, const SessionOptions& options, const SessionDebugOptions& debug, const Limits& limits,
               const ValueMap& inputs, RunStats& stats, const CancelToken& cancel, int64_t held_outside) {
    if (is_segment) refuse_values(inputs);
    Session* s = nullptr;
    {
      std::lock_guard<std::mutex> lock(mutex);
      if (!session) {
        // Shapes may change from run to run (a Loop's growing state): tensor inputs are
        // declared shapeless and bound per run through the Session's plan cache. A parameter
        // keeps the kind its subgraph declares (an optional may be empty on one run and hold
        // a sequence on the next); the rest take the kind of what the first run gives.
        Graph g = graph;
        auto declare = [&](const std::string& name, ValueKind declared) {
          const Value& v = inputs.at(name);
          ValueDecl d{name, v.is_sequence() ? v.element_dtype() : v.is_tensor() ? v.tensor().dtype() : DType::undefined};
          d.kind = declared != ValueKind::tensor ? declared
                   : v.is_sequence()            ? ValueKind::sequence
                   : v.is_none()                ? ValueKind::optional_tensor
                                                : ValueKind::tensor;
          if (declared != ValueKind::tensor) d.dtype = DType::undefined;  // checked by the subgraph's own nodes
          g.inputs.push_back(d);
        };
        for (const ValueDecl& f : formal) declare(f.name, f.kind);
        for (const auto& name : reads) declare(name, ValueKind::tensor);
        session =
            std::make_unique<Session>(make_session(engine, model_from_graph(std::move(g), {}, limits), options, debug));
      }
      s = session.get();
    }
    RunStats own;
    ValueMap out = run_values_within(*s, inputs, &own, cancel, held_outside);
    stats.segment_runs += std::max<int64_t>(1, own.segment_runs);
    stats.peak_activation_bytes = std::max(stats.peak_activation_bytes, own.peak_activation_bytes);
    return out;
  }

  // A segment's ops take tensors: a sequence or an empty optional read by one of them is an
  // Error naming that node.
  void refuse_values(const ValueMap& inputs) const {
    for (const auto& [name, v] : inputs) {
      if (v.is_tensor()) continue;
      for (const Node& n : graph.nodes)
        for (const auto& read : n.inputs)
          if (read == name)
            throw Error(graph.path + ": " + n.describe() + ": input '" + name + "' is " + v.describe() +
                        "; the op takes tensors");
      throw Error(graph.path + ": value '" + name + "' is " + v.describe() + ", where a tensor is needed");
    }
  }
};

struct SegmentedGraph::Step {
  std::unique_ptr<Part> segment;                           // a segment, or
  const Node* control = nullptr;                           // a node run between segments and
  std::map<const Graph*, std::unique_ptr<Part>> bodies;    // its subgraphs (control flow)
  std::vector<std::string> last_reads;                     // values no later step reads
};

namespace {

// Names a graph's nodes and outputs read that the graph does not make itself.
std::set<std::string> names_read_from_outside(const Graph& g, const std::vector<const Node*>& nodes) {
  std::set<std::string> made, outside;
  for (const auto& in : g.inputs) made.insert(in.name);
  for (const Node* n : nodes) {
    for (const auto* names : {&n->inputs, &n->captures})
      for (const auto& name : *names)
        if (!name.empty() && !made.count(name)) outside.insert(name);
    made.insert(n->outputs.begin(), n->outputs.end());
  }
  for (const auto& o : g.outputs)
    if (!made.count(o.name)) outside.insert(o.name);
  return outside;
}

// Names that may hold a sequence or an optional when the graph runs: inputs so declared,
// what sequence ops make, Identities of such names, and control-flow outputs whose subgraph
// declares them so (or, for a Loop, whose carried input may be one). Nodes reading them as
// values must run between segments; a segment reading one must get a tensor at run time.
std::set<std::string> names_maybe_values(const Graph& g) {
  std::set<std::string> maybe;
  for (const ValueDecl& d : g.inputs)
    if (d.kind != ValueKind::tensor) maybe.insert(d.name);
  for (const Node& n : g.nodes) {
    const bool passes_value = n.domain.empty() && n.op_type == kIdentity && !n.inputs.empty() && maybe.count(n.inputs[0]);
    for (size_t k = 0; k < n.outputs.size(); ++k) {
      bool value = is_sequence_op(n) || passes_value;
      if (is_control_flow(n)) {
        for (const auto& [key, a] : n.attrs) {
          if (!a.g) continue;
          // A Loop's body outputs start with the condition; SequenceMap's are all sequences.
          const size_t at = n.op_type == kLoop ? k + 1 : k;
          if (n.op_type == kSequenceMap || (at < a.g->outputs.size() && a.g->outputs[at].kind != ValueKind::tensor))
            value = true;
        }
        if (n.op_type == kLoop && k + 2 < n.inputs.size() && maybe.count(n.inputs[k + 2])) value = true;
      }
      if (value && !n.outputs[k].empty()) maybe.insert(n.outputs[k]);
    }
  }
  return maybe;
}

}  // namespace

SegmentedGraph::SegmentedGraph(const Graph& graph, Engine& engine, const SessionOptions& options,
                               const SessionDebugOptions& debug, const Limits& limits)
    : graph_(graph), engine_(engine), options_(options), debug_(debug), limits_(limits) {
  // A part reads constants of this graph as its own initializers (so its binding can fold
  // them) and everything else from outside as inputs.
  auto split_reads = [&](Part& part, const std::set<std::string>& outside) {
    for (const auto& name : outside) {
      if (part.graph.initializers.count(name)) continue;
      auto c = graph.initializers.find(name);
      if (c != graph.initializers.end()) part.graph.initializers[name] = c->second;
      else part.reads.push_back(name);
    }
  };

  const std::set<std::string> maybe_values = names_maybe_values(graph);
  auto runs_between_segments = [&](const Node& n) {
    if (is_control_flow(n) || is_sequence_op(n)) return true;
    return n.domain.empty() && n.op_type == kIdentity && !n.inputs.empty() && maybe_values.count(n.inputs[0]) != 0;
  };
  std::vector<const Node*> pending;
  auto close_segment = [&] {
    if (pending.empty()) return;
    auto step = std::make_unique<Step>();
    step->segment = std::make_unique<Part>();
    step->segment->is_segment = true;
    Graph& seg = step->segment->graph;
    seg.path = graph.path;
    seg.name = graph.name + "/segment" + std::to_string(steps_.size());
    seg.opsets = graph.opsets;
    for (const Node* n : pending) seg.nodes.push_back(*n);
    split_reads(*step->segment, names_read_from_outside(seg, pending));
    steps_.push_back(std::move(step));
    pending.clear();
  };
  for (const Node& node : graph.nodes) {
    if (!runs_between_segments(node)) {
      pending.push_back(&node);
      continue;
    }
    close_segment();
    if (is_control_flow(node)) check_control_flow(node);
    auto step = std::make_unique<Step>();
    step->control = &node;
    for (const auto& [key, a] : node.attrs) {
      if (!a.g) continue;
      auto part = std::make_unique<Part>();
      part->graph = *a.g;
      part->graph.inputs.clear();  // declared by the first run, parameters first
      part->formal = a.g->inputs;
      std::vector<const Node*> nodes;
      for (const Node& n : a.g->nodes) nodes.push_back(&n);
      split_reads(*part, names_read_from_outside(*a.g, nodes));
      step->bodies[a.g.get()] = std::move(part);
    }
    steps_.push_back(std::move(step));
  }
  close_segment();

  // A segment's outputs: what later steps or the graph's outputs read of what it makes.
  // Walking backwards, `needed` holds every name read after the current step.
  std::set<std::string> needed;
  for (const auto& o : graph.outputs) needed.insert(o.name);
  for (size_t k = steps_.size(); k-- > 0;) {
    Step& step = *steps_[k];
    std::vector<std::string> reads;
    if (step.control) {
      reads = step.control->inputs;
      reads.insert(reads.end(), step.control->captures.begin(), step.control->captures.end());
    } else {
      Graph& seg = step.segment->graph;
      std::set<std::string> outputs;
      for (const Node& n : seg.nodes)
        for (const auto& name : n.outputs)
          if (!name.empty() && needed.count(name)) outputs.insert(name);
      for (const auto& name : outputs) seg.outputs.push_back(ValueDecl{name, DType::undefined, {}, false});
      reads = step.segment->reads;
    }
    for (const auto& name : reads)
      if (!name.empty() && needed.insert(name).second) step.last_reads.push_back(name);
  }
  // A segment none of whose values is read later does nothing a caller can see.
  std::erase_if(steps_, [](const std::unique_ptr<Step>& s) { return s->segment && s->segment->graph.outputs.empty(); });
}

SegmentedGraph::~SegmentedGraph() = default;

size_t SegmentedGraph::segment_count() const {
  size_t n = 0;
  for (const auto& s : steps_) n += s->segment ? 1 : 0;
  return n;
}

size_t SegmentedGraph::control_count() const { return steps_.size() - segment_count(); }

namespace {

int64_t bytes_of(const ValueMap& values) {
  int64_t bytes = 0;
  for (const auto& [name, v] : values) bytes += static_cast<int64_t>(v.bytes());
  return bytes;
}

}  // namespace

ValueMap SegmentedGraph::run(const ValueMap& inputs, RunStats* stats, const CancelToken& cancel, int64_t held_outside) {
  RunStats counted;
  ValueMap values = inputs;
  auto find = [&](const std::string& name) -> Value {
    auto it = values.find(name);
    if (it != values.end()) return it->second;
    auto c = graph_.initializers.find(name);
    if (c != graph_.initializers.end()) return c->second;
    throw Error(graph_.path + ": value '" + name + "' is used before it is computed");
  };
  for (const auto& step : steps_) {
    cancel.throw_if_stopped();
    // What the run holds across this step, and the most the step adds to it.
    const int64_t held = bytes_of(values);
    RunStats own;
    if (step->control) {
      run_control(*step, values, own, cancel, held_outside);
    } else {
      ValueMap in;
      for (const auto& name : step->segment->reads) in[name] = find(name);
      for (auto& [name, v] : step->segment->run(engine_, options_, debug_, limits_, in, own, cancel, held_outside))
        values[name] = std::move(v);
    }
    counted.segment_runs += own.segment_runs;
    counted.peak_activation_bytes =
        std::max({counted.peak_activation_bytes, held + own.peak_activation_bytes, bytes_of(values)});
    for (const auto& name : step->last_reads) values.erase(name);
  }
  ValueMap result;
  for (const auto& o : graph_.outputs) result[o.name] = find(o.name);
  if (stats) {
    stats->segment_runs += counted.segment_runs;
    stats->peak_activation_bytes = std::max(stats->peak_activation_bytes, counted.peak_activation_bytes);
  }
  return result;
}

void SegmentedGraph::run_control(Step& step, ValueMap& values, RunStats& stats, const CancelToken& cancel,
                                 int64_t held_outside) {
  const Node& node = *step.control;
  auto find = [&](const std::string& name) -> Value {
    auto it = values.find(name);
    if (it != values.end()) return it->second;
    auto c = graph_.initializers.find(name);
    if (c != graph_.initializers.end()) return c->second;
    throw Error(graph_.path + ": " + node.describe() + ": value '" + name + "' is used before it is computed");
  };
  const HeldInputs held = hold_inputs(node, find);
  const std::vector<const Value*>& in = held.pointers;
  std::vector<Value> out;
  try {
    if (!is_control_flow(node)) {
      out = run_sequence_op(node, in);
    } else {
      // What the run holds while the node collects its outputs: the values still to be read,
      // the graph's constants (an upper bound: values may share buffers) and what the runs
      // around this graph hold (a Loop's body inside another Loop).
      int64_t held_bytes = held_outside;
      for (const auto& [name, v] : values) held_bytes += static_cast<int64_t>(v.bytes());
      for (const auto& [name, t] : graph_.initializers) held_bytes += static_cast<int64_t>(t.bytes());
      out = run_control_flow(node, in, [&](const Graph& body, std::vector<Value> formal, int64_t held_around_body) {
        // Before every subgraph run: an endless Loop ends at the token's deadline, not only at
        // max_loop_iterations.
        cancel.throw_if_stopped();
        Part& part = *step.bodies.at(&body);
        ValueMap body_inputs;
        for (size_t k = 0; k < formal.size(); ++k) body_inputs[part.formal[k].name] = std::move(formal[k]);
        for (const auto& name : part.reads) body_inputs[name] = find(name);
        ValueMap body_outputs = part.run(engine_, options_, debug_, limits_, body_inputs, stats, cancel, held_around_body);
        std::vector<Value> result;
        for (const auto& o : body.outputs) result.push_back(body_outputs.at(o.name));
        return result;
      }, limits_, held_bytes);
    }
  } catch (const Error& e) {
    if (std::string(e.what()).rfind(graph_.path, 0) == 0) throw;
    throw e.prefixed(graph_.path + ": ");
  }
  for (size_t k = 0; k < node.outputs.size() && k < out.size(); ++k)
    if (!node.outputs[k].empty()) values[node.outputs[k]] = std::move(out[k]);
}

}  // namespace grove
