// check_session (grove/check.h): the optimized plan against the reference executor on the
// graph as imported. On a mismatch a binary search over the imported nodes' values, each
// exposed as an extra graph output in turn, finds the first one the tile runtime gets wrong:
// exposing a value keeps it from being fused away, so the probe sees what the plan computed
// for it, and a value wrong upstream stays wrong downstream, which the search relies on.
#include "grove/check.h"

#include <algorithm>
#include <cmath>

#include "passes/bind.h"
#include "runtime/reference_executor.h"
#include "runtime/session.h"

namespace grove {
namespace {

OutputCheck distance(const std::string& name, const Tensor& got, const Tensor& want, double tolerance) {
  OutputCheck d{name};
  if (got.shape() != want.shape()) {
    d.shape_differs = true, d.error = INFINITY, d.agrees = false;
    return d;
  }
  const std::vector<double> g = got.to_f64(), w = want.to_f64();
  const DType t = want.dtype();
  const bool floats = t == DType::f32 || t == DType::f64 || t == DType::f16 || t == DType::bf16;
  double worst = 0;
  int64_t differing = 0;
  for (size_t i = 0; i < w.size(); ++i) {
    if (std::isfinite(w[i])) d.largest = std::max(d.largest, std::fabs(w[i]));
    if (std::isnan(w[i]) != std::isnan(g[i]) || (std::isinf(w[i]) && g[i] != w[i])) {
      worst = INFINITY, ++differing;
      continue;
    }
    if (std::isnan(w[i]) || std::isinf(w[i])) continue;
    worst = std::max(worst, std::fabs(g[i] - w[i]));
    differing += g[i] != w[i];
  }
  if (floats) d.error = worst == 0 ? 0 : worst / std::max(d.largest, 1e-30);
  else d.error = static_cast<double>(differing) / static_cast<double>(std::max<size_t>(w.size(), 1));
  d.agrees = d.error <= tolerance;
  return d;
}

bool is_output(const Graph& g, const std::string& name) {
  return std::any_of(g.outputs.begin(), g.outputs.end(), [&](const ValueDecl& d) { return d.name == name; });
}

// A value as a graph output; its dtype from `bound` (the imported graph with shapes bound).
ValueDecl output_decl(const Graph& bound, const std::string& name) {
  auto it = bound.values.find(name);
  return ValueDecl{name, it == bound.values.end() ? DType::f32 : it->second.dtype, {}, false, ValueKind::tensor};
}

std::string bracket(const Shape& s) {
  std::string text = "[";
  for (size_t i = 0; i < s.size(); ++i) text += (i ? ", " : "") + std::to_string(s[i]);
  return text + "]";
}

struct Prober {
  Session& session;
  const Graph& imported;
  const Graph& bound;
  const TensorMap& inputs;
  ShapeMap shapes;
  double tolerance;

  struct Probe {
    OutputCheck d;
    std::string planned_by;
  };
  // The imported graph with `value` among its outputs, through the tile runtime and the
  // reference; and the node of that plan which writes it.
  Probe probe(const std::string& value) const {
    Graph g = imported;
    if (!is_output(g, value)) g.outputs.push_back(output_decl(bound, value));
    const Limits& limits = session.model().limits();
    const TensorMap want = run_reference(g, inputs, limits);
    Session exposed = make_session(session.engine(), model_from_graph(g, shapes, limits), session.options(),
                                   session_debug(session));
    const TensorMap got = exposed.run(inputs);
    Probe p{distance(value, got.at(value), want.at(value), tolerance), ""};
    if (auto plan = plan_for(exposed, shapes))
      for (const Node& n : plan->graph.nodes)
        if (std::find(n.outputs.begin(), n.outputs.end(), value) != n.outputs.end())
          p.planned_by = n.describe() + (n.domain.empty() ? "" : " in domain " + n.domain);
    return p;
  }
};

}  // namespace

CheckReport check_session(Session& session, const TensorMap& inputs, double tolerance) {
  const Graph& imported = imported_graph(session.model());
  const Limits& limits = session.model().limits();
  ShapeMap shapes;
  for (const auto& [name, t] : inputs) shapes[name] = t.shape();
  CheckReport report;
  const TensorMap want = run_reference(imported, inputs, limits);
  const TensorMap got = session.run(inputs);
  for (const ValueDecl& decl : imported.outputs) {
    report.outputs.push_back(distance(decl.name, got.at(decl.name), want.at(decl.name), tolerance));
    report.agrees &= report.outputs.back().agrees;
  }
  if (report.agrees) return report;

  Graph bound = imported;
  bind_shapes(bound, shapes, limits);
  // The values the imported nodes make, in node order, that the reference computes as tensors.
  Graph all = imported;
  std::vector<const Node*> producers;
  std::vector<std::string> values;
  for (const Node& n : imported.nodes)
    for (const std::string& out : n.outputs) {
      if (out.empty() || !bound.values.count(out)) continue;
      if (!is_output(all, out)) all.outputs.push_back(output_decl(bound, out));
      producers.push_back(&n), values.push_back(out);
    }
  const TensorMap every = run_reference(all, inputs, limits);
  std::vector<size_t> order;
  for (size_t i = 0; i < values.size(); ++i)
    if (every.count(values[i])) order.push_back(i);
  report.values_searched = static_cast<int>(order.size());
  if (order.empty()) return report;

  const Prober prober{session, imported, bound, inputs, shapes, tolerance};
  size_t lo = 0, hi = order.size() - 1;
  while (lo < hi) {
    const size_t mid = lo + (hi - lo) / 2;
    ++report.probes;
    if (!prober.probe(values[order[mid]]).d.agrees) hi = mid;
    else lo = mid + 1;
  }
  const size_t at = order[lo];
  const Prober::Probe p = prober.probe(values[at]);
  ++report.probes;
  if (p.d.agrees) return report;  // no single value differs when exposed
  const Node& n = *producers[at];
  report.value = values[at];
  report.value_error = p.d.error, report.value_largest = p.d.largest;
  report.node = n.name, report.op = n.op_type, report.domain = n.domain;
  report.planned_by = p.planned_by;
  for (const std::string& in : n.inputs) {
    if (in.empty()) report.input_shapes.push_back("-");
    else if (every.count(in)) report.input_shapes.push_back(bracket(every.at(in).shape()));
    else if (inputs.count(in)) report.input_shapes.push_back(bracket(inputs.at(in).shape()));
    else if (imported.initializers.count(in)) report.input_shapes.push_back(bracket(imported.initializers.at(in).shape()) + " (initializer)");
    else report.input_shapes.push_back("?");
  }
  return report;
}

}  // namespace grove
