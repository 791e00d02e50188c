// grove plan: how a model is cut into tiles, and what the tile DAG looks like: per op its
// tiles, grid and incoming edges; in total tiles, edges, depth and the critical path.
#include <algorithm>
#include <chrono>
#include <map>
#include <set>
#include <cstdio>
#include <nlohmann/json.hpp>

#include "cli/commands.h"
#include "cli/options.h"
#include "cli/format.h"
#include "graph/node_decisions.h"
#include "kernels/gemm.h"
#include "ops/op.h"
#include "ops/op_names.h"
#include "passes/flops.h"
#include "plan/plan.h"
#include "plan/plan_io.h"
#include "tune/tuned_plan.h"
#include "runtime/engine.h"
#include "runtime/machine_probes.h"
#include "runtime/model.h"

namespace grove::cli {
namespace {

std::string grid_str(const Shape& grid) {
  std::string s;
  for (size_t d = 0; d < grid.size(); ++d) s += (d ? "x" : "") + std::to_string(grid[d]);
  return s.empty() ? "1" : s;
}

// One computation's decisions (graph/node_decisions.h): the primitive and where it came from
// and the precision always, the rest where it differs from a plain node.
nlohmann::ordered_json decisions_json(const Decisions& d) {
  nlohmann::ordered_json j;
  j["primitive"] = conv_primitive_name(d.conv);
  j["primitive_source"] = decision_source_name(d.conv_source);
  j["precision"] = node_precision_name(d.precision);
  if (d.output_bf16) j["output_bf16"] = true;
  if (d.x_nchw) j["x_nchw"] = true;
  if (d.y_channel_offset) j["y_channel_offset"] = *d.y_channel_offset;
  const FusedEpilogue& e = d.epilogue;
  if (e != FusedEpilogue{}) {
    nlohmann::ordered_json ej;
    ej["fused"] = e.fused;
    ej["activation"] = fused_activation_name(e.activation);
    if (e.activation != FusedActivation::none) {
      ej["alpha"] = e.alpha;
      ej["beta"] = e.beta;
    }
    if (e.residual_activation != FusedActivation::none) ej["residual_activation"] = fused_activation_name(e.residual_activation);
    ej["fused_flops"] = e.fused_flops;
    j["epilogue"] = std::move(ej);
  }
  return j;
}

// A node's decision record for --json: its own decisions, the layout its op type runs in (the
// OpTraits::layout of a grove.internal op), the tile grid and where that came from, and the records of the
// parts a fused node joined.
nlohmann::ordered_json node_decisions_json(const Node& node, const std::string& grid, const NodeChoice* choice,
                                           DecisionSource choices_from) {
  nlohmann::ordered_json j = decisions_json(node.decisions);
  const OpSpec* spec = node.domain == kGroveDomain ? OpRegistry::builtin().find(node) : nullptr;
  if (spec && spec->traits.layout == OpLayout::nhwc) j["layout"] = "nhwc";
  else if (spec && spec->traits.layout == OpLayout::nchwc) j["layout"] = "nchwc";
  j["grid"] = grid;
  j["grid_source"] = decision_source_name(choice && !choice->extent.empty() ? choices_from : DecisionSource::rule);
  if (node.decisions.expand) j["expand"] = decisions_json(*node.decisions.expand);
  if (node.decisions.project) j["project"] = decisions_json(*node.decisions.project);
  if (node.decisions.pool) j["pool"] = decisions_json(*node.decisions.pool);
  return j;
}

// The plan as one JSON object: its options, the machine measurements it priced with and where
// they came from, and per node the op, primitive, precision, tiles and grid. No timing, so
// the same model, options and machine print the same bytes in every process.
std::string plan_json(const PlanCliOptions& o, const Plan& p) {
  nlohmann::ordered_json j;
  j["model"] = o.model;
  j["threads"] = p.options.threads;
  j["schedule"] = o.schedule;
  j["precision"] = o.precision;
  j["layout"] = p.options.conv_layout == ConvLayout::nchw ? "nchw" : "nhwc";
  j["tile_counts"] = o.tiles_per_op > 0 ? "fixed " + std::to_string(o.tiles_per_op) : o.tile_counts;
  j["machine_probes"] = {{"source", p.options.machine.source},
                         {"move_flops", p.options.machine.move_flops},
                         {"transpose_flops", p.options.machine.transpose_flops},
                         {"winograd_nhwc_min_channels", p.options.machine.winograd_nhwc_min_channels},
                         {"winograd_nhwc_small_planes", p.options.machine.winograd_nhwc_small_planes},
                         {"winograd_small_plane_gain", p.options.machine.winograd_small_plane_gain},
                         {"winograd_small_plane_half_kept", p.options.machine.winograd_small_plane_half_kept},
                         {"bf16_dot_gain", p.options.machine.bf16_dot_gain},
                         {"amx_flop_cost", p.options.machine.amx_flop_cost}};
  j["tuning"] = p.options.choices_source;
  j["pipeline"] = compile_pipeline_steps();
  std::map<std::string, const NodeChoice*> tuned;
  for (const NodeChoice& c : p.options.choices) tuned.emplace(c.node, &c);
  nlohmann::ordered_json nodes = nlohmann::ordered_json::array();
  for (size_t n = 0; n < p.graph.nodes.size(); ++n) {
    const Node& node = p.graph.nodes[n];
    const bool view = is_view_node(p, static_cast<int32_t>(n)), gathered = is_gathered_node(p, static_cast<int32_t>(n));
    auto choice = tuned.find(node.name);
    const std::string grid = grid_str(tile_grid(p, static_cast<int32_t>(n)));
    nodes.push_back({{"name", node.name},
                     {"op", op_label(node)},
                     {"domain", node.domain},
                     {"primitive", conv_primitive_name(conv_primitive_choice(node))},
                     {"primitive_from", choice != tuned.end() ? "tuning" : "rules"},
                     {"precision", node_precision_name(node.decisions.precision)},
                     {"tiles", p.tiles.tile_count[n]},
                     {"grid", grid},
                     {"how", view ? "view" : gathered ? "gathered" : p.rules[n] ? "tiles" : "reference"},
                     {"decisions", node_decisions_json(node, grid, choice != tuned.end() ? choice->second : nullptr,
                                                       p.options.choices_from)}});
  }
  j["nodes"] = std::move(nodes);
  j["tiles"] = p.tiles.size();
  j["edges"] = p.tiles.edge_count();
  return j.dump(1);
}

Schedule parse_schedule(const std::string& text) {
  if (text == "aspen") return Schedule::aspen;
  if (text == "barrier") return Schedule::barrier;
  throw Error("--schedule must be aspen or barrier, not '" + text + "'");
}

}  // namespace

int run_plan(const PlanCliOptions& o) {
  ShapeMap shapes = parse_shape_options(o.shapes);
  Model model = Model::load(o.model, shapes, o.limits);
  if (!model.is_bound())
    throw Error(o.model + ": cannot plan before the input shapes are known" +
                (model.unbound_reason().empty() ? std::string("; pass --shape NAME=DIMS") : ": " + model.unbound_reason()));
  PlanOptions options;
  options.threads = o.threads > 0 ? o.threads : available_cores();
  options.tiles_per_op = o.tiles_per_op;
  options.min_tile_flops = o.min_tile_flops;
  options.schedule = parse_schedule(o.schedule);
  options.max_tiles = o.limits.max_tiles;
  options.precision = parse_precision(o.precision);
  options.conv_layout = parse_layout(o.layout);
  // Feature pruning as a session takes it: the model's grove.antidote metadata unless --prune.
  {
    const std::string asked = feature_pruning_option(o.prune);
    const auto& metadata = imported_graph(model).metadata;
    const auto meta = metadata.find(kFeaturePruningKey);
    const std::string text = asked == "off" ? "" : !asked.empty() ? asked : meta != metadata.end() ? meta->second : "";
    try {
      options.feature_pruning = parse_feature_pruning(text);
    } catch (const Error& e) {
      throw e.prefixed(o.model + ": ");
    }
  }
  if (o.tile_counts == "tail") options.tile_counts = TileCounts::tail_aware;
  // The machine's measurements as every session takes them: stored once per machine.
  MachineProbes probes;
  const bool tail = options.tile_counts == TileCounts::tail_aware, bf16 = options.precision == Precision::bf16;
  const bool channels_last = options.conv_layout == ConvLayout::channels_last;
  take_machine_probes(probes,
                      {.move_flops = tail, .amx_flop_cost = tail && bf16, .bf16_dot_gain = bf16,
                       .channels_last = channels_last, .winograd_nhwc = channels_last},
                      options);

  auto start = std::chrono::steady_clock::now();
  std::shared_ptr<const Plan> plan;
  try {
    plan = tune::plan_with_tuning(bound_graph(model), options, o.tuning, {});
  } catch (const Error& e) {
    throw e.prefixed(o.model + ": ");
  }
  // Pruned convs on Winograd where the cores share an image: as a session plans them, by the
  // pruning trial's record where there is one (runtime/plan_trial.h).
  std::string pruning_trial;
  if (o.tuning == "auto" && plan->pruning.winograd_sharing_images > 0) {
    const std::optional<bool> on_winograd = tune::recorded_pruned_winograd(bound_graph(model), options);
    if (on_winograd && !*on_winograd) {
      PlanOptions gemm = plan->options;
      gemm.pruned_winograd = false;
      plan = make_plan(bound_graph(model), gemm);
    }
    pruning_trial = !on_winograd ? "a session tries the pruned convs on Winograd against the pruned GEMM before its first run"
                    : *on_winograd ? "a pruning trial's record keeps the pruned convs on Winograd"
                                   : "a pruning trial's record puts the pruned convs on the pruned GEMM";
  }
  double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();

  const Plan& p = *plan;
  const TileGraph& tg = p.tiles;
  if (o.json) {
    std::printf("%s\n", plan_json(o, p).c_str());
    return 0;
  }
  std::printf("model: %s\n", o.model.c_str());
  std::printf("plan: %s schedule, %d threads, tiles per op: %s\n", o.schedule.c_str(), options.threads,
              o.tiles_per_op > 0                                   ? std::to_string(o.tiles_per_op).c_str()
              : options.tile_counts == TileCounts::tail_aware ? strf("tail-aware, %g FLOPs per moved element%s", options.machine.move_flops,
                                                                          options.precision == Precision::bf16 &&
                                                                                  kernels::precision_supported(kernels::Precision::bf16_amx, kernels::active_isa())
                                                                              ? strf(", %g per AMX FLOP", options.machine.amx_flop_cost).c_str()
                                                                              : "").c_str()
                                                                   : "one per thread");
  if (!p.precision.note.empty()) std::printf("precision: %s\n", p.precision.note.c_str());
  if (!p.options.choices_source.empty()) std::printf("tuning: %s\n", p.options.choices_source.c_str());
  // A session does not take these on trust: it tries them first (runtime/plan_trial.h).
  if (o.tuning == "auto" && p.options.choices_from == DecisionSource::model && !p.options.choices.empty())
    std::printf("tuning: a session tries the model's choices against the rules' plan before its first run, "
                "and keeps the verdict as this machine's record of the model\n");
  if (!p.options.machine.source.empty()) std::printf("machine probes: %s\n", p.options.machine.source.c_str());
  if (p.options.conv_layout == ConvLayout::nchw) {
    std::printf("layout: NCHW (--layout nchw)\n");
  } else {
    int transposes = 0;  // the layout changes the plan added (a model's own Transposes have no "/nhwc")
    int64_t moved = 0;
    for (const Node& node : p.graph.nodes)
      if (node.op_type == kTranspose && node.name.find("/nhwc/Transpose") != std::string::npos) {
        ++transposes;
        moved += numel(p.graph.values.at(node.outputs[0]).shape);
      }
    std::printf("layout: %d Conv%s channels-last (ConvNhwc, DepthwiseConvNhwc), the rest NCHW; %d Transpose%s "
                "between (%.2f M elements; %g FLOPs per moved element); Winograd layers from %lld input channels%s\n",
                p.channels_last_convs, p.channels_last_convs == 1 ? "" : "s", transposes, transposes == 1 ? "" : "s",
                double(moved) / 1e6, p.options.machine.transpose_flops, static_cast<long long>(p.options.machine.winograd_nhwc_min_channels),
                p.options.machine.winograd_nhwc_small_planes ? ", also on 13x13 and 14x14 planes" : "");
  }
  if (p.pruning.gates > 0) std::printf("%s\n", pruning_summary(p.pruning).c_str());
  if (!pruning_trial.empty()) std::printf("pruning: %s\n", pruning_trial.c_str());
  std::set<std::string> tuned;
  for (const NodeChoice& c : p.options.choices) tuned.insert(c.node);
  if (!o.totals_only) {
    std::printf("  %-4s %-32s %-22s %7s %-14s %9s %10s\n", "#", "node", "op", "tiles", "grid", "edges in", "GFLOPs");
    for (size_t n = 0; n < p.graph.nodes.size(); ++n) {
      const Node& node = p.graph.nodes[n];
      int64_t edges_in = 0;
      for (int32_t t = tg.first_tile[n]; t < tg.first_tile[n] + tg.tile_count[n]; ++t) edges_in += tg.n_parents[t];
      std::string name = node.name.size() > 32 ? "..." + node.name.substr(node.name.size() - 29) : node.name;
      const bool view = is_view_node(p, static_cast<int32_t>(n)), gathered = is_gathered_node(p, static_cast<int32_t>(n));
      std::string op = op_label(node) + (runs_on_amx(node) ? " bf16 amx" : runs_in_bf16(node) ? " bf16" : "") +
                       (view ? " (view)" : gathered ? " (gathered)" : p.rules[n] ? "" : "*");
      const std::string primitive = conv_primitive_name(conv_primitive_choice(node));
      if (tuned.count(node.name)) op += primitive.empty() ? " (tuned)" : " " + primitive + " (tuned)";
      else if (!primitive.empty()) op += " " + primitive;  // the layout pass's Winograd
      std::printf("  %-4zu %-32s %-22s %7d %-14s %9lld %10.4f\n", n, name.c_str(), op.c_str(), tg.tile_count[n],
                  grid_str(tile_grid(p, static_cast<int32_t>(n))).c_str(), static_cast<long long>(edges_in),
                  static_cast<double>(node_flops(p.graph, node)) * 1e-9);
    }
    std::printf("  (* no tile rule: one tile computed by the reference; (view): shares its input's buffer, no copy;\n"
                "   (gathered): a Concat whose producers wrote its inputs into its buffer, no copy)\n");
  }
  int32_t barriers = 0;
  for (int32_t n : tg.node) barriers += n < 0;
  int32_t max_depth = tg.depth.empty() ? 0 : *std::max_element(tg.depth.begin(), tg.depth.end());
  std::printf("ops: %zu   tiles: %s", p.graph.nodes.size(), with_commas(tg.size() - barriers).c_str());
  if (barriers) std::printf(" (+%d barrier tiles)", barriers);
  int views = 0;
  for (size_t n = 0; n < p.graph.nodes.size(); ++n) views += is_view_node(p, static_cast<int32_t>(n));
  if (views) std::printf(" (%d of them views, no work)", views);
  std::printf("   edges: %s   sources: %zu   max depth: %d\n", with_commas(tg.edge_count()).c_str(), tg.sources.size(),
              max_depth);
  double cp = static_cast<double>(p.critical_path_flops), total = static_cast<double>(p.total_flops);
  std::printf("critical path: %.4f GFLOPs of %.4f GFLOPs total (average parallelism %.1f)\n", cp * 1e-9, total * 1e-9,
              cp > 0 ? total / cp : 1.0);
  std::printf("plan time: %s   TileGraph: %.2f MiB   packed weights: %.2f MiB\n", milliseconds(seconds).c_str(),
              static_cast<double>(tile_graph_bytes(tg)) / (1024.0 * 1024.0),
              static_cast<double>(p.prepared_bytes) / (1024.0 * 1024.0));
  if (!o.save_path.empty()) {
    save_tile_graph(o.save_path, p);
    std::printf("saved %s: %s tiles, %s edges\n", o.save_path.c_str(), with_commas(tg.size() - barriers).c_str(),
                with_commas(tg.edge_count()).c_str());
  }
  if (!o.load_path.empty()) {
    TileGraph loaded = load_tile_graph(o.load_path, p);
    std::string difference = tile_graph_difference(loaded, tg);
    if (!difference.empty())
      throw Error(o.load_path + ": does not match a fresh plan of " + o.model + " (file vs fresh): " + difference +
                  (options.tile_counts == TileCounts::tail_aware
                       ? "; tail-aware tile counts follow this machine's measured price of moving data, so save and "
                         "load with --tile-counts fixed for plans that must match across machines"
                       : ""));
    std::printf("loaded %s: %s tiles, %s edges, matches\n", o.load_path.c_str(), with_commas(tg.size() - barriers).c_str(),
                with_commas(loaded.edge_count()).c_str());
  }
  return 0;
}

CLI::App* add_plan_command(CLI::App& app, PlanCliOptions& o) {
  CLI::App* cmd = app.add_subcommand("plan", "Cut a model into tiles: tiles, grid and edges per op, depth, critical path");
  cmd->add_option("model", o.model, "The .onnx file")->required();
  add_shape_option(cmd, o.shapes);
  add_threads_option(cmd, o.threads, "Cores to cut tiles for (0: the cores this process may use)");
  cmd->add_option("--tiles-per-op", o.tiles_per_op,
                   "Target tiles per op (0: one per thread, none under 1 MFLOP)")
      ->capture_default_str()
      ->check(CLI::Range(0, 1 << 24));
  add_precision_option(cmd, o.precision, {"fp32", "bf16", "int8"});
  add_tuning_option(cmd, o.tuning);
  add_layout_option(cmd, o.layout);
  cmd->add_option("--prune", o.prune, kPruneHelp)->type_name("off|STATEMENTS");
  cmd->add_option("--min-tile-flops", o.min_tile_flops, "Smallest tile in FLOPs (0: by rule)")
      ->capture_default_str()
      ->check(CLI::NonNegativeNumber);
  cmd->add_option("--tile-counts", o.tile_counts,
                   "Tiles per op when --tiles-per-op is 0: fixed (one per thread) or tail (TA-DNN's staircase, "
                   "with what finer tiles repeat priced at this machine's measured cost per moved element)")
      ->capture_default_str()->check(CLI::IsMember({"fixed", "tail"}));
  add_schedule_option(cmd, o.schedule, "aspen (tile dataflow) or barrier (op by op)");
  cmd->add_flag("--totals", o.totals_only, "Print the totals only, not every op");
  cmd->add_flag("--json", o.json,
                 "Print the plan as one JSON object: options, the machine probes it priced with and where they came "
                 "from, and per node its op, primitive, precision, tiles and grid (no timings: the same in every process)");
  cmd->add_option("--save", o.save_path,
                   "Write the TileGraph to this file (with the model's hash, bound shapes, options and grove's version)")
      ->type_name("FILE");
  cmd->add_option("--load", o.load_path,
                   "Load a saved TileGraph and check it against a fresh plan of the model with the same options")
      ->type_name("FILE");

  add_limit_options(cmd, o.limits);
  return cmd;
}

}  // namespace grove::cli
