#include "tune/perf_select.h"

#include <algorithm>
#include <cmath>
#include <fstream>
#include <limits>
#include <map>
#include <set>
#include <sstream>

#include "graph/error.h"
#include "ops/op.h"
#include "ops/op_names.h"
#include "passes/flops.h"
#include "tune/csv_fields.h"
#include "tune/layout_links.h"
#include "tune/layout_model.h"
#include "tune/pbqp.h"
#include "tune/record.h"

namespace grove::tune {
namespace {

constexpr const char* kDatasetHeader =
    "machine,threads,node,batch,cin,cout,in_h,in_w,out_h,out_w,kernel_h,kernel_w,stride_h,stride_w,group,primitive,"
    "extent,tiles,us";

}  // namespace

std::vector<ProfileRow> read_profile_csv(const std::string& path) {
  std::ifstream f(path);
  if (!f) throw Error(path + ": cannot open the profile dataset");
  std::string line;
  int line_no = 1;
  if (!std::getline(f, line) || line != kDatasetHeader) throw Error(path + ": line 1 is not the header grove tune --dataset writes");
  std::vector<ProfileRow> rows;
  while (std::getline(f, line)) {
    ++line_no;
    if (line.empty()) continue;
    const std::vector<std::string> v = csv_fields(line);
    auto fail = [&](const std::string& why) { return Error(path + ": line " + std::to_string(line_no) + ": " + why); };
    if (v.size() != 19) throw fail("has " + std::to_string(v.size()) + " fields, not 19");
    auto integer = [&](size_t i) {
      char* end = nullptr;
      const long long x = std::strtoll(v[i].c_str(), &end, 10);
      if (v[i].empty() || *end || x < 0 || x > (int64_t{1} << 40)) throw fail("'" + v[i] + "' is not a size");
      return int64_t(x);
    };
    ProfileRow r;
    r.machine = v[0];
    r.threads = static_cast<int>(std::min<int64_t>(integer(1), 1 << 16));
    r.config = {integer(3), integer(4), integer(5), integer(6), integer(7), integer(8),
                integer(9), integer(10), integer(11), integer(12), integer(13), integer(14)};
    r.primitive = v[15];
    std::istringstream dims(v[16]);
    for (std::string d; std::getline(dims, d, 'x');) {
      char* end = nullptr;
      const long long x = std::strtoll(d.c_str(), &end, 10);
      if (d.empty() || *end || x < 0) throw fail("'" + v[16] + "' is not a tile extent");
      r.extent.push_back(x);
    }
    r.tiles = integer(17);
    char* end = nullptr;
    r.us = std::strtod(v[18].c_str(), &end);
    if (v[18].empty() || *end || !std::isfinite(r.us) || r.us <= 0) throw fail("'" + v[18] + "' is not a time");
    rows.push_back(std::move(r));
  }
  return rows;
}

std::vector<std::string> measured_primitives(const std::vector<ProfileRow>& rows) {
  std::set<std::string> seen;
  for (const ProfileRow& r : rows) seen.insert(r.primitive);
  std::vector<std::string> out;
  for (const std::string& p : model_primitives())
    if (seen.count(p)) out.push_back(p);
  return out;
}

std::vector<PerfSample> samples_from_rows(const std::vector<ProfileRow>& rows, const std::vector<std::string>& primitives) {
  std::map<std::vector<int64_t>, PerfSample> by_key;
  for (const ProfileRow& r : rows) {
    size_t k = 0;
    while (k < primitives.size() && primitives[k] != r.primitive) ++k;
    if (k == primitives.size()) continue;
    const ConvConfig& c = r.config;
    // A channels-last grid is the NCHW grid that cuts the same rows and channels: one sample
    // holds both layouts' times on it.
    const Shape extent = nchw_extent(r.primitive, r.extent);
    std::vector<int64_t> key = {c.batch, c.cin, c.cout, c.in_h, c.in_w, c.out_h, c.out_w, c.kernel_h,
                                c.kernel_w, c.stride_h, c.stride_w, c.group, r.threads, r.tiles};
    key.insert(key.end(), extent.begin(), extent.end());
    PerfSample& s = by_key[key];
    if (s.features.empty()) {
      s.features = conv_features(c, extent, r.tiles, r.threads);
      s.times.assign(primitives.size(), std::numeric_limits<double>::quiet_NaN());
    }
    // A layer repeated in a model (ResNet's blocks) is one configuration: keep the faster
    // measurement, the one less disturbed.
    if (std::isnan(s.times[k]) || r.us < s.times[k]) s.times[k] = r.us;
  }
  std::vector<PerfSample> out;
  for (auto& [key, s] : by_key) out.push_back(std::move(s));
  return out;
}

std::string perf_model_path() {
  const std::string dir = machine_tuning_dir();
  return dir.empty() ? "" : dir + "/conv.perfmodel";
}

std::string layout_model_path() {
  const std::string dir = machine_tuning_dir();
  return dir.empty() ? "" : dir + "/layout.perfmodel";
}

double predicted_cost(double total_us, int64_t tiles, int threads) {
  return total_us / std::max(1, threads) + total_us / double(std::max<int64_t>(tiles, 1));
}

std::vector<std::string> priced_primitives(const PerfModel& model) {
  if (!model.output_names().empty()) return model.output_names();
  // Version 1 files were written when the model priced these two, in this order.
  if (model.outputs() == 2) return {"gemm", "winograd"};
  throw Error("performance model: a version 1 file with " + std::to_string(model.outputs()) +
              " outputs does not say what it prices; train it again (grove tune --fit)");
}

namespace {

// One node of the selection problem: a conv of the graph as written, its choices (the rule's
// first) and the layout each runs in.
// The layout a conv runs in: what its neighbours' Transposes depend on.
using ConvLayoutKind = ValueLayout;

ConvLayoutKind layout_of(const std::string& primitive) {
  if (channels_last_primitive(primitive)) return ConvLayoutKind::channels_last;
  return primitive == "nchwc" ? ConvLayoutKind::blocked : ConvLayoutKind::nchw;
}

ConvLayoutKind layout_of(const Node& node) {
  const OpSpec* spec = node.domain == kGroveDomain ? OpRegistry::builtin().find(node) : nullptr;
  if (!spec) return ConvLayoutKind::nchw;
  if (spec->traits.layout == OpLayout::nchwc) return ConvLayoutKind::blocked;
  return spec->traits.layout == OpLayout::nhwc ? ConvLayoutKind::channels_last : ConvLayoutKind::nchw;
}

struct Vertex {
  size_t node = 0;  // in the plan as written
  bool tunable = false;
  std::vector<ConvCandidate> choices;
  std::vector<ConvLayoutKind> layout;
  std::vector<double> cost;
};

}  // namespace

std::vector<NodeChoice> predicted_choices(const Graph& graph, const PlanOptions& options, const PerfModel& model,
                                          double keep_share, double* plan_gain, const PerfModel* layout_model) {
  if (plan_gain) *plan_gain = 0;
  PlanOptions structure = options;
  structure.debug.prepare_weights = false;
  structure.choices.clear();
  // The convs as the dense plan has them: feature pruning runs after the choices (plan.cpp)
  // and keeps a chosen Winograd conv whole where that is faster than pruning it.
  structure.feature_pruning.clear();
  const std::shared_ptr<const Plan> rules_plan = make_plan(graph, structure);
  PlanOptions nchw = structure;
  nchw.conv_layout = ConvLayout::nchw;
  const std::shared_ptr<const Plan> written_plan = make_plan(graph, nchw);
  const Plan &rules = *rules_plan, &as_written = *written_plan;
  const std::vector<std::string> priced = priced_primitives(model);
  for (const std::string& p : priced)
    if (!std::count(model_primitives().begin(), model_primitives().end(), p))
      throw Error("performance model: it prices '" + p + "', which this grove does not have");
  const int threads = rules.options.threads;
  auto output_of = [&](const std::string& primitive) {
    return static_cast<size_t>(std::find(priced.begin(), priced.end(), primitive) - priced.begin());
  };
  auto error_of = [&](const std::string& primitive) {
    const auto& e = model.output_errors();
    return e.size() == priced.size() ? e[output_of(primitive)] : 0.0;
  };
  auto price = [&](const ConvConfig& c, const ConvCandidate& k) {
    const std::vector<double> t = model.predict(conv_features(c, nchw_extent(k.primitive, k.extent), k.tiles, threads));
    return t.at(output_of(k.primitive));
  };
  std::map<std::string, size_t> in_rules;
  for (size_t n = 0; n < rules.graph.nodes.size(); ++n)
    if (!rules.graph.nodes[n].name.empty()) in_rules[rules.graph.nodes[n].name] = n;

  // The vertices: every conv of the graph as written that the rules' plan still has by name.
  // One the model cannot price (depthwise, the direct kernel, a conv fused with its neighbour)
  // keeps the rule, in the rule's layout.
  std::vector<Vertex> vertices;
  std::vector<int> vertex_of(as_written.graph.nodes.size(), -1);
  double flops = 0, rule_us = 0;  // of the priced rule choices: the machine's rate on this model
  for (size_t n = 0; n < as_written.graph.nodes.size(); ++n) {
    const Node& node = as_written.graph.nodes[n];
    if (node.op_type != kConv || !node.domain.empty()) continue;
    auto r = in_rules.find(node.name);
    if (r == in_rules.end()) continue;
    const Node& ruled = rules.graph.nodes[r->second];
    const ConvLayoutKind ruled_layout = layout_of(ruled);
    Vertex v;
    v.node = n;
    ConvConfig c;
    if ((ruled.op_type == kConv || ruled.op_type == kConvNhwc) && tunable_conv(as_written, n, &c)) {
      const ConvCandidate rule = rule_choice(rules, r->second);
      if (std::count(priced.begin(), priced.end(), rule.primitive)) {
        v.tunable = true;
        v.choices.push_back(rule);
        v.layout.push_back(ruled_layout);
        const double us = price(c, rule);
        v.cost.push_back(predicted_cost(us, rule.tiles, threads));
        flops += double(node_flops(as_written.graph, node));
        rule_us += us;
        // Only grids of the rule's tile count: the model prices a node alone, and a change of
        // tile count changes how layers overlap, which grove tune's whole-model check catches
        // and the model cannot (on ResNet-50 at 2 threads such choices measured 5% slower).
        // Past one thread, only the rule's layout too: a layout changed there measured slower
        // as a whole model than its nodes' and Transposes' times said (docs/tuning.md).
        for (const ConvCandidate& k : conv_candidates(as_written, n)) {
          if (k.tiles != rule.tiles || !std::count(priced.begin(), priced.end(), k.primitive) ||
              (layout_of(k.primitive) != ConvLayoutKind::nchw && options.conv_layout != ConvLayout::channels_last) ||
              (threads > 1 && !layout_model && layout_of(k.primitive) != ruled_layout) ||
              (k.primitive == rule.primitive && k.extent == rule.extent))
            continue;
          v.choices.push_back(k);
          v.layout.push_back(layout_of(k.primitive));
          // A candidate must beat the rule by more than the two predictions' errors together.
          const double margin = std::max(keep_share, std::hypot(error_of(rule.primitive), error_of(k.primitive)));
          v.cost.push_back(predicted_cost(price(c, k), k.tiles, threads) * (1 + margin));
        }
      }
    }
    if (!v.tunable) {
      v.choices = {ConvCandidate{}};
      v.layout = {ruled_layout};
      v.cost = {0};
    }
    vertex_of[n] = static_cast<int>(vertices.size());
    vertices.push_back(std::move(v));
  }
  if (rule_us <= 0) return {};

  // A Transpose's time: the layout model's, or from the plan's measure of what moving an
  // element is worth in FLOPs, at the rate the model predicts for this model's convs; cut
  // across the threads like a layer.
  const double us_per_element = rules.options.machine.transpose_flops * rule_us / flops;
  auto change_cost = [&](ValueLayout from, ValueLayout to, const Shape& shape, int64_t elements) {
    const int k = layout_change(from, to);
    if (k < 0) return 0.0;
    const double us = layout_model ? layout_model->predict(layout_features(shape, threads)).at(static_cast<size_t>(k))
                                   : double(elements) * us_per_element;
    return predicted_cost(us, threads, threads);
  };
  std::vector<bool> is_conv(as_written.graph.nodes.size(), false);
  for (const Vertex& v : vertices) is_conv[v.node] = true;
  const LayoutLinks links = layout_links(as_written, is_conv);
  PbqpProblem problem;
  for (const Vertex& v : vertices) problem.node_costs.push_back(v.cost);
  for (const LayoutBoundary& b : links.boundaries) {
    std::vector<double>& costs = problem.node_costs[static_cast<size_t>(vertex_of[b.conv])];
    const Vertex& v = vertices[static_cast<size_t>(vertex_of[b.conv])];
    for (size_t i = 0; i < costs.size(); ++i) {
      if (v.layout[i] == ConvLayoutKind::nchw) continue;
      if (!layout_model) {
        costs[i] += change_cost(ValueLayout::nchw, ValueLayout::channels_last, {}, b.elements);
        continue;
      }
      for (const Shape& s : b.into) costs[i] += change_cost(ValueLayout::nchw, v.layout[i], s, 0);
      for (const Shape& s : b.out_of) costs[i] += change_cost(v.layout[i], ValueLayout::nchw, s, 0);
    }
  }
  for (const LayoutLink& l : links.links) {
    const int a = vertex_of[l.producer], b = vertex_of[l.consumer];
    const Vertex &va = vertices[static_cast<size_t>(a)], &vb = vertices[static_cast<size_t>(b)];
    PbqpEdge e{a, b, std::vector<double>(va.choices.size() * vb.choices.size(), 0)};
    for (size_t i = 0; i < va.choices.size(); ++i)
      for (size_t j = 0; j < vb.choices.size(); ++j) {
        const ValueLayout from = va.layout[i], to = vb.layout[j];
        double& cost = e.costs[i * vb.choices.size() + j];
        if (from == ValueLayout::blocked && to == ValueLayout::blocked && !l.straight)  // through NCHW
          cost = change_cost(from, ValueLayout::nchw, l.shape, l.elements) + change_cost(ValueLayout::nchw, to, l.shape, l.elements);
        else cost = change_cost(from, to, l.shape, l.elements);
      }
    problem.edges.push_back(std::move(e));
  }
  const PbqpSolution solution = solve_pbqp(problem);
  if (plan_gain) {
    const std::vector<int> rules_choice(vertices.size(), 0);
    const double before = pbqp_cost(problem, rules_choice);
    *plan_gain = before > 0 ? (before - solution.cost) / before : 0;
  }
  // The changed convs are named. The rules then lay out the others, and a changed conv can
  // change what they do: a channels-last group cut in two may go back to NCHW where its
  // Transposes now outweigh its products, a conv chosen channels-last keeps its whole group so.
  // Each conv whose layout in the plan differs from the solution's is named too, until none
  // does. Only those: a named conv keeps out of the channels-last fusions.
  std::vector<NodeChoice> choices;
  std::vector<bool> named(vertices.size(), false);
  auto name = [&](size_t i) {
    const Vertex& v = vertices[i];
    const ConvCandidate& k = v.choices[static_cast<size_t>(solution.choice[i])];
    choices.push_back({as_written.graph.nodes[v.node].name, k.primitive, k.extent});
    named[i] = true;
  };
  for (size_t i = 0; i < vertices.size(); ++i)
    if (vertices[i].tunable && solution.choice[i] != 0) name(i);
  for (int round = 0; round < 8 && !choices.empty(); ++round) {
    PlanOptions with = structure;
    with.choices = choices;
    with.choices_from = DecisionSource::model;
    const std::shared_ptr<const Plan> plan = make_plan(graph, with);
    std::map<std::string, ConvLayoutKind> runs_in;
    for (const Node& n : plan->graph.nodes) runs_in[n.name] = layout_of(n);
    bool changed = false;
    for (size_t i = 0; i < vertices.size(); ++i) {
      const Vertex& v = vertices[i];
      auto r = runs_in.find(as_written.graph.nodes[v.node].name);
      if (!v.tunable || named[i] || r == runs_in.end() || r->second == v.layout[static_cast<size_t>(solution.choice[i])])
        continue;
      name(i);
      changed = true;
    }
    if (!changed) break;
  }
  return choices;
}

}  // namespace grove::tune
