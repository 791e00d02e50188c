#pragma once
// Dynamic feature-map pruning (Antidote, docs/dynamic.md): after a chosen feature map, a
// decision node ranks its channels and positions per image, and every Conv that reads it
// reduces over the kept ones only (ops/pruning/feature_pruning.h has the two ops).
#include <set>
#include <string>
#include <vector>

#include "graph/graph.h"

namespace grove {

// The model metadata key that carries the statements below.
inline constexpr const char* kFeaturePruningKey = "grove.antidote";

// One statement "prune VALUE [channels=R] [positions=R]": of feature map VALUE, keep
// int(R * C) channels and int(R * H * W) positions per image (at least one; R in (0, 1]).
struct FeatureMapPruning {
  std::string value;
  double channels = 1.0;
  double positions = 1.0;
};

// One statement per line; blank lines and lines from '#' are skipped. Bad text is an Error
// naming the line.
std::vector<FeatureMapPruning> parse_feature_pruning(const std::string& text);

struct FeaturePruningReport {
  int gates = 0;                  // AttentionKeep nodes inserted
  int pruned_convs = 0;           // Convs that now reduce over kept channels only
  int winograd_kept = 0;          // Winograd convs left whole on the masked map (gain below)
  // The convs that became PrunedConv or PrunedConvNhwc: a tile grid a tuning choice gave the
  // conv does not fit them (they keep their names).
  std::set<std::string> pruned_nodes;
  int64_t dense_flops = 0;        // what the pruned Convs count unpruned
  int64_t kept_flops = 0;         // and pruned
};

// Rewrites a bound graph (the plan's own copy): after each named value an AttentionKeep
// node; each 2-D group-1 Conv reading it as x becomes a PrunedConv, and every other reader
// reads it through an ApplyKeep node (the map with the pruned channels and positions zeroed).
// The value must be a float [N, C, H, W] map that at least one such Conv reads; a graph output
// stays unpruned. Anything else is an Error naming it.
// A channels-last conv the layout pass put on Winograd is pruned only where the products left
// (the kept channels' share times the kept positions' share) times `winograd_gain` (how many
// times faster Winograd runs than the row GEMM, MachineProfile::winograd_small_plane_gain) is
// under 1: otherwise the pruned GEMM would be slower than Winograd on the whole map, and the
// conv stays on Winograd reading the masked map. 0: every such conv is pruned.
FeaturePruningReport apply_feature_pruning(Graph& graph, const std::vector<FeatureMapPruning>& statements,
                                           double winograd_gain = 0);

}  // namespace grove
