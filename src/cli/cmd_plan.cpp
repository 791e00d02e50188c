// grove plan: how a model is cut into tiles, and what the tile DAG looks like: per op its
// tiles, grid and incoming edges; in total tiles, edges, depth and the critical path.
#include <algorithm>
#include <chrono>
#include <set>
#include <cstdio>

#include "cli/commands.h"
#include "cli/format.h"
#include "graph/choice_attrs.h"
#include "graph/epilogue_attrs.h"
#include "graph/precision_attr.h"
#include "kernels/gemm.h"
#include "kernels/conv_probe.h"
#include "kernels/move_cost.h"
#include "passes/flops.h"
#include "plan/plan.h"
#include "plan/plan_io.h"
#include "tune/tuned_plan.h"
#include "runtime/engine.h"
#include "runtime/model.h"

namespace grove::cli {
namespace {

std::string grid_str(const Shape& grid) {
  std::string s;
  for (size_t d = 0; d < grid.size(); ++d) s += (d ? "x" : "") + std::to_string(grid[d]);
  return s.empty() ? "1" : s;
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
  if (options.conv_layout == ConvLayout::channels_last) {
    options.transpose_flops = kernels::measure_transpose_flops();
    const kernels::WinogradNhwcProbe probe = kernels::measure_winograd_nhwc();
    options.winograd_nhwc_min_channels = probe.min_channels;
    options.winograd_nhwc_small_planes = probe.small_planes;
  }
  if (o.tile_counts == "tail") {
    options.tile_counts = TileCounts::tail_aware;
    options.move_flops = kernels::measure_move_flops();
    if (options.precision == Precision::bf16) options.amx_flop_cost = kernels::measure_amx_flop_cost();
  }
  if (options.precision == Precision::bf16) options.bf16_dot_gain = kernels::measure_bf16_dot_gain();

  auto start = std::chrono::steady_clock::now();
  std::shared_ptr<const Plan> plan;
  try {
    plan = tune::plan_with_tuning(model.graph(), options, o.tuning, {});
  } catch (const Error& e) {
    throw e.prefixed(o.model + ": ");
  }
  double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();

  const Plan& p = *plan;
  const TileGraph& tg = p.tiles;
  std::printf("model: %s\n", o.model.c_str());
  std::printf("plan: %s schedule, %d threads, tiles per op: %s\n", o.schedule.c_str(), options.threads,
              o.tiles_per_op > 0                                   ? std::to_string(o.tiles_per_op).c_str()
              : options.tile_counts == TileCounts::tail_aware ? strf("tail-aware, %g FLOPs per moved element%s", options.move_flops,
                                                                          options.precision == Precision::bf16 &&
                                                                                  kernels::precision_supported(kernels::Precision::bf16_amx, kernels::active_isa())
                                                                              ? strf(", %g per AMX FLOP", options.amx_flop_cost).c_str()
                                                                              : "").c_str()
                                                                   : "about 2 per thread");
  if (!p.precision.note.empty()) std::printf("precision: %s\n", p.precision.note.c_str());
  if (!p.options.choices_source.empty()) std::printf("tuning: %s\n", p.options.choices_source.c_str());
  if (p.options.conv_layout == ConvLayout::nchw) {
    std::printf("layout: NCHW (--layout nchw)\n");
  } else {
    int transposes = 0;  // the layout changes the plan added (a model's own Transposes have no "/nhwc")
    int64_t moved = 0;
    for (const Node& node : p.graph.nodes)
      if (node.op_type == "Transpose" && node.name.find("/nhwc/Transpose") != std::string::npos) {
        ++transposes;
        moved += numel(p.graph.values.at(node.outputs[0]).shape);
      }
    std::printf("layout: %d Conv%s channels-last (ConvNhwc, DepthwiseConvNhwc), the rest NCHW; %d Transpose%s "
                "between (%.2f M elements; %g FLOPs per moved element); Winograd layers from %lld input channels%s\n",
                p.channels_last_convs, p.channels_last_convs == 1 ? "" : "s", transposes, transposes == 1 ? "" : "s",
                double(moved) / 1e6, p.options.transpose_flops, static_cast<long long>(p.options.winograd_nhwc_min_channels),
                p.options.winograd_nhwc_small_planes ? ", also on 13x13 and 14x14 planes" : "");
  }
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
      if (tuned.count(node.name)) op += conv_primitive_choice(node).empty() ? " (tuned)" : " " + conv_primitive_choice(node) + " (tuned)";
      else if (!conv_primitive_choice(node).empty()) op += " " + conv_primitive_choice(node);  // the layout pass's Winograd
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

}  // namespace grove::cli
