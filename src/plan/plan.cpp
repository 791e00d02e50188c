// make_plan: values and their buffer plan, a tile grid per op, then the tile DAG.
#include "plan/plan.h"

#include <algorithm>
#include <map>
#include <set>

#include "kernels/conv_nchwc.h"
#include "passes/flops.h"
#include "passes/passes.h"
#include "ops/op.h"
#include "plan/plan_internal.h"
#include "plan/shared_weights.h"

namespace grove {
namespace plan_detail {

NodeInfos node_infos(const Graph& g, const Node& node) {
  NodeInfos infos;
  auto info_of = [&](const std::string& name) {
    ValueInfo info;
    if (name.empty()) {
      info.present = false;
      return info;
    }
    auto it = g.values.find(name);
    if (it == g.values.end())
      throw Error(node.describe() + ": value '" + name + "' has no bound shape (bind the graph before planning)");
    info = it->second;
    auto init = g.initializers.find(name);
    info.data = init == g.initializers.end() ? nullptr : &init->second;
    return info;
  };
  for (const auto& name : node.inputs) infos.in.push_back(info_of(name));
  for (const auto& name : node.outputs) infos.out.push_back(info_of(name));
  return infos;
}

}  // namespace plan_detail

namespace {

using plan_detail::NodeInfos;

// The rule's one-off work for a node, over its constant inputs (initializers of plan.graph,
// which outlives the result since the Plan owns both).
SharedPrepared::Result prepare_node(const Graph& g, const Node& node, const TileRule& rule, const NodeInfos& infos,
                                    SharedPrepared& shared) {
  std::vector<const Tensor*> constants;
  for (const auto& name : node.inputs) {
    auto it = name.empty() ? g.initializers.end() : g.initializers.find(name);
    constants.push_back(it == g.initializers.end() ? nullptr : &it->second);
  }
  return shared.prepare(node, rule, infos.in, constants);
}

void plan_values(Plan& plan) {
  const Graph& g = plan.graph;
  std::map<std::string, int32_t> index;
  auto add = [&](const std::string& name, int32_t producer) {
    auto it = g.values.find(name);
    if (it == g.values.end()) throw Error("value '" + name + "' has no bound shape (bind the graph before planning)");
    if (!index.emplace(name, static_cast<int32_t>(plan.values.size())).second)
      throw Error("value '" + name + "' is produced twice");
    plan.values.push_back({name, it->second.dtype, it->second.shape, producer, 0, false});
  };
  for (const auto& in : g.inputs)
    if (!g.initializers.count(in.name)) add(in.name, -1);
  for (size_t n = 0; n < g.nodes.size(); ++n) {
    const Node& node = g.nodes[n];
    auto& ins = plan.node_inputs.emplace_back();
    for (const auto& name : node.inputs) {
      if (name.empty() || g.initializers.count(name)) {
        ins.push_back(-1);
        continue;
      }
      auto it = index.find(name);
      if (it == index.end()) throw Error(node.describe() + ": input '" + name + "' is not computed by any earlier node");
      ins.push_back(it->second);
    }
    auto& outs = plan.node_outputs.emplace_back();
    for (const auto& name : node.outputs) {
      if (name.empty()) {
        outs.push_back(-1);
        continue;
      }
      add(name, static_cast<int32_t>(n));
      outs.push_back(index[name]);
    }
  }
  for (const auto& out : g.outputs) {
    auto it = index.find(out.name);
    if (it != index.end()) plan.values[it->second].is_output = true;
    else if (!g.initializers.count(out.name)) throw Error("graph output '" + out.name + "' is not computed by any node");
  }
}

}  // namespace

// DCCNN (thesis 004, 3.2): ops whose rules split them into the same G independent paths and
// that feed one another directly (grouped convs with nothing mixing the groups between them)
// form a chain; its ops are cut along the paths first, so a path's tiles depend only on the
// same path's tiles in the op before. Only when there is a core for every path (DCCNN's
// premise): with fewer, rows first measured faster (docs/scaling.md).
std::vector<int64_t> path_chains(const Plan& plan, TileRuleLookup lookup) {
  const Graph& g = plan.graph;
  std::vector<int64_t> paths(g.nodes.size(), 0);
  for (size_t n = 0; n < g.nodes.size(); ++n) {
    const TileRule* rule = is_view_node(plan, static_cast<int32_t>(n)) ? nullptr : lookup(g.nodes[n]);
    if (rule && rule->paths) paths[n] = rule->paths(g.nodes[n], plan_detail::node_infos(g, g.nodes[n]).in);
  }
  std::vector<int64_t> chained(g.nodes.size(), 0);
  for (size_t n = 0; n < g.nodes.size(); ++n) {
    if (paths[n] < 2 || plan.node_inputs[n].empty()) continue;
    int32_t v = plan.node_inputs[n][0];
    while (v >= 0 && plan.values[v].view_of >= 0) v = plan.values[v].view_of;
    const int32_t p = v >= 0 ? plan.values[v].producer : -1;
    if (p >= 0 && paths[p] == paths[n] && plan.options.threads >= paths[n]) chained[n] = chained[p] = paths[n];
  }
  return chained;
}

// The pipeline's steps (a namespace of their own: the plan layer compiles as a unity build).
namespace plan_pipeline {

// What the pipeline's steps share while a plan is made.
struct PlanBuild {
  Plan& plan;
  const PlanOptions& options;
  TileRuleLookup lookup;
  std::set<std::string> keep;   // nodes a choice names keep the layout they were measured in
  std::vector<NodeInfos> infos;  // per node, once the graph is final
};

// After the channels-last pass, so a pruned conv runs in the layout the dense plan gives it
// (a pruned map's gate and convs read its channels-last copy where there is one), and before
// the channels-last fusions, which then leave the pruned convs alone.
void prune_feature_maps(PlanBuild& b) {
  b.plan.pruning = apply_feature_pruning(b.plan.graph, b.options.feature_pruning,
                                            {b.options.pruned_winograd ? b.options.machine.winograd_small_plane_gain : 0,
                                             b.options.machine.winograd_small_plane_half_kept, b.options.threads});
}

// Before precision: bf16 skips Winograd layers.
void apply_tuned_primitives(PlanBuild& b) {
  apply_primitive_choices(b.plan.graph, b.options.choices, b.options.choices_from);
}

void choose_precisions(PlanBuild& b) {
  b.plan.precision = apply_precision(b.plan.graph, b.options.precision, b.options.machine.bf16_dot_gain);
}

// After precision: a bf16 conv leaves Winograd.
void choose_channels_last(PlanBuild& b) {
  if (b.options.conv_layout != ConvLayout::channels_last) return;
  const MachineProfile& m = b.options.machine;
  b.plan.channels_last_convs = to_channels_last_f32(b.plan.graph, b.keep, m.transpose_flops,
                                                    m.winograd_nhwc_min_channels, m.winograd_nhwc_small_planes);
  store_bf16_between_convs(b.plan.graph, b.plan.precision);
}

void fuse_channels_last(PlanBuild& b) {
  if (b.options.conv_layout != ConvLayout::channels_last) return;
  const PlanDebug& d = b.options.debug;
  if (d.fuse_expand_depthwise) fuse_expand_depthwise(b.plan.graph, b.keep);
  if (d.fuse_expand_depthwise && d.fuse_depthwise_project) fuse_depthwise_project(b.plan.graph, b.keep);
  if (d.fuse_conv_max_pool) fuse_conv_max_pool(b.plan.graph, b.keep);
}

// After the channels-last pass, whose copies a blocked conv then reads and writes directly.
void choose_blocked(PlanBuild& b) {
  to_blocked_f32(b.plan.graph, int64_t(kernels::conv_nchwc_block(kernels::active_isa())));
}

void plan_values_and_views(PlanBuild& b) {
  plan_values(b.plan);
  plan_detail::mark_views(b.plan);
  if (b.options.debug.concat_slices) plan_detail::mark_concat_slices(b.plan, b.lookup);
}

// Each node's tile grid (a tuning record's, or by rule), its prepared weights, its tiles.
void lower_to_tiles(PlanBuild& b) {
  Plan* plan = &b.plan;
  const PlanOptions& options = b.options;
  const TileRuleLookup lookup = b.lookup;
  const Graph& g = plan->graph;
  TileGraph& tg = plan->tiles;
  plan->path_chain = path_chains(*plan, lookup);
  const std::vector<int64_t>& chain_paths = plan->path_chain;
  std::map<std::string, const Shape*> chosen_extent;
  for (const NodeChoice& c : options.choices)
    if (!c.extent.empty() && !plan->pruning.pruned_nodes.count(c.node)) chosen_extent[c.node] = &c.extent;
  std::vector<NodeInfos>& infos = b.infos;
  infos.reserve(g.nodes.size());
  SharedPrepared own;
  SharedPrepared& shared = options.shared_prepared ? *options.shared_prepared : own;
  std::set<const void*> counted;  // prepared copies this plan's bytes include
  for (size_t n = 0; n < g.nodes.size(); ++n) {
    const Node& node = g.nodes[n];
    infos.push_back(plan_detail::node_infos(g, node));
    const bool view = is_view_node(*plan, static_cast<int32_t>(n));
    const TileRule* rule = view ? nullptr : lookup(node);
    if (!rule && !view) {
      const OpSpec* def = OpRegistry::builtin().find(node);
      if (!def || !def->infer || !def->reference) throw Unsupported(node.describe() + ": unsupported op");
    }
    if (rule && (node.outputs.empty() || node.outputs[0].empty()))
      throw Error(node.describe() + ": a tiled op needs its first output");
    int64_t flops = node_flops(g, node);
    if (__builtin_add_overflow(plan->total_flops, flops, &plan->total_flops))
      throw Error(node.describe() + ": the model's FLOP count overflows int64");
    Shape out_shape = infos.back().out.empty() || !infos.back().out[0].present ? Shape{} : infos.back().out[0].shape;
    int64_t work = std::max(flops, numel(out_shape));
    if (rule && rule->streamed_elements) {
      const double streamed = options.machine.move_flops * static_cast<double>(rule->streamed_elements(
                                                              node, infos.back().in, infos.back().out));
      if (streamed > static_cast<double>(work)) work = static_cast<int64_t>(std::min(streamed, 0x1p62));
    }
    int64_t producer_tiles = 1;
    for (int32_t v : plan->node_inputs[n]) {
      while (v >= 0 && plan->values[v].view_of >= 0) v = plan->values[v].view_of;  // cut like the base
      if (v >= 0 && plan->values[v].producer >= 0)
        producer_tiles = std::max<int64_t>(producer_tiles, tg.tile_count[plan->values[v].producer]);
    }
    Shape extent;
    if (auto chosen = chosen_extent.find(node.name); chosen != chosen_extent.end()) {
      if (!rule) throw Error(node.describe() + ": a tile grid was chosen for an op that runs as one whole tile");
      extent = fit_choice_extent(node, out_shape, rule->cuttable(node, infos.back().in, infos.back().out), *chosen->second);
    } else {
      extent = plan_detail::choose_tile_extent(node, infos.back(), rule, options, work, producer_tiles, chain_paths[n]);
    }

    plan->rules.push_back(rule);
    plan->tile_extent.push_back(extent);
    TilePieces pieces;
    if (rule && rule->pieces && options.threads > 1 && options.tile_pieces)
      pieces = rule->pieces(node, infos.back().in, infos.back().out,
                            options.piece_bytes > 0 ? options.piece_bytes : kDefaultPieceBytes);
    if (pieces.dim >= 0) {  // whole blocks of a dim the rule cuts, or the pieces would not sum alike
      const std::vector<int64_t> blocks = rule->cuttable(node, infos.back().in, infos.back().out);
      if (static_cast<size_t>(pieces.dim) >= blocks.size() || blocks[static_cast<size_t>(pieces.dim)] <= 0 ||
          pieces.size <= 0 || pieces.size % blocks[static_cast<size_t>(pieces.dim)] != 0)
        throw Error(node.describe() + ": tile rule gives pieces that are not whole blocks of a cut dim");
    }
    plan->pieces.push_back(pieces);
    SharedPrepared::Result prepared;
    if (rule && rule->prepare && options.debug.prepare_weights) prepared = prepare_node(g, node, *rule, infos.back(), shared);
    plan->prepared.push_back(prepared.prepared);
    if (prepared.prepared && counted.insert(prepared.prepared.get()).second && rule->prepared_bytes)  // a shared copy is counted once
      plan->prepared_bytes += rule->prepared_bytes(node, infos.back().in, prepared.prepared.get());
    tg.first_tile.push_back(tg.size());
    if (rule) plan_detail::append_tiles(static_cast<int32_t>(n), out_shape, extent, tg);
    else {
      tg.node.push_back(static_cast<int32_t>(n));
      tg.region.push_back(full_region(out_shape));
    }
    int64_t count = tg.size() - tg.first_tile.back();
    if (tg.node.size() > static_cast<size_t>(INT32_MAX / 2)) throw Error(node.describe() + ": too many tiles");
    if (static_cast<int64_t>(tg.node.size()) > options.max_tiles)
      throw Error(node.describe() + ": the plan reaches " + std::to_string(tg.node.size()) + " tiles, over the limit of " +
                  std::to_string(options.max_tiles) + " (fewer with --tiles-per-op; raise it with --max-tiles)");
    tg.tile_count.push_back(static_cast<int32_t>(count));
    if (options.schedule == Schedule::barrier && n + 1 < g.nodes.size()) {
      tg.node.push_back(-1);
      tg.region.emplace_back();
    }
  }

  for (size_t n = 0; n < g.nodes.size(); ++n)
    for (int32_t v : plan->node_inputs[n])
      if (v >= 0) plan->values[v].consumer_tiles += tg.tile_count[n];

}

// The tile->tile edges from each tile's `needs`, and where each tile's output lives.
void link_tiles(PlanBuild& b) {
  b.plan.critical_path_flops = plan_detail::link_tiles(b.plan, b.infos);
  plan_detail::fill_places(b.plan, b.plan.tiles);
}

struct CompileStep {
  const char* name;
  void (*run)(PlanBuild&);
};

// The compile pipeline, in order: every step that turns a bound, optimised graph (optimize()
// in passes/passes.h ran once at load) into a plan. Choices first (primitives, precision),
// then layouts and the fusions they allow, then the lowering to tiles.
constexpr CompileStep kCompilePipeline[] = {
    {"apply tuned primitives", apply_tuned_primitives},
    {"choose precisions", choose_precisions},
    {"choose channels-last layout", choose_channels_last},
    {"prune feature maps", prune_feature_maps},
    {"fuse channels-last chains", fuse_channels_last},
    {"choose channel-blocked layout", choose_blocked},
    {"plan values and views", plan_values_and_views},
    {"lower to tiles", lower_to_tiles},
    {"link tiles", link_tiles},
};

}  // namespace plan_pipeline

using plan_pipeline::kCompilePipeline;

std::vector<std::string> compile_pipeline_steps() {
  std::vector<std::string> names;
  for (const auto& step : kCompilePipeline) names.push_back(step.name);
  return names;
}

std::shared_ptr<const Plan> make_plan(const Graph& bound, const PlanOptions& options) {
  if (options.threads < 1) throw Error("plan: threads must be at least 1");
  if (options.tiles_per_op < 0) throw Error("plan: tiles per op must not be negative");
  if (options.min_tile_flops < 0) throw Error("plan: the minimum tile FLOPs must not be negative");
  if (options.piece_bytes < 0) throw Error("plan: the bytes of a tile's piece must not be negative");
  auto plan = std::make_shared<Plan>();
  plan->graph = bound;
  plan->options = options;
  plan_pipeline::PlanBuild build{*plan, options, options.debug.rule_lookup ? options.debug.rule_lookup : find_tile_rule, {}, {}};
  for (const NodeChoice& c : options.choices) build.keep.insert(c.node);
  for (const auto& step : kCompilePipeline) step.run(build);
  // Last: the steps above may still replace initializers.
  const Graph& g = plan->graph;
  plan->node_constants.resize(g.nodes.size());
  for (size_t n = 0; n < g.nodes.size(); ++n)
    for (const std::string& name : g.nodes[n].inputs) {
      auto it = name.empty() ? g.initializers.end() : g.initializers.find(name);
      plan->node_constants[n].push_back(it == g.initializers.end() ? nullptr : &it->second);
    }
  return plan;
}


Shape tile_grid(const Plan& plan, int32_t node) {
  const Shape& extent = plan.tile_extent.at(node);
  const Node& n = plan.graph.nodes.at(node);
  Shape grid(extent.size(), 1);
  if (extent.empty()) return grid;
  const Shape& shape = plan.graph.values.at(n.outputs[0]).shape;
  for (size_t d = 0; d < extent.size(); ++d)
    grid[d] = extent[d] > 0 ? (shape[d] + extent[d] - 1) / extent[d] : 1;
  return grid;
}

int64_t tile_graph_bytes(const TileGraph& tg) {
  int64_t bytes = static_cast<int64_t>(sizeof(TileGraph));
  bytes += static_cast<int64_t>(tg.node.capacity() * sizeof(int32_t) + tg.n_parents.capacity() * sizeof(int32_t) +
                                tg.depth.capacity() * sizeof(int32_t) + tg.child_begin.capacity() * sizeof(int64_t) +
                                tg.children.capacity() * sizeof(int32_t) + tg.sources.capacity() * sizeof(int32_t) +
                                tg.first_tile.capacity() * sizeof(int32_t) + tg.tile_count.capacity() * sizeof(int32_t) +
                                tg.place.capacity() * sizeof(uint16_t));
  bytes += static_cast<int64_t>(tg.region.capacity() * sizeof(Region));
  for (const Region& r : tg.region) bytes += static_cast<int64_t>(r.capacity() * sizeof(Range));
  return bytes;
}

}  // namespace grove
