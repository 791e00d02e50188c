#include "sim/tile_costs.h"

#include <algorithm>

#include "graph/error.h"

namespace grove {

std::vector<double> time_tiles_alone(Engine& engine, Session& session, const TensorMap& inputs, int runs) {
  if (engine.threads() != 1) throw Error("simulate: tiles must be timed on a one-thread engine");
  std::vector<std::vector<double>> samples;
  for (int run = 0; run < std::max(runs, 1); ++run) {
    RunStats stats;
    engine.start_trace();
    session.run(inputs, &stats);
    std::vector<TileTiming> timings = engine.stop_trace_timings();
    if (stats.used_reference || stats.segment_runs > 0 || timings.empty())
      throw Error("simulate: this model runs " +
                  std::string(stats.used_reference ? "on the reference executor" : "in control-flow segments") +
                  ", so it has no single tile graph to simulate");
    int32_t tiles = 0;
    for (const TileTiming& t : timings) tiles = std::max(tiles, t.tile + 1);
    if (samples.empty()) samples.resize(static_cast<size_t>(tiles));
    for (const TileTiming& t : timings) {
      if (t.job != timings.front().job)
        throw Error("simulate: another job ran on the engine while tiles were timed");
      if (static_cast<size_t>(t.tile) < samples.size())
        samples[static_cast<size_t>(t.tile)].push_back(static_cast<double>(t.end_ns - t.start_ns));
    }
  }
  std::vector<double> out(samples.size(), 0.0);
  for (size_t t = 0; t < samples.size(); ++t) {
    auto& v = samples[t];
    if (v.empty()) continue;
    std::nth_element(v.begin(), v.begin() + static_cast<int64_t>(v.size() / 2), v.end());
    out[t] = v[v.size() / 2];
  }
  return out;
}

namespace {

// Each tile's share (by output elements) of per-node byte counts.
std::vector<double> tile_shares(const Plan& plan, const std::vector<double>& node_bytes) {
  const TileGraph& g = plan.tiles;
  std::vector<double> out(static_cast<size_t>(g.size()), 0.0);
  for (int32_t t = 0; t < g.size(); ++t) {
    int32_t n = g.node[static_cast<size_t>(t)];
    if (n < 0) continue;  // a barrier tile moves nothing
    int32_t out0 = plan.node_outputs[static_cast<size_t>(n)].empty() ? -1 : plan.node_outputs[static_cast<size_t>(n)][0];
    double total = out0 >= 0 ? static_cast<double>(numel(plan.values[static_cast<size_t>(out0)].shape)) : 0;
    double share = total > 0 ? static_cast<double>(volume(g.region[static_cast<size_t>(t)])) / total
                             : 1.0 / std::max(1, g.tile_count[static_cast<size_t>(n)]);
    out[static_cast<size_t>(t)] = node_bytes[static_cast<size_t>(n)] * share;
  }
  return out;
}

// Per node: the bytes of its activation inputs, plus its weights and outputs when `all`.
std::vector<double> node_bytes(const Plan& plan, bool all) {
  std::vector<double> bytes(plan.graph.nodes.size(), 0.0);
  auto value_bytes = [&](int32_t v) {
    const PlannedValue& pv = plan.values[static_cast<size_t>(v)];
    return static_cast<double>(numel(pv.shape)) * static_cast<double>(dtype_size(pv.dtype));
  };
  for (size_t n = 0; n < plan.graph.nodes.size(); ++n) {
    const Node& node = plan.graph.nodes[n];
    for (size_t i = 0; i < node.inputs.size(); ++i) {
      int32_t v = i < plan.node_inputs[n].size() ? plan.node_inputs[n][i] : -1;
      if (v >= 0) {
        bytes[n] += value_bytes(v);
      } else if (auto it = plan.graph.initializers.find(node.inputs[i]); all && it != plan.graph.initializers.end()) {
        bytes[n] += static_cast<double>(it->second.bytes());
      }
    }
    if (all)
      for (int32_t v : plan.node_outputs[n])
        if (v >= 0) bytes[n] += value_bytes(v);
  }
  return bytes;
}

}  // namespace

std::vector<double> tile_traffic_bytes(const Plan& plan) { return tile_shares(plan, node_bytes(plan, true)); }

std::vector<double> tile_input_bytes(const Plan& plan) { return tile_shares(plan, node_bytes(plan, false)); }

}  // namespace grove
