#include "plan/feature_pruning.h"

#include <algorithm>
#include <cmath>
#include <sstream>

#include "graph/node_decisions.h"
#include "ops/pruning/feature_pruning.h"
#include "ops/op.h"
#include "ops/op_names.h"
#include "passes/flops.h"

namespace grove {
namespace {

double parse_ratio(const std::string& text, int line, const std::string& key) {
  std::size_t used = 0;
  double r = 0;
  try {
    r = std::stod(text, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  if (used != text.size() || !(r > 0.0 && r <= 1.0))
    throw Error(std::string(kFeaturePruningKey) + " line " + std::to_string(line) + ": " + key + "=" + text +
                " is not a ratio in (0, 1]");
  return r;
}

// int(r * total), as the training kit's Python computes it, and at least one.
int64_t kept_count(double r, int64_t total) { return std::clamp<int64_t>(static_cast<int64_t>(r * double(total)), 1, total); }

Attribute int_attr(int64_t v) {
  Attribute a;
  a.kind = Attribute::Kind::i;
  a.i = v;
  return a;
}

}  // namespace

std::vector<FeatureMapPruning> parse_feature_pruning(const std::string& text) {
  std::vector<FeatureMapPruning> out;
  std::istringstream lines(text);
  std::string line;
  for (int number = 1; std::getline(lines, line); ++number) {
    line = line.substr(0, line.find('#'));
    std::istringstream words(line);
    std::string word;
    if (!(words >> word)) continue;
    const std::string where = std::string(kFeaturePruningKey) + " line " + std::to_string(number) + ": ";
    if (word != "prune") throw Error(where + "expected 'prune VALUE [channels=R] [positions=R]', not '" + word + "'");
    FeatureMapPruning p;
    if (!(words >> p.value)) throw Error(where + "'prune' needs the name of a feature map");
    while (words >> word) {
      const auto eq = word.find('=');
      const std::string key = word.substr(0, eq), value = eq == std::string::npos ? "" : word.substr(eq + 1);
      if (key == "channels") p.channels = parse_ratio(value, number, key);
      else if (key == "positions") p.positions = parse_ratio(value, number, key);
      else throw Error(where + "unknown setting '" + word + "' (channels=R or positions=R)");
    }
    for (const FeatureMapPruning& q : out)
      if (q.value == p.value) throw Error(where + "'" + p.value + "' is pruned twice");
    out.push_back(p);
  }
  return out;
}

FeaturePruningReport apply_feature_pruning(Graph& graph, const std::vector<FeatureMapPruning>& statements) {
  FeaturePruningReport report;
  for (const FeatureMapPruning& s : statements) {
    const std::string where = std::string(kFeaturePruningKey) + " '" + s.value + "': ";
    auto info = graph.values.find(s.value);
    auto producer = std::find_if(graph.nodes.begin(), graph.nodes.end(), [&](const Node& n) {
      return std::find(n.outputs.begin(), n.outputs.end(), s.value) != n.outputs.end();
    });
    if (info == graph.values.end() || producer == graph.nodes.end())
      throw Error(where + "no node computes this value in the optimised graph (name a Conv's output, or the "
                          "Relu after it)");
    const Shape& x = info->second.shape;
    if (info->second.dtype != DType::f32 || x.size() != 4)
      throw Error(where + "must be a float32 [N, C, H, W] feature map, not " + shape_str(x));
    const int64_t kc = kept_count(s.channels, x[1]), kp = kept_count(s.positions, x[2] * x[3]);
    const std::string keep = s.value + "@keep";
    const int convs_before = report.pruned_convs;
    // A Conv that reads the map as x (and only there) skips the pruned channels; every other
    // reader reads the map with them zeroed (a residual Add, a pool), as the model trained.
    const std::string masked = s.value + "@pruned";
    bool needs_masked = false;
    for (Node& n : graph.nodes) {
      if (std::find(n.inputs.begin(), n.inputs.end(), s.value) == n.inputs.end() || n.outputs.empty() ||
          n.outputs[0] == keep)
        continue;
      const bool conv = n.op_type == kConv && n.domain.empty() && n.inputs[0] == s.value &&
                        std::count(n.inputs.begin(), n.inputs.end(), s.value) == 1 && n.attr_int("group", 1) == 1 &&
                        n.inputs.size() > 1 && graph.values.count(n.inputs[1]) &&
                        graph.values.at(n.inputs[1]).shape.size() == 4 && !runs_in_bf16(n);
      if (!conv) {
        std::replace(n.inputs.begin(), n.inputs.end(), s.value, masked);
        needs_masked = true;
        continue;
      }
      const int64_t dense = node_flops(graph, n);
      n.op_type = kPrunedConv;
      n.domain = kGroveDomain;
      n.inputs.resize(kPrunedConvKeepInput, "");
      n.inputs.push_back(keep);
      n.attrs[kAttrKeepChannels] = int_attr(kc);
      n.attrs[kAttrKeepPositions] = int_attr(kp);
      report.dense_flops += dense;
      report.kept_flops += node_flops(graph, n);
      ++report.pruned_convs;
    }
    if (report.pruned_convs == convs_before)
      throw Error(where + "no 2-D Conv of one group reads it as x, so pruning it would skip nothing");
    Node gate;
    gate.name = s.value + "@attention";
    gate.op_type = kAttentionKeep;
    gate.domain = kGroveDomain;
    gate.inputs = {s.value};
    gate.outputs = {keep};
    gate.attrs[kAttrKeepChannels] = int_attr(kc);
    gate.attrs[kAttrKeepPositions] = int_attr(kp);
    graph.values[keep] = ValueInfo{DType::i64, {x[0], kc + kp}};
    std::vector<Node> added = {std::move(gate)};
    if (needs_masked) {
      Node mask = added[0];
      mask.name = s.value + "@mask";
      mask.op_type = kApplyKeep;
      mask.inputs = {s.value, keep};
      mask.outputs = {masked};
      graph.values[masked] = info->second;
      added.push_back(std::move(mask));
    }
    graph.nodes.insert(producer + 1, added.begin(), added.end());
    ++report.gates;
  }
  return report;
}

}  // namespace grove
