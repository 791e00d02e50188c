#include "plan/feature_pruning.h"

#include <algorithm>
#include <cmath>
#include <sstream>

#include "graph/node_decisions.h"
#include "kernels/gemm.h"
#include "kernels/im2col.h"
#include "ops/pruning/feature_pruning.h"
#include "ops/op.h"
#include "ops/op_names.h"
#include "ops/conv/tile_conv_winograd.h"
#include "passes/flops.h"
#include "passes/layout_nodes.h"

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

namespace {

bool writes(const Node& n, const std::string& value) {
  return std::find(n.outputs.begin(), n.outputs.end(), value) != n.outputs.end();
}

bool reads(const Node& n, const std::string& value) {
  return std::find(n.inputs.begin(), n.inputs.end(), value) != n.inputs.end();
}

// A conv that can reduce over the kept channels and positions of x only: it reads the map as x
// (and only there), one group, 2-D constant-shaped weights, float32 (a bf16 conv keeps its own
// kernel). `op` is Conv (the map NCHW) or ConvNhwc (its channels-last copy).
bool prunable_conv(const Graph& g, const Node& n, const std::string& map, std::string_view op, const char* domain) {
  return n.op_type == op && n.domain == domain && !n.inputs.empty() && n.inputs[0] == map &&
         std::count(n.inputs.begin(), n.inputs.end(), map) == 1 && n.attr_int("group", 1) == 1 && n.inputs.size() > 1 &&
         g.values.count(n.inputs[1]) && g.values.at(n.inputs[1]).shape.size() == 4 && !runs_in_bf16(n) &&
         !n.decisions.x_nchw;
}

// A conv the layout pass (or a tuning record) put on a channels-last Winograd.
bool on_winograd(const Node& n) {
  const ConvPrimitive p = conv_primitive_choice(n);
  return p == ConvPrimitive::winograd || p == ConvPrimitive::winograd_nhwc || p == ConvPrimitive::winograd_f2x3_nhwc;
}

// The tiles a Winograd conv of one image is cut into by output channels: on a small plane
// (ops/conv/tile_conv_winograd.h winograd_cut_rows) at batch 1, as many as the threads and
// the panels allow; each of them transforms the whole input. 1 where it is cut by rows or
// images.
double winograd_channel_tiles(const Graph& g, const Node& n, int threads) {
  auto y = g.values.find(n.outputs.empty() ? "" : n.outputs[0]);
  if (threads <= 1 || y == g.values.end() || y->second.shape.size() != 4 || y->second.shape[0] != 1) return 1;
  const Shape& out = y->second.shape;  // [1, OH, OW, M]
  kernels::Conv2dShape s;
  s.out_h = size_t(out[1]), s.out_w = size_t(out[2]);
  if (tiling::winograd_cut_rows(s)) return 1;
  const int64_t nr = int64_t(kernels::gemm_blocking(kernels::active_isa()).nr);
  return double(std::clamp<int64_t>((out[3] + nr - 1) / nr, 1, threads));
}

// Where a node (a gate, a mask) goes: after every node that writes one of `inputs`.
size_t after_producers(const Graph& g, const std::vector<std::string>& inputs) {
  size_t at = 0;
  for (size_t i = 0; i < g.nodes.size(); ++i)
    for (const std::string& in : inputs)
      if (writes(g.nodes[i], in)) at = std::max(at, i + 1);
  return at;
}

}  // namespace

// The map may be NCHW (value), channels-last (its copy channels_last_name(value), written by a
// ConvNhwc that the layout pass made), or both with a Transpose between them. The gate reads
// the layout the map is computed in; each Conv or ConvNhwc reading the map as x becomes a
// PrunedConv or PrunedConvNhwc; every other reader reads the map masked in its own layout.
FeaturePruningReport apply_feature_pruning(Graph& graph, const std::vector<FeatureMapPruning>& statements,
                                           WinogradPruningCosts winograd) {
  FeaturePruningReport report;
  for (const FeatureMapPruning& s : statements) {
    const std::string where = std::string(kFeaturePruningKey) + " '" + s.value + "': ";
    const std::string nhwc = channels_last_name(s.value);
    auto producer = [&](const std::string& value) {
      return std::find_if(graph.nodes.begin(), graph.nodes.end(), [&](const Node& n) { return writes(n, value); });
    };
    const bool has_nchw = producer(s.value) != graph.nodes.end(), has_nhwc = producer(nhwc) != graph.nodes.end();
    auto info = graph.values.find(s.value);
    if (info == graph.values.end() || (!has_nchw && !has_nhwc))
      throw Error(where + "no node computes this value in the optimised graph (name a Conv's output, or the "
                          "Relu after it)");
    const Shape x = info->second.shape;
    if (info->second.dtype != DType::f32 || x.size() != 4)
      throw Error(where + "must be a float32 [N, C, H, W] feature map, not " + shape_str(x));
    if (has_nhwc && graph.values.at(nhwc).dtype != DType::f32)
      throw Error(where + "the plan stores it as " + std::string(dtype_name(graph.values.at(nhwc).dtype)) +
                  "; feature pruning needs float32 (run it without --precision bf16)");
    // The Transposes between the two layouts stay as they are: they carry the map, not read it.
    auto link = [&](const Node& n) {
      return n.op_type == kTranspose && n.inputs.size() == 1 && n.outputs.size() == 1 &&
             ((n.inputs[0] == s.value && n.outputs[0] == nhwc) || (n.inputs[0] == nhwc && n.outputs[0] == s.value));
    };
    const bool gate_nhwc = has_nhwc && !link(*producer(nhwc));
    const int64_t kc = kept_count(s.channels, x[1]), kp = kept_count(s.positions, x[2] * x[3]);
    // The share of a stride-1 conv's products a pruned conv keeps: the outputs it computes are
    // those at kept positions.
    const double kept_share = double(kc) / double(x[1]) * double(kp) / double(x[2] * x[3]);
    const std::string keep = s.value + "@keep";
    const std::string masked = s.value + "@pruned", masked_nhwc = channels_last_name(masked);
    bool needs_masked = false, needs_masked_nhwc = false;
    const int convs_before = report.pruned_convs + report.winograd_kept;
    for (Node& n : graph.nodes) {
      if (link(n)) continue;
      const bool nchw_reader = reads(n, s.value), nhwc_reader = has_nhwc && reads(n, nhwc);
      if (!nchw_reader && !nhwc_reader) continue;
      bool conv = nchw_reader ? prunable_conv(graph, n, s.value, kConv, "")
                              : prunable_conv(graph, n, nhwc, kConvNhwc, kGroveDomain);
      // Relative to Winograd on the whole map (feature_pruning.h): a Winograd conv with every
      // position kept may stay on Winograd, its GEMMs adding up the kept channels only; with
      // positions pruned Winograd would still compute every block.
      const bool winograd_conv = conv && nhwc_reader && on_winograd(n);
      const double fixed = winograd.half_kept > 0 ? std::clamp(2 * winograd.half_kept - 1, 0.0, 1.0) : 0.0;
      const double tiles = winograd_conv ? winograd_channel_tiles(graph, n, winograd.threads) : 1;
      const bool pruned_winograd = winograd_conv && kp == x[2] * x[3] && winograd.gain > 0 &&
                                   fixed / 2 * (tiles + 1) + (1 - fixed) * kept_share <= winograd.gain * kept_share;
      if (winograd_conv && !pruned_winograd && winograd.gain * kept_share >= 1) {
        conv = false;  // Winograd on the whole (masked) map is faster than the pruned GEMM
        ++report.winograd_kept;
      }
      if (!conv || (nchw_reader && nhwc_reader)) {
        if (nchw_reader) std::replace(n.inputs.begin(), n.inputs.end(), s.value, masked);
        if (nhwc_reader) std::replace(n.inputs.begin(), n.inputs.end(), nhwc, masked_nhwc);
        needs_masked |= nchw_reader, needs_masked_nhwc |= nhwc_reader;
        continue;
      }
      const int64_t dense = node_flops(graph, n);
      n.op_type = nchw_reader ? kPrunedConv : kPrunedConvNhwc;
      n.domain = kGroveDomain;
      if (pruned_winograd) ++report.pruned_winograd;
      else n.decisions.conv = ConvPrimitive::unset;  // a channels-last Winograd mark: the pruned GEMM replaces it
      n.inputs.resize(kPrunedConvKeepInput, "");
      n.inputs.push_back(keep);
      n.attrs[kAttrKeepChannels] = int_attr(kc);
      n.attrs[kAttrKeepPositions] = int_attr(kp);
      report.dense_flops += dense;
      report.kept_flops += node_flops(graph, n);
      ++report.pruned_convs;
      report.pruned_nodes.insert(n.name);
    }
    if (report.pruned_convs + report.winograd_kept == convs_before)
      throw Error(where + "no 2-D Conv of one group reads it as x, so pruning it would skip nothing");
    Node gate;
    gate.name = s.value + "@attention";
    gate.op_type = gate_nhwc ? kAttentionKeepNhwc : kAttentionKeep;
    gate.domain = kGroveDomain;
    gate.inputs = {gate_nhwc ? nhwc : s.value};
    gate.outputs = {keep};
    gate.attrs[kAttrKeepChannels] = int_attr(kc);
    gate.attrs[kAttrKeepPositions] = int_attr(kp);
    graph.values[keep] = ValueInfo{DType::i64, {x[0], kc + kp}};
    graph.nodes.insert(graph.nodes.begin() + std::ptrdiff_t(after_producers(graph, gate.inputs)), gate);
    // The masked map in each layout some reader reads it in, after the map and the gate.
    auto add_mask = [&](std::string_view op, const std::string& map, const std::string& out, const char* suffix) {
      Node mask = gate;
      mask.name = s.value + suffix;
      mask.op_type = op;
      mask.inputs = {map, keep};
      mask.outputs = {out};
      graph.values[out] = graph.values.at(map);
      graph.nodes.insert(graph.nodes.begin() + std::ptrdiff_t(after_producers(graph, mask.inputs)), std::move(mask));
    };
    if (needs_masked) add_mask(kApplyKeep, s.value, masked, "@mask");
    if (needs_masked_nhwc) add_mask(kApplyKeepNhwc, nhwc, masked_nhwc, "@mask/nhwc");
    ++report.gates;
  }
  return report;
}

}  // namespace grove
