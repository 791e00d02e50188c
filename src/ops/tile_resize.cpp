// Tile rule of Resize and Upsample where the resize is bilinear over the last two dims of a
// 4-D float32 tensor (resize_plan.h: is_plane_bilinear): tiles take runs of (image, channel)
// planes, each reading its own input planes whole. An upsampling layer of a segmentation or
// detection net was one tile, run by one core while the others waited. Every other resize
// stays one tile on the reference.
#include "ops/resize_plan.h"
#include "ops/tile_util.h"

namespace grove::tiling {
namespace {

bool plane_bilinear(const Node& node, std::span<const ValueInfo> in, const Shape& out) {
  if (in.empty() || in[0].dtype != DType::f32) return false;
  try {
    return is_plane_bilinear(resize_plan(node, in), in[0].shape, out);
  } catch (const Error&) {
    return false;  // the reference reports what is wrong, naming the node
  }
}

std::vector<int64_t> cuttable(const Node& node, std::span<const ValueInfo> in, std::span<const ValueInfo> out) {
  if (!plane_bilinear(node, in, out[0].shape)) return none_cuttable(out[0].shape);
  return {1, 1, 0, 0};
}

void needs(const Node& node, std::span<const ValueInfo> in, std::span<const ValueInfo> out, const Region& out_region,
           std::span<Region> in_regions) {
  for (size_t i = 0; i < in.size(); ++i)
    in_regions[i] = in[i].present ? full_region(in[i].shape) : Region{};
  if (plane_bilinear(node, in, out[0].shape))
    in_regions[0] = {out_region[0], out_region[1], {0, in[0].shape[2]}, {0, in[0].shape[3]}};
}

void run_tile(const Node& node, std::span<const Tensor* const> in, std::span<Tensor* const> out, const Region& out_region,
              const void*, TileScratch&) {
  Tensor& y = *out[0];
  check_region(node, out_region, y.shape());
  const std::vector<ValueInfo> infos = infos_of_tensors(in);
  if (!plane_bilinear(node, infos, y.shape())) return reference_whole(node, in, out, out_region);
  const ResizePlan plan = resize_plan(node, infos);
  const int64_t channels = y.dim(1);
  for (int64_t n = out_region[0].begin; n < out_region[0].end; ++n)
    bilinear_planes(plan, *in[0], y, n * channels + out_region[1].begin, n * channels + out_region[1].end);
}

}  // namespace

void add_resize_rules(RuleTable& t) {
  for (const char* op : {"Resize", "Upsample"}) t[op] = TileRule{cuttable, needs, run_tile};
}

}  // namespace grove::tiling
