#include "tune/conv_candidates.h"

#include <algorithm>
#include <cmath>
#include <set>

#include "graph/node_decisions.h"
#include "kernels/conv_nchwc.h"
#include "ops/conv/channels_blocked.h"
#include "ops/op.h"
#include "ops/op_names.h"
#include "ops/conv/tile_conv_winograd.h"
#include "passes/passes.h"

namespace grove::tune {

bool tunable_conv(const Plan& plan, size_t n, ConvConfig* config) {
  const Node& node = plan.graph.nodes[n];
  if (node.op_type != kConv || !node.domain.empty() || !plan.rules[n] || node.inputs.size() < 2 ||
      node.outputs.empty() || node.name.empty() || node.name.find('\n') != std::string::npos)
    return false;
  auto x = plan.graph.values.find(node.inputs[0]), w = plan.graph.values.find(node.inputs[1]),
       y = plan.graph.values.find(node.outputs[0]);
  if (x == plan.graph.values.end() || w == plan.graph.values.end() || y == plan.graph.values.end()) return false;
  const Shape &xs = x->second.shape, &ws = w->second.shape, &ys = y->second.shape;
  // 2-D, and not one input channel per group of several groups: depthwise runs a direct loop
  // whose grid the rule already fits to the plane. A stem on one input channel (a grey image)
  // is priced: unpriced, a neighbour's layout choice sent it back to its slow NCHW loop.
  if (x->second.dtype != DType::f32 || xs.size() != 4 || ws.size() != 4 || ys.size() != 4) return false;
  if (ws[1] <= 1 && node.attr_int("group", 1) > 1) return false;
  if (config) {
    const std::vector<int64_t> strides = node.attr_ints("strides", {1, 1});
    *config = {.batch = xs[0], .cin = xs[1], .cout = ws[0], .in_h = xs[2], .in_w = xs[3], .out_h = ys[2],
               .out_w = ys[3], .kernel_h = ws[2], .kernel_w = ws[3], .stride_h = strides.size() > 0 ? strides[0] : 1,
               .stride_w = strides.size() > 1 ? strides[1] : 1, .group = node.attr_int("group", 1)};
  }
  return true;
}

int64_t tile_count(const Shape& shape, const Shape& extent) {
  int64_t tiles = 1;
  for (size_t d = 0; d < shape.size() && d < extent.size(); ++d)
    tiles *= extent[d] > 0 ? (shape[d] + extent[d] - 1) / extent[d] : 1;
  return tiles;
}

bool tunable_matmul(const Plan& plan, size_t n) {
  const Node& node = plan.graph.nodes[n];
  if ((node.op_type != kMatMul && node.op_type != kGemm) || !node.domain.empty() || !plan.rules[n] ||
      node.inputs.size() < 2 || node.outputs.empty() || node.name.empty() || node.name.find('\n') != std::string::npos)
    return false;
  auto a = plan.graph.values.find(node.inputs[0]), y = plan.graph.values.find(node.outputs[0]);
  return a != plan.graph.values.end() && y != plan.graph.values.end() && a->second.dtype == DType::f32 &&
         y->second.shape.size() >= 2 && plan.graph.initializers.count(node.inputs[1]) > 0;
}

std::vector<ConvCandidate> matmul_candidates(const Plan& plan, size_t n) {
  const Shape& y = plan.graph.values.at(plan.graph.nodes[n].outputs[0]).shape;
  const size_t rank = y.size();
  std::vector<size_t> rows_first = {rank - 2}, columns_first = {rank - 1};
  for (size_t d = rank - 2; d-- > 0;) rows_first.push_back(d), columns_first.push_back(d);
  rows_first.push_back(rank - 1);
  columns_first.insert(columns_first.begin() + 1, rank - 2);
  const int64_t threads = plan.options.threads;
  std::vector<ConvCandidate> out;
  std::set<Shape> seen;
  for (int64_t target : {threads, 2 * threads, 4 * threads})
    for (const auto& order : {rows_first, columns_first}) {
      Shape e = candidate_extent(plan, static_cast<int32_t>(n), "", target, order);
      if (!e.empty() && seen.insert(e).second) out.push_back({"", e, tile_count(y, e)});
    }
  return out;
}

ConvCandidate rule_choice(const Plan& plan, size_t n) {
  const Node& node = plan.graph.nodes[n];
  const Shape& y = plan.graph.values.at(node.outputs[0]).shape;
  ConvCandidate rule{"", plan.tile_extent[n], tile_count(y, plan.tile_extent[n])};
  if (node.op_type == kConvNchwc && node.domain == kGroveDomain) {
    rule.primitive = "nchwc";
  } else if (node.op_type == kConvNhwc && node.domain == kGroveDomain) {
    const ConvPrimitive p = conv_primitive_choice(node);
    rule.primitive = p == ConvPrimitive::winograd ? "winograd_nhwc" : p == ConvPrimitive::unset ? "nhwc" : conv_primitive_name(p);
  } else if (node.op_type == kConv && node.domain.empty()) {
    const Shape& x = plan.graph.values.at(node.inputs[0]).shape;
    const Shape& w = plan.graph.values.at(node.inputs[1]).shape;
    rule.primitive = tiling::conv_node_uses_winograd(node, x, w) ? "winograd"
                     : tiling::conv_node_uses_direct(node, x, w) ? "direct"
                                                                 : "gemm";
  }
  return rule;
}

namespace {

// The block sizes the channels-last tile rule allows node n, as ConvNhwc would run it with this
// primitive ("nhwc": the GEMM, or a Winograd form): its infos are n's with x, the residual and y
// rotated to NHWC.
std::vector<int64_t> channels_last_blocks(const Plan& plan, size_t n, const std::string& primitive) {
  Node twin = plan.graph.nodes[n];
  twin.op_type = twin.attr_int("group", 1) == 1 ? kConvNhwc : kDepthwiseConvNhwc;
  twin.domain = kGroveDomain;
  apply_primitive_choices_to_node(twin, primitive_named(twin, primitive), DecisionSource::probe);
  const TileRule* rule = find_tile_rule(twin);
  if (!rule) return {};
  auto rotated = [&](const std::string& name) {
    ValueInfo v = plan.graph.values.at(name);
    v.shape = {v.shape[0], v.shape[2], v.shape[3], v.shape[1]};
    v.data = nullptr;
    return v;
  };
  std::vector<ValueInfo> in;
  for (size_t i = 0; i < twin.inputs.size(); ++i) {
    if (twin.inputs[i].empty()) in.push_back({DType::undefined, {}, nullptr, false});
    else if (i == 0 || i == kEpilogueResidualInput) in.push_back(rotated(twin.inputs[i]));
    else in.push_back(plan.graph.values.at(twin.inputs[i]));
  }
  const std::vector<ValueInfo> out = {rotated(twin.outputs[0])};
  return rule->cuttable(twin, in, out);
}

// Whether every dim of `extent` is uncut (0 or whole) or a multiple of its block.
bool fits_blocks(const Shape& shape, const Shape& extent, const std::vector<int64_t>& blocks) {
  if (blocks.size() != shape.size() || extent.size() != shape.size()) return false;
  for (size_t d = 0; d < shape.size(); ++d)
    if (extent[d] > 0 && extent[d] < shape[d] && (blocks[d] == 0 || extent[d] % blocks[d] != 0)) return false;
  return true;
}

}  // namespace

std::vector<ConvCandidate> conv_candidates(const Plan& plan, size_t n) {
  const Node& node = plan.graph.nodes[n];
  const Shape& x = plan.graph.values.at(node.inputs[0]).shape;
  const Shape& w = plan.graph.values.at(node.inputs[1]).shape;
  const Shape& y = plan.graph.values.at(node.outputs[0]).shape;
  std::vector<std::string> primitives = {"gemm"};
  // A bf16 plan keeps Winograd layers in fp32 on the other path: only the GEMM is a choice there.
  if (plan.precision.precision == Precision::fp32 && tiling::conv_node_fits_winograd(node, x, w))
    primitives.push_back("winograd");
  // The direct kernel where its rule might take it: few input channels (a stem).
  if (plan.precision.precision == Precision::fp32 && x.size() == 4 && x[1] <= 4 && tiling::conv_node_fits_direct(node, x, w))
    primitives.push_back("direct");
  const int64_t threads = plan.options.threads;
  const std::vector<int64_t> targets =
      threads == 1 ? std::vector<int64_t>{1} : std::vector<int64_t>{threads, 2 * threads, 4 * threads};
  // Rows first (the planner's own order: narrow dependencies across layers) or output channels
  // first (each tile streams only its share of the weights).
  const std::vector<std::vector<size_t>> orders = {{2, 1, 0, 3}, {1, 2, 0, 3}};
  std::vector<ConvCandidate> out;
  std::set<std::pair<std::string, Shape>> seen;
  for (const std::string& p : primitives)
    for (int64_t target : targets)
      for (const auto& order : orders) {
        Shape e = candidate_extent(plan, static_cast<int32_t>(n), p, target, order);
        if (e.empty() || !seen.insert({p, e}).second) continue;
        out.push_back({p, e, tile_count(y, e)});
      }
  // Channels-last: the GEMM's grids with the dims in NHWC order, where that rule allows them;
  // and the channels-last Winograd on the grids of either NCHW primitive its rule allows.
  if (can_run_channels_last(plan.graph, node)) {
    const Shape y_nhwc = {y[0], y[2], y[3], y[1]};
    const size_t nchw_candidates = out.size();
    const bool winograd = std::find(primitives.begin(), primitives.end(), "winograd") != primitives.end() &&
                          node.attr_int("group", 1) == 1;
    for (const std::string p : {"nhwc", "winograd_nhwc", "winograd_f2x3_nhwc"}) {
      if (p != "nhwc" && !winograd) continue;
      const std::vector<int64_t> blocks = channels_last_blocks(plan, n, p);
      for (size_t i = 0; i < nchw_candidates; ++i) {
        if (out[i].primitive != "gemm" && (p == "nhwc" || out[i].primitive != "winograd")) continue;
        const Shape& e = out[i].extent;
        const Shape nhwc = {e[0], e[2], e[3], e[1]};
        if (fits_blocks(y_nhwc, nhwc, blocks) && seen.insert({p, nhwc}).second)
          out.push_back({p, nhwc, tile_count(y_nhwc, nhwc)});
      }
      // Its rule cuts a small plane by whole panels of output channels only, which a layer of
      // few channels does not have: then one tile is its grid.
      if (p != "nhwc" && seen.insert({p, y_nhwc}).second) out.push_back({p, y_nhwc, 1});
    }
  }
  // Channel-blocked: the GEMM's grids with the channels in pairs of blocks (its register
  // tile), where the conv's channels are whole blocks.
  const auto block = static_cast<int64_t>(kernels::conv_nchwc_block(kernels::active_isa()));
  if (plan.precision.precision == Precision::fp32 && can_run_nchwc(plan.graph, node, block)) {
    const Shape y_blocked = blocked_shape(y, block);
    const size_t nchw_candidates = out.size();
    for (size_t i = 0; i < nchw_candidates; ++i) {
      const Shape& e = out[i].extent;
      if (out[i].primitive != "gemm" || e.size() != 4 || e[3] < y[3] || (e[1] < y[1] && e[1] % (2 * block) != 0))
        continue;
      const Shape blocked = {e[0], std::min(e[1], y[1]) / block, e[2], y[3], block};
      if (seen.insert({"nchwc", blocked}).second) out.push_back({"nchwc", blocked, tile_count(y_blocked, blocked)});
    }
  }
  // A conv on a chain of independent paths keeps them apart: only grids whose every tile lies
  // within one path (or holds whole paths) and that cut the paths apart. A grid across paths
  // makes every tile read every path of the conv before, the structure DCCNN removed, and the
  // performance model does not price that (a rows-first grid won on its predictions and undid
  // the paths of every decoupled model).
  const int64_t paths = n < plan.path_chain.size() ? plan.path_chain[n] : 0;
  if (paths > 1 && y.size() == 4 && y[1] % paths == 0) {
    const int64_t per_path = y[1] / paths;
    std::erase_if(out, [&](const ConvCandidate& c) {
      const Shape e = nchw_extent(c.primitive, c.extent);
      const int64_t channels = e.size() == 4 ? std::min(e[1], y[1]) : y[1];
      return channels >= y[1] || (per_path % channels != 0 && channels % per_path != 0);
    });
  }
  return out;
}

bool channels_last_primitive(const std::string& primitive) {
  const std::optional<ConvPrimitive> p = parse_conv_primitive(primitive);
  return p && channels_last_choice(*p);
}

Shape nchw_extent(const std::string& primitive, const Shape& extent) {
  if (primitive == "nchwc" && extent.size() == 5) return {extent[0], extent[1] * extent[4], extent[2], extent[3]};
  if (!channels_last_primitive(primitive) || extent.size() != 4) return extent;
  return {extent[0], extent[3], extent[1], extent[2]};
}

std::vector<double> conv_features(const ConvConfig& c, const Shape& extent, int64_t tiles, int threads) {
  auto lg = [](int64_t v) { return std::log2(double(std::max<int64_t>(v, 1))); };
  const double rows_share = extent.size() == 4 && c.out_h > 0 ? double(std::min(extent[2], c.out_h)) / double(c.out_h) : 1;
  const double channel_share = extent.size() == 4 && c.cout > 0 ? double(std::min(extent[1], c.cout)) / double(c.cout) : 1;
  return {lg(c.batch),    lg(c.cin),      lg(c.cout),     lg(c.in_h),     lg(c.in_w),  lg(c.out_h),
          lg(c.out_w),    lg(c.kernel_h), lg(c.kernel_w), lg(c.stride_h), lg(c.group), double(threads),
          lg(tiles),      rows_share,     channel_share,
          // The work itself, so the model learns a rate rather than a product of sizes.
          lg(c.batch) + lg(c.cout) + lg(c.out_h) + lg(c.out_w) + lg(c.cin / std::max<int64_t>(c.group, 1)) +
              lg(c.kernel_h) + lg(c.kernel_w)};
}

}  // namespace grove::tune
