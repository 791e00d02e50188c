#pragma once
// Dynamic feature-map pruning (Antidote, docs/dynamic.md): a chosen feature map's channels and
// positions are ranked per image, and every Conv that reads it reduces over the kept ones only
// (ops/pruning/feature_pruning.h has the ops).
#include <set>
#include <string>
#include <vector>

#include "graph/graph.h"

namespace grove {

// The model metadata key that carries the statements below.
inline constexpr const char* kFeaturePruningKey = "grove.antidote";

// One statement "prune VALUE [channels=R] [positions=R] [block=B]": of feature map VALUE, keep
// int(R * C) channels and int(R * H * W) positions per image (at least one; R in (0, 1]); with
// block=B, int(R * blocks) blocks of B x B positions (ops/pruning/feature_pruning.h
// kAttrKeepBlock: a conv on Winograd skips the blocks of outputs centred on pruned ones).
struct FeatureMapPruning {
  std::string value;
  double channels = 1.0;
  double positions = 1.0;
  int64_t block = 1;
};

// One statement per line; blank lines and lines from '#' are skipped. Bad text is an Error
// naming the line.
std::vector<FeatureMapPruning> parse_feature_pruning(const std::string& text);

struct FeaturePruningReport {
  int gates = 0;                  // maps pruned: each an AttentionKeep node, or ranked by its convs' tiles
  int pruned_convs = 0;           // Convs that now reduce over kept channels only
  int pruned_winograd = 0;        // pruned convs on Winograd (kept channels, blocks with a kept centre)
  // Of those, the ones whose images do not split evenly over the threads: their tiles cut one
  // image's rows or channels, so every core streams all of the conv's transformed weights at
  // once, which the one-thread probe behind `gain` does not see (a session tries the pruned
  // GEMM against them before the first run, runtime/plan_trial.h).
  int winograd_sharing_images = 0;
  // The convs that became PrunedConv or PrunedConvNhwc: a tile grid a tuning choice gave the
  // conv does not fit them (they keep their names).
  std::set<std::string> pruned_nodes;
  int64_t dense_flops = 0;        // what the pruned Convs count unpruned
  int64_t kept_flops = 0;         // and pruned
};

// One line for the CLI: "pruning: 3 feature maps, 3 convs reduce over ... (2 on Winograd)".
std::string pruning_summary(const FeaturePruningReport& report);

// Rewrites a bound graph (the plan's own copy): each 2-D group-1 Conv reading a named value as
// x becomes a PrunedConv, and every other reader reads it through an ApplyKeep node (the map
// with the pruned channels and positions zeroed) after an AttentionKeep node that ranks it.
// Where only pruned convs read it there is no AttentionKeep: they rank it themselves.
// The value must be a float [N, C, H, W] map that at least one such Conv reads; a graph output
// stays unpruned. Anything else is an Error naming it.
// What the machine's probes say of a channels-last Winograd conv against the pruned row GEMM
// (kernels::WinogradNhwcProbe, MachineProfile):
struct WinogradPruningCosts {
  // How many times faster Winograd runs a 14x14 layer than the row GEMM. 0: not measured.
  double gain = 0;
  // Winograd's time keeping half the input channels over its time keeping all. 0: not measured.
  double half_kept = 0;
  // The cores the plan's tiles are cut for (PlanOptions::threads).
  int threads = 1;
};

// A channels-last conv the layout pass put on Winograd stays on Winograd where that costs less
// than the pruned GEMM over the kept channels and positions (gain s r, s the kept channels'
// share times the kept positions', r the row path's cost of their taps: 1 in registers, or
// conv_rows_tap_by_tap_cost (of the kept channels) times the share of the computed outputs' taps that read kept positions
// where it runs tap by tap, kernels/conv_rows.h). Relative to Winograd's time on the whole map, pruned
// Winograd costs b (t + (1 - t) c): c the kept channels' share; t = 2 half_kept - 1 the share
// of Winograd's time that does not shrink with them (its transforms); b the share of its
// output blocks that hold a kept centre (the others are skipped whole). A small plane's
// Winograd is cut by output channels, and at batch 1 each of its k tiles (k <= threads)
// transforms the whole input again: half of t, counted as the input transform, then counts k
// times. An unmeasured gain takes the pruned GEMM; an unmeasured half_kept counts Winograd's
// time as shrinking with c.
FeaturePruningReport apply_feature_pruning(Graph& graph, const std::vector<FeatureMapPruning>& statements,
                                           WinogradPruningCosts winograd = {});

}  // namespace grove
