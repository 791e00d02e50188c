// GroupNormalization: shape rule, reference and tile rule, registered in one place.
// See group_norm.h.
#include "ops/group_norm/group_norm.h"

#include <cmath>

#include "ops/op.h"
#include "ops/op_util.h"
#include "ops/tile_util.h"

namespace grove {

GroupNormShape group_norm_shape(const Node& node, const Shape& x) {
  if (x.size() < 2) throw Error(node.describe() + ": X must have rank >= 2 ([N, C, ...]), got " + shape_str(x));
  GroupNormShape s;
  s.images = x[0];
  s.channels = x[1];
  s.inner = dims_product(x, 2, x.size());
  if (!node.has_attr("num_groups")) throw Error(node.describe() + ": the num_groups attribute is required");
  s.groups = node.attr_int("num_groups", 0);
  if (s.groups <= 0 || s.channels % s.groups != 0)
    throw Error(node.describe() + ": num_groups " + std::to_string(s.groups) + " must be positive and divide the " +
                std::to_string(s.channels) + " channels");
  s.per_channel = node.opset <= 0 || node.opset >= 21;
  return s;
}

void group_norm_group(const GroupNormShape& s, int64_t n, int64_t g, double epsilon, const float* x, const float* scale,
                      const float* bias, float* y) {
  const int64_t group_size = s.channels_per_group() * s.inner;
  const int64_t base = (n * s.channels + g * s.channels_per_group()) * s.inner;
  double mean = 0;
  for (int64_t i = 0; i < group_size; ++i) mean += x[base + i];
  mean /= static_cast<double>(group_size);
  double var = 0;
  for (int64_t i = 0; i < group_size; ++i) var += (x[base + i] - mean) * (x[base + i] - mean);
  var /= static_cast<double>(group_size);
  const double inv_std = 1.0 / std::sqrt(var + epsilon);
  for (int64_t c = 0; c < s.channels_per_group(); ++c) {
    const int64_t param = s.per_channel ? g * s.channels_per_group() + c : g;
    const int64_t row = base + c * s.inner;
    for (int64_t i = 0; i < s.inner; ++i)
      y[row + i] = static_cast<float>((x[row + i] - mean) * inv_std * scale[param] + bias[param]);
  }
}

namespace group_norm_op {

void infer(const Node& node, std::span<const ValueInfo> in, std::span<ValueInfo> out) {
  require_inputs(node, in.size(), 3, 3);
  for (size_t i = 0; i < 3; ++i)
    if (in[i].dtype != DType::f32) throw Unsupported(node.describe() + ": only float32 inputs are supported");
  if (node.attr_int("stash_type", 1) != 1)
    throw Unsupported(node.describe() + ": stash_type other than 1 (float32 statistics) is not supported");
  const GroupNormShape s = group_norm_shape(node, in[0].shape);
  const int64_t params = s.per_channel ? s.channels : s.groups;
  for (size_t i = 1; i < 3; ++i)
    if (in[i].shape != Shape{params})
      throw Error(node.describe() + ": " + (i == 1 ? "scale" : "bias") + " " + shape_str(in[i].shape) + " must be [" +
                  std::to_string(params) + "] (one value per " + (s.per_channel ? "channel" : "group") + " at opset " +
                  std::to_string(node.opset) + ")");
  out[0] = ValueInfo{DType::f32, in[0].shape};
}

void reference(const Node& node, std::span<const Tensor* const> in, std::span<Tensor* const> out) {
  const GroupNormShape s = group_norm_shape(node, in[0]->shape());
  const double epsilon = node.attr_float("epsilon", 1e-5f);
  for (int64_t n = 0; n < s.images; ++n)
    for (int64_t g = 0; g < s.groups; ++g)
      group_norm_group(s, n, g, epsilon, in[0]->data<float>(), in[1]->data<float>(), in[2]->data<float>(),
                       out[0]->data<float>());
}

// Tiles hold whole groups: cut along the images, and along the channels in steps of a group.
std::vector<int64_t> cuttable(const Node& node, std::span<const ValueInfo> in, std::span<const ValueInfo> out) {
  std::vector<int64_t> blocks = tiling::none_cuttable(out[0].shape);
  blocks[0] = 1;
  blocks[1] = group_norm_shape(node, in[0].shape).channels_per_group();
  return blocks;
}

void needs(const Node& node, std::span<const ValueInfo> in, std::span<const ValueInfo>, const Region& out_region,
           std::span<Region> in_regions) {
  const GroupNormShape s = group_norm_shape(node, in[0].shape);
  Region x = out_region;
  for (size_t d = 2; d < x.size(); ++d) x[d] = {0, in[0].shape[d]};
  in_regions[0] = x;
  const Range params = s.per_channel ? out_region[1]
                                     : Range{out_region[1].begin / s.channels_per_group(),
                                             (out_region[1].end + s.channels_per_group() - 1) / s.channels_per_group()};
  in_regions[1] = in_regions[2] = Region{params};
}

void run_tile(const Node& node, std::span<const Tensor* const> in, std::span<Tensor* const> out, const Region& r,
              const void*, TileScratch&) {
  tiling::check_region(node, r, out[0]->shape());
  const GroupNormShape s = group_norm_shape(node, in[0]->shape());
  const double epsilon = node.attr_float("epsilon", 1e-5f);
  const int64_t per_group = s.channels_per_group();
  if (r[1].begin % per_group != 0 || (r[1].end % per_group != 0 && r[1].end != s.channels))
    throw Error(node.describe() + ": a tile must hold whole groups");
  for (int64_t n = r[0].begin; n < r[0].end; ++n)
    for (int64_t g = r[1].begin / per_group; g < r[1].end / per_group; ++g)
      group_norm_group(s, n, g, epsilon, in[0]->data<float>(), in[1]->data<float>(), in[2]->data<float>(),
                       out[0]->data<float>());
}

const TileRule kTileRule = {cuttable, needs, run_tile};

}  // namespace group_norm_op

void register_group_norm_op(OpRegistry& registry) {
  registry.add("GroupNormalization", {.infer = group_norm_op::infer,
                                      .reference = group_norm_op::reference,
                                      .tile_rule = &group_norm_op::kTileRule});
}

}  // namespace grove
