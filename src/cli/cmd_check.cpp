// grove check: runs a model's optimized plan on the tile runtime and the reference executor
// on the graph as imported (no pass applied), on the same inputs, and prints the largest
// error of each output. On a mismatch it finds the first value, in the imported graph's
// order, whose tile-runtime result leaves the reference's, and names the node that makes it
// and the node of the optimized plan that computes it (a fused or re-laid-out node names the
// pass that made it). What a user runs before trusting grove with a model, and what a bug
// report attaches.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <random>

#include "cli/commands.h"
#include "cli/format.h"
#include "cli/inputs.h"
#include "onnx/import.h"
#include "runtime/reference_executor.h"
#include "runtime/session.h"

namespace grove::cli {
namespace {

bool is_output(const Graph& g, const std::string& name) {
  return std::any_of(g.outputs.begin(), g.outputs.end(), [&](const ValueDecl& d) { return d.name == name; });
}

// A value as a graph output; its dtype from `bound` (the imported graph with shapes bound).
ValueDecl output_decl(const Graph& bound, const std::string& name) {
  auto it = bound.values.find(name);
  return ValueDecl{name, it == bound.values.end() ? DType::f32 : it->second.dtype, {}, false, ValueKind::tensor};
}

// How far `got` is from `want`: max |got - want| over max |want| for floats (NaN where the
// two disagree on NaN), the fraction of differing elements for the rest.
struct Distance {
  double error = 0;
  double largest = 0;  // max |want|
  bool shape_differs = false;
};

Distance distance(const Tensor& got, const Tensor& want) {
  Distance d;
  if (got.shape() != want.shape()) {
    d.shape_differs = true;
    d.error = INFINITY;
    return d;
  }
  const std::vector<double> g = got.to_f64(), w = want.to_f64();
  const bool floats = want.dtype() == DType::f32 || want.dtype() == DType::f64 || want.dtype() == DType::f16 ||
                      want.dtype() == DType::bf16;
  double worst = 0;
  int64_t differing = 0;
  for (size_t i = 0; i < w.size(); ++i) {
    if (std::isfinite(w[i])) d.largest = std::max(d.largest, std::fabs(w[i]));
    if (std::isnan(w[i]) != std::isnan(g[i]) || (std::isinf(w[i]) && g[i] != w[i])) {
      worst = INFINITY;
      ++differing;
      continue;
    }
    if (std::isnan(w[i]) || std::isinf(w[i])) continue;
    worst = std::max(worst, std::fabs(g[i] - w[i]));
    differing += g[i] != w[i];
  }
  d.error = floats ? worst / std::max(d.largest, 1e-30) : static_cast<double>(differing) / std::max<size_t>(w.size(), 1);
  if (floats && worst == 0) d.error = 0;
  return d;
}

struct Checker {
  const CheckOptions& o;
  const Graph& imported;
  const TensorMap& inputs;
  ShapeMap shapes;
  Engine& engine;

  SessionOptions session_options() const {
    return {.schedule = o.schedule == "barrier" ? Schedule::barrier : Schedule::aspen,
            .precision = parse_precision(o.precision),
            .conv_layout = parse_layout(o.layout),
            .tuning = o.tuning};
  }

  const Graph& bound;  // `imported` with shapes bound: the dtype of each value

  // The imported graph with `value` among its outputs.
  Graph exposing(const std::string& value) const {
    Graph g = imported;
    if (!is_output(g, value)) g.outputs.push_back(output_decl(bound, value));
    return g;
  }

  // The tile runtime's and the reference's value, and the node of the plan that computed it.
  struct Probe {
    Distance d;
    std::string planned_by;  // "node 'x' (grove.internal ConvNhwc)"
  };
  Probe probe(const std::string& value) const {
    Graph g = exposing(value);
    const TensorMap want = run_reference(g, inputs, o.limits);
    Session session(engine, Model(g, shapes, o.limits), session_options());
    const TensorMap got = session.run(inputs);
    Probe p{distance(got.at(value), want.at(value)), ""};
    if (auto plan = session.plan_for(shapes))
      for (const Node& n : plan->graph.nodes)
        if (std::find(n.outputs.begin(), n.outputs.end(), value) != n.outputs.end())
          p.planned_by = n.describe() + (n.domain.empty() ? "" : " in domain " + n.domain);
    return p;
  }
};

std::string input_shapes(const Node& n, const TensorMap& values, const TensorMap& inputs, const Graph& g) {
  std::string s;
  for (const std::string& in : n.inputs) {
    if (!s.empty()) s += ", ";
    if (in.empty()) {
      s += "-";
      continue;
    }
    auto it = values.find(in);
    auto input = inputs.find(in);
    auto init = g.initializers.find(in);
    if (it != values.end()) s += bracket_shape(it->second.shape());
    else if (input != inputs.end()) s += bracket_shape(input->second.shape());
    else if (init != g.initializers.end()) s += bracket_shape(init->second.shape()) + " (initializer)";
    else s += "?";
  }
  return s;
}

}  // namespace

int run_check(const CheckOptions& o) {
  Graph imported = load_onnx(o.model, o.limits);
  ShapeMap shapes = parse_shape_options(o.shapes);
  TensorMap inputs = load_input_files(imported, o.inputs, shapes);
  const ShapeMap resolved = resolve_input_shapes(imported, shapes);
  std::mt19937_64 rng(o.seed);
  for (const ValueDecl& decl : imported.inputs)
    if (!inputs.count(decl.name)) inputs[decl.name] = random_tensor(decl.dtype, resolved.at(decl.name), rng);

  Graph bound = imported;
  bind_shapes(bound, resolved, o.limits);
  Engine engine({.threads = o.threads});
  Checker checker{o, imported, inputs, resolved, engine, bound};
  std::printf("model: %s\n", o.model.c_str());
  std::printf("compares: the tile runtime (%s, %d threads, %s) with the reference executor on the graph as imported\n",
              o.precision.c_str(), engine.threads(), o.layout == "nchw" ? "convs as written" : "convs channels-last where planned");
  const TensorMap want = run_reference(imported, inputs, o.limits);
  Session session(engine, Model(imported, resolved, o.limits), checker.session_options());
  const TensorMap got = session.run(inputs);

  bool mismatch = false;
  for (const ValueDecl& decl : imported.outputs) {
    const Distance d = distance(got.at(decl.name), want.at(decl.name));
    const bool bad = !(d.error <= o.tolerance);
    mismatch |= bad;
    if (d.shape_differs)
      std::printf("  %s: shape %s, the reference's %s  MISMATCH\n", decl.name.c_str(),
                  bracket_shape(got.at(decl.name).shape()).c_str(), bracket_shape(want.at(decl.name).shape()).c_str());
    else
      std::printf("  %s: largest error %.3g of its largest value %.3g%s\n", decl.name.c_str(), d.error, d.largest,
                  bad ? "  MISMATCH" : "");
  }
  if (!mismatch) {
    std::printf("agree: every output within %.3g of the reference\n", o.tolerance);
    return 0;
  }

  // The values made by the imported graph's nodes, in its order, and their reference tensors:
  // every one of them is a graph output in one reference run.
  Graph all = imported;
  std::vector<const Node*> producers;
  std::vector<std::string> values;
  for (const Node& n : imported.nodes)
    for (const std::string& out : n.outputs)
      if (!out.empty() && !is_output(all, out) && bound.values.count(out)) {
        all.outputs.push_back(output_decl(bound, out));
        producers.push_back(&n), values.push_back(out);
      }
  for (const Node& n : imported.nodes)
    for (const std::string& out : n.outputs)
      if (!out.empty() && is_output(imported, out)) producers.push_back(&n), values.push_back(out);
  const TensorMap every = run_reference(all, inputs, o.limits);
  // Only tensors the reference made (a sequence or an unused optional output is skipped).
  std::vector<size_t> order;
  for (size_t i = 0; i < values.size(); ++i)
    if (every.count(values[i]) || want.count(values[i])) order.push_back(i);
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) { return producers[a] < producers[b]; });

  // The first value that differs when exposed: a binary search, which assumes a wrong value
  // stays wrong downstream; the value found is probed once more below.
  std::printf("searching for the first value that differs (%zu values; each probe plans and runs the model)\n", order.size());
  if (order.empty()) throw Error(o.model + ": the outputs differ, but no node makes a tensor to compare");
  size_t lo = 0, hi = order.size() - 1;
  int probes = 0;
  while (lo < hi) {
    const size_t mid = lo + (hi - lo) / 2;
    const auto p = checker.probe(values[order[mid]]);
    ++probes;
    if (!(p.d.error <= o.tolerance)) hi = mid;
    else lo = mid + 1;
  }
  const size_t at = order[lo];
  const auto p = checker.probe(values[at]);
  const Node& n = *producers[at];
  if (p.d.error <= o.tolerance) {
    std::printf("no single value differs when exposed as an output: the error needs a fused form that exposing a\n"
                "value undoes; run with --layout nchw or --tuning off to narrow it\n");
    return 3;
  }
  std::printf("first differing value (%d probes): '%s', largest error %.3g of its largest value %.3g\n", probes + 1,
              values[at].c_str(), p.d.error, p.d.largest);
  std::printf("  made by %s%s with inputs %s\n", n.describe().c_str(), n.domain.empty() ? "" : (" in domain " + n.domain).c_str(),
              input_shapes(n, every, inputs, imported).c_str());
  if (!p.planned_by.empty()) std::printf("  computed in the plan by %s\n", p.planned_by.c_str());
  else std::printf("  the plan has no node of that output: a pass folded it into a node that computes a later value\n");
  std::printf("mismatch: grove's tile runtime and its reference disagree beyond %.3g (attach this output to a bug report)\n",
              o.tolerance);
  return 3;
}

}  // namespace grove::cli
