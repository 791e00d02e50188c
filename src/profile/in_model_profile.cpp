// Why in-model: a layer timed alone runs with cold caches and no neighbour competing for
// them, and its best grid depends on what the cores do around it. Each round plans the whole
// model with one candidate per Conv and times every node's tiles from a trace, so each
// candidate is measured where it will run. Rounds give each node its candidates in turn; the
// time of one node barely depends on its neighbours' candidates, which are only its inputs'
// and outputs' grids.
#include "profile/in_model_profile.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <map>
#include <set>

#include "kernels/cpu_info.h"
#include "plan/plan.h"
#include "tune/conv_candidates.h"

namespace grove::profile {
namespace {

// The median, as grove bench's p50 takes it (nearest rank).
double median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return v[std::min(static_cast<size_t>(0.5 * static_cast<double>(v.size() - 1) + 0.5), v.size() - 1)];
}

struct NodeTimes {
  std::vector<std::vector<double>> total_us, max_us;  // per node, per run: its tiles' sum and slowest
};

// Per node of the plan, over `runs` traced runs: the summed time of its tiles and the time of
// its slowest tile.
NodeTimes node_times(Engine& engine, Session& session, const Plan& plan, const TensorMap& inputs,
                     const ProfileSettings& s) {
  for (int i = 0; i < s.warmup; ++i) {
    if (s.before_run) s.before_run();
    session.run(inputs);
  }
  std::vector<std::vector<double>> per_run(plan.graph.nodes.size()), slowest(plan.graph.nodes.size());
  for (int run = 0; run < std::max(1, s.runs); ++run) {
    std::vector<double> sum(plan.graph.nodes.size(), 0.0), most(plan.graph.nodes.size(), 0.0);
    if (s.before_run) s.before_run();
    engine.start_trace();
    RunStats stats;
    session.run(inputs, &stats);
    const std::vector<TileTiming> timings = engine.stop_trace_timings();
    if (stats.used_reference || stats.segment_runs > 0)
      throw Error("tune: this model does not run as one tile graph (control flow or value-dependent shapes)");
    for (const TileTiming& t : timings) {
      if (t.tile < 0 || t.tile >= plan.tiles.size()) continue;
      const int32_t n = plan.tiles.node[static_cast<size_t>(t.tile)];
      if (n < 0) continue;
      const double us = double(t.end_ns - t.start_ns) / 1e3;
      sum[static_cast<size_t>(n)] += us;
      most[static_cast<size_t>(n)] = std::max(most[static_cast<size_t>(n)], us);
    }
    for (size_t n = 0; n < sum.size(); ++n) per_run[n].push_back(sum[n]), slowest[n].push_back(most[n]);
  }
  return {std::move(per_run), std::move(slowest)};
}

// Samples of one configuration of a node, over every pass.
struct Samples {
  std::vector<double> total, max;
  void add(const NodeTimes& t, int32_t node) {  // node: its index in the plan `t` was timed on
    const auto& a = t.total_us[static_cast<size_t>(node)];
    const auto& b = t.max_us[static_cast<size_t>(node)];
    total.insert(total.end(), a.begin(), a.end());
    max.insert(max.end(), b.begin(), b.end());
  }
};

std::string extent_text(const Shape& e) {
  std::string s;
  for (size_t d = 0; d < e.size(); ++d) s += (d ? "x" : "") + std::to_string(e[d]);
  return s;
}

}  // namespace

std::vector<TunedNode> profile_nodes(
    Engine& engine, const std::function<std::unique_ptr<Session>(const std::vector<NodeChoice>&)>& make_session,
    const TensorMap& inputs, const ShapeMap& shapes, const ProfileSettings& settings) {
  std::unique_ptr<Session> base = make_session({});
  const std::shared_ptr<const Plan> plan = plan_for(*base, shapes);
  if (!plan) throw Error("tune: the model's shapes depend on input values, so it has no plan to tune");
  // Candidates come from the model's convs as written (a structure-only NCHW plan); what the
  // rules do with each, channels-last or not, is measured in round 0.
  PlanOptions as_written = plan->options;
  as_written.conv_layout = ConvLayout::nchw;
  as_written.debug.prepare_weights = false;
  as_written.choices.clear();
  const std::shared_ptr<const Plan> nchw = make_plan(bound_graph(base->model()), as_written);
  std::map<std::string, size_t> in_rules;
  for (size_t n = 0; n < plan->graph.nodes.size(); ++n) in_rules[plan->graph.nodes[n].name] = n;

  std::vector<TunedNode> nodes;
  for (size_t n = 0; n < nchw->graph.nodes.size(); ++n) {
    TunedNode t;
    t.conv = tune::tunable_conv(*nchw, n, &t.config);
    if (!t.conv && (plan->options.threads == 1 || !tune::tunable_matmul(*nchw, n))) continue;
    t.name = nchw->graph.nodes[n].name;
    auto r = in_rules.find(t.name);
    if (r == in_rules.end()) continue;
    const tune::ConvCandidate rule = tune::rule_choice(*plan, r->second);
    t.rule_primitive = rule.primitive;
    t.rule_extent = rule.extent;
    t.rule_tiles = rule.tiles;
    for (const tune::ConvCandidate& c : t.conv ? tune::conv_candidates(*nchw, n) : tune::matmul_candidates(*nchw, n))
      t.candidates.push_back({c.primitive, c.extent, c.tiles, 0, 0});
    if (t.candidates.size() > 1 || (t.candidates.size() == 1 && (t.candidates[0].primitive != t.rule_primitive ||
                                                                  t.candidates[0].extent != t.rule_extent)))
      nodes.push_back(std::move(t));
  }
  if (nodes.empty()) return nodes;

  size_t rounds = 0;
  for (const TunedNode& t : nodes) rounds = std::max(rounds, t.candidates.size());
  const auto started = std::chrono::steady_clock::now();
  const size_t total_rounds = (rounds + 1) * static_cast<size_t>(std::max(1, settings.passes));
  size_t done = 0;
  auto progress = [&] {
    if (!settings.progress) return;
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
    std::fprintf(stderr, "tune: round %zu of %zu (%zu nodes, %.0f s)\n", ++done, total_rounds, nodes.size(), s);
  };
  // Each pass plans every round afresh and runs them in turn, the rules' plan first: a drift
  // over the minutes of tuning (a neighbour's load, the clock) reaches every candidate alike.
  std::vector<Samples> rule(nodes.size());
  std::vector<std::vector<Samples>> candidate(nodes.size());
  for (size_t i = 0; i < nodes.size(); ++i) candidate[i].resize(nodes[i].candidates.size());
  base.reset();
  for (int pass = 0; pass < std::max(1, settings.passes); ++pass) {
    for (size_t r = 0; r <= rounds; ++r) {
      std::vector<NodeChoice> choices;
      if (r > 0)
        for (const TunedNode& t : nodes) {
          const TuneCandidate& c = t.candidates[(r - 1) % t.candidates.size()];
          choices.push_back({t.name, c.primitive, c.extent});
        }
      std::unique_ptr<Session> session = make_session(choices);
      const std::shared_ptr<const Plan> p = plan_for(*session, shapes);
      const NodeTimes times = node_times(engine, *session, *p, inputs, settings);
      // By name: a round's choices can change which nodes its plan has (a conv a choice names
      // stays NCHW, so the channels-last pass adds or drops Transposes around it).
      std::map<std::string, int32_t> index;
      for (size_t n = 0; n < p->graph.nodes.size(); ++n) index[p->graph.nodes[n].name] = static_cast<int32_t>(n);
      for (size_t i = 0; i < nodes.size(); ++i) {
        const auto at = index.find(nodes[i].name);
        if (at == index.end()) throw Error("tune: node " + nodes[i].name + " is missing from a candidate's plan");
        if (r == 0) rule[i].add(times, at->second);
        else if (r - 1 < nodes[i].candidates.size()) candidate[i][r - 1].add(times, at->second);
      }
      progress();
    }
  }
  for (size_t i = 0; i < nodes.size(); ++i) {
    nodes[i].rule_us = median(rule[i].total);
    nodes[i].rule_max_us = median(rule[i].max);
    for (size_t c = 0; c < nodes[i].candidates.size(); ++c) {
      nodes[i].candidates[c].us = median(candidate[i][c].total);
      nodes[i].candidates[c].max_us = median(candidate[i][c].max);
    }
  }
  return nodes;
}

std::vector<double> node_median_us(Engine& engine, Session& session, const Plan& plan, const TensorMap& inputs,
                                   const ProfileSettings& settings) {
  const NodeTimes t = node_times(engine, session, plan, inputs, settings);
  std::vector<double> out;
  for (const std::vector<double>& runs : t.total_us) out.push_back(median(runs));
  return out;
}

double grid_cost(double total_us, double max_us, int threads) { return total_us / std::max(1, threads) + max_us; }

void choose_best(std::vector<TunedNode>& nodes, int threads, double keep_share, bool same_tiles) {
  for (TunedNode& t : nodes) {
    t.best = -1;
    double best = grid_cost(t.rule_us, t.rule_max_us, threads) * (1 - keep_share);
    for (size_t i = 0; i < t.candidates.size(); ++i) {
      const TuneCandidate& c = t.candidates[i];
      if (c.us <= 0 || (same_tiles && c.tiles != t.rule_tiles)) continue;
      if (c.primitive == t.rule_primitive && c.extent == t.rule_extent) continue;  // the rule itself
      if (const double cost = grid_cost(c.us, c.max_us, threads); cost < best) {
        best = cost;
        t.best = static_cast<int>(i);
      }
    }
  }
}

std::vector<NodeChoice> best_choices(const std::vector<TunedNode>& nodes, std::vector<double>* node_us,
                                     std::vector<double>* rule_us) {
  std::vector<NodeChoice> choices;
  for (const TunedNode& t : nodes) {
    if (t.best < 0) continue;
    const TuneCandidate& c = t.candidates[static_cast<size_t>(t.best)];
    choices.push_back({t.name, c.primitive, c.extent});
    if (node_us) node_us->push_back(c.us);
    if (rule_us) rule_us->push_back(t.rule_us);
  }
  return choices;
}

void write_dataset(const std::string& path, const std::vector<TunedNode>& nodes, int threads) {
  const bool fresh = !std::ifstream(path).good();
  std::ofstream f(path, std::ios::app);
  if (!f) throw Error(path + ": cannot write the profile dataset");
  if (fresh)
    f << "machine,threads,node,batch,cin,cout,in_h,in_w,out_h,out_w,kernel_h,kernel_w,stride_h,stride_w,group,"
         "primitive,extent,tiles,us\n";
  const std::string machine = kernels::machine_key();
  for (const TunedNode& t : nodes) {
    if (!t.conv) continue;
    const tune::ConvConfig& c = t.config;
    std::string name = t.name;
    std::replace(name.begin(), name.end(), '"', '\'');
    for (const TuneCandidate& k : t.candidates) {
      if (k.us <= 0) continue;
      f << '"' << machine << "\"," << threads << ",\"" << name << "\"," << c.batch << ',' << c.cin << ',' << c.cout << ','
        << c.in_h << ',' << c.in_w << ',' << c.out_h << ',' << c.out_w << ',' << c.kernel_h << ',' << c.kernel_w << ','
        << c.stride_h << ',' << c.stride_w << ',' << c.group << ',' << k.primitive << ',' << extent_text(k.extent) << ','
        << k.tiles << ',' << k.us << "\n";
    }
  }
}

}  // namespace grove::profile
