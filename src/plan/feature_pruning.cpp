#include "plan/feature_pruning.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <sstream>

#include "graph/node_decisions.h"
#include "kernels/conv_rows.h"
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

int64_t parse_block(const std::string& text, int line) {
  std::size_t used = 0;
  long long b = 0;
  try {
    b = std::stoll(text, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  if (used != text.size() || b < 1 || b > 64)
    throw Error(std::string(kFeaturePruningKey) + " line " + std::to_string(line) + ": block=" + text +
                " is not a whole number of positions from 1 to 64");
  return b;
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
    if (word != "prune")
      throw Error(where + "expected 'prune VALUE [channels=R] [positions=R] [block=B]', not '" + word + "'");
    FeatureMapPruning p;
    if (!(words >> p.value)) throw Error(where + "'prune' needs the name of a feature map");
    while (words >> word) {
      const auto eq = word.find('=');
      const std::string key = word.substr(0, eq), value = eq == std::string::npos ? "" : word.substr(eq + 1);
      if (key == "channels") p.channels = parse_ratio(value, number, key);
      else if (key == "positions") p.positions = parse_ratio(value, number, key);
      else if (key == "block") p.block = parse_block(value, number);
      else throw Error(where + "unknown setting '" + word + "' (channels=R, positions=R or block=B)");
    }
    for (const FeatureMapPruning& q : out)
      if (q.value == p.value) throw Error(where + "'" + p.value + "' is pruned twice");
    out.push_back(p);
  }
  return out;
}

std::string pruning_summary(const FeaturePruningReport& r) {
  char line[200];
  std::snprintf(line, sizeof line,
                "pruning: %d feature maps, %d convs reduce over kept channels and positions (their FLOPs: %.1f%% kept)",
                r.gates, r.pruned_convs, 100.0 * double(r.kept_flops) / double(std::max<int64_t>(r.dense_flops, 1)));
  std::string out = line;
  if (r.pruned_winograd > 0) out += "; " + std::to_string(r.pruned_winograd) + " of them on Winograd";
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
// with many channels for its blocks (ops/conv/tile_conv_winograd.h winograd_nhwc_cut_rows) at
// batch 1, as many as the threads and the panels allow; each of them transforms the whole
// input. 1 where it is cut by rows or images.
double winograd_channel_tiles(const Graph& g, const Node& n, int threads) {
  auto y = g.values.find(n.outputs.empty() ? "" : n.outputs[0]);
  if (threads <= 1 || y == g.values.end() || y->second.shape.size() != 4 || y->second.shape[0] != 1) return 1;
  const Shape& out = y->second.shape;  // [1, OH, OW, M]
  kernels::Conv2dShape s;
  s.out_h = size_t(out[1]), s.out_w = size_t(out[2]);
  if (tiling::winograd_nhwc_cut_rows(s, out[3], 1)) return 1;
  const int64_t nr = int64_t(kernels::gemm_blocking(kernels::active_isa()).nr);
  return double(std::clamp<int64_t>((out[3] + nr - 1) / nr, 1, threads));
}

// The share of a Winograd conv's output blocks that compute an output when a share `kept` of
// the positions (or of the blocks of `block` x `block` positions) is kept: a block of b x b
// outputs is skipped only where none of their centres is kept. Kept blocks that are whole
// Winograd blocks (a multiple of b, and the windows centred at the outputs, pads 1 of a 3x3)
// skip all the others; positions kept one by one skip few; blocks that straddle Winograd's
// touch up to four of them each.
double winograd_blocks_computed(const Node& n, double kept, int64_t block) {
  const int64_t b = std::max<int64_t>(tiling::winograd_nhwc_block(n), 1);
  const std::vector<int64_t> pads = n.attr_ints("pads");
  const bool centred = pads.size() == 4 && pads[0] == 1 && pads[1] == 1;
  if (kept >= 1) return 1.0;
  if (block > 1 && block % b == 0 && centred) return kept;
  const double units = block > 1 ? 4.0 : double(b * b);
  return 1.0 - std::pow(1.0 - kept, units);
}

// The share of a computed output's taps that read a kept position, for a conv of kh x kw taps
// over a map whose positions are kept at the share `kept`, one by one or in blocks of `block` x
// `block`: a tap that stays in its output's block reads a kept position (the centre always
// does), any other one does at `kept`.
double kept_tap_share(int64_t kh, int64_t kw, double kept, int64_t block) {
  const int64_t b = std::max<int64_t>(block, 1);
  auto staying = [&](int64_t k) {  // per dimension: the share of (output, tap) pairs in one block
    int64_t in = 0;
    for (int64_t i = 0; i < b; ++i)
      for (int64_t d = -(k / 2); d < k - k / 2; ++d) in += i + d >= 0 && i + d < b;
    return double(in) / double(b * k);
  };
  const double stay = staying(kh) * staying(kw);
  return stay + (1 - stay) * kept;
}

// The row path's time over the kept products, relative to its time on them all in registers:
// where few enough of the computed outputs' taps read kept positions, it runs tap by tap over
// those (kernels/conv_rows.h) at conv_rows_tap_by_tap_cost each.
double row_path_tap_cost(const Graph& g, const Node& n, int64_t kept_channels, double kept_positions, int64_t block) {
  if (kept_positions >= 1 || !kernels::conv_row_supported(kernels::active_isa(), kernels::Precision::f32)) return 1;
  auto w = g.values.find(n.inputs.size() > 1 ? n.inputs[1] : "");
  if (w == g.values.end() || w->second.shape.size() != 4) return 1;
  const double taps = kept_tap_share(w->second.shape[2], w->second.shape[3], kept_positions, block);
  return std::min(1.0, kernels::conv_rows_tap_by_tap_cost(size_t(kept_channels)) * taps);
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
    const int64_t units = keep_units(x[2], x[3], s.block);
    const int64_t kc = kept_count(s.channels, x[1]), kp = kept_count(s.positions, units);
    // The share of a stride-1 conv's products a pruned conv keeps: the outputs it computes are
    // those at kept positions (about as many as the kept blocks' share).
    const double kept_channels = double(kc) / double(x[1]), kept_positions = double(kp) / double(units);
    const double kept_share = kept_channels * kept_positions;
    const std::string keep = s.value + "@keep";
    const std::string masked = s.value + "@pruned", masked_nhwc = channels_last_name(masked);
    bool needs_masked = false, needs_masked_nhwc = false;
    const int convs_before = report.pruned_convs;
    for (Node& n : graph.nodes) {
      if (link(n)) continue;
      const bool nchw_reader = reads(n, s.value), nhwc_reader = has_nhwc && reads(n, nhwc);
      if (!nchw_reader && !nhwc_reader) continue;
      const bool conv = nchw_reader ? prunable_conv(graph, n, s.value, kConv, "")
                              : prunable_conv(graph, n, nhwc, kConvNhwc, kGroveDomain);
      // Relative to Winograd on the whole map (feature_pruning.h): a Winograd conv may stay on
      // Winograd, its GEMMs adding up the kept channels and its blocks with no kept centre
      // skipped, or take the pruned GEMM, whichever costs less.
      bool pruned_winograd = false;
      if (conv && nhwc_reader && on_winograd(n) && winograd.gain > 0) {
        const double fixed = winograd.half_kept > 0 ? std::clamp(2 * winograd.half_kept - 1, 0.0, 1.0) : 0.0;
        const double tiles = winograd_channel_tiles(graph, n, winograd.threads);
        const double blocks = winograd_blocks_computed(n, kept_positions, s.block);
        const double rows = winograd.gain * kept_share * row_path_tap_cost(graph, n, kc, kept_positions, s.block);
        pruned_winograd = blocks * (fixed / 2 * (tiles + 1) + (1 - fixed) * kept_channels) <= rows;
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
      if (pruned_winograd) {
        ++report.pruned_winograd;
        auto y = graph.values.find(n.outputs.empty() ? "" : n.outputs[0]);
        const int64_t images = y == graph.values.end() || y->second.shape.empty() ? 1 : y->second.shape[0];
        if (winograd.threads > 1 && images % winograd.threads != 0) ++report.winograd_sharing_images;
      }
      else n.decisions.conv = ConvPrimitive::unset;  // a channels-last Winograd mark: the pruned GEMM replaces it
      n.inputs.resize(kPrunedConvKeepInput, "");
      n.inputs.push_back(keep);
      n.attrs[kAttrKeepChannels] = int_attr(kc);
      n.attrs[kAttrKeepPositions] = int_attr(kp);
      if (s.block > 1) n.attrs[kAttrKeepBlock] = int_attr(s.block);
      report.dense_flops += dense;
      report.kept_flops += node_flops(graph, n);
      ++report.pruned_convs;
      report.pruned_nodes.insert(n.name);
    }
    if (report.pruned_convs == convs_before)
      throw Error(where + "no 2-D Conv of one group reads it as x, so pruning it would skip nothing");
    ++report.gates;
    // Where only pruned convs read the map, each of their tiles ranks its own images' maps
    // (the rows a decision node would write: ops/pruning/feature_pruning.h). With no node
    // between the map and the convs, no core waits while another decides and hands the rows
    // over, as one image's cores do at each pruned map.
    if (!needs_masked && !needs_masked_nhwc) {
      for (Node& n : graph.nodes) {
        if (!reads(n, keep)) continue;
        n.inputs.resize(kPrunedConvKeepInput);
        while (n.inputs.size() > 2 && n.inputs.back().empty()) n.inputs.pop_back();
      }
      continue;
    }
    Node gate;
    gate.name = s.value + "@attention";
    gate.op_type = gate_nhwc ? kAttentionKeepNhwc : kAttentionKeep;
    gate.domain = kGroveDomain;
    gate.inputs = {gate_nhwc ? nhwc : s.value};
    gate.outputs = {keep};
    gate.attrs[kAttrKeepChannels] = int_attr(kc);
    gate.attrs[kAttrKeepPositions] = int_attr(kp);
    if (s.block > 1) gate.attrs[kAttrKeepBlock] = int_attr(s.block);
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
  }
  return report;
}

}  // namespace grove
