// Tile rule of Resize and Upsample where the resize is bilinear over the last two dims of a
// 4-D float32 tensor, or nearest over them on 4-byte elements (resize_plan.h:
// is_plane_bilinear, is_plane_nearest): tiles take runs of (image, channel) planes, each reading
// its own input planes whole. An upsampling layer of a segmentation or detection net was one
// tile, run by one core while the others waited, and a nearest one went element by element
// through the reference's general gather. Every other resize stays one tile on the reference.
#include "ops/resize/resize_plan.h"
#include "ops/tile_util.h"

namespace grove::tiling {
namespace resize_rule {

enum class PlaneResize { none, bilinear, nearest };

PlaneResize plane_resize(const Node& node, std::span<const ValueInfo> in, const Shape& out) {
  if (in.empty()) return PlaneResize::none;
  try {
    const ResizePlan plan = resize_plan(node, in);
    if (in[0].dtype == DType::f32 && is_plane_bilinear(plan, in[0].shape, out)) return PlaneResize::bilinear;
    if (is_plane_nearest(plan, in[0].dtype, in[0].shape, out)) return PlaneResize::nearest;
    return PlaneResize::none;
  } catch (const Error&) {
    return PlaneResize::none;  // the reference reports what is wrong, naming the node
  }
}

bool by_planes(const Node& node, std::span<const ValueInfo> in, const Shape& out) {
  return plane_resize(node, in, out) != PlaneResize::none;
}

std::vector<int64_t> cuttable(const Node& node, std::span<const ValueInfo> in, std::span<const ValueInfo> out) {
  if (!by_planes(node, in, out[0].shape)) return none_cuttable(out[0].shape);
  return {1, 1, 0, 0};
}

void needs(const Node& node, std::span<const ValueInfo> in, std::span<const ValueInfo> out, const Region& out_region,
           std::span<Region> in_regions) {
  for (size_t i = 0; i < in.size(); ++i)
    in_regions[i] = in[i].present ? full_region(in[i].shape) : Region{};
  if (by_planes(node, in, out[0].shape))
    in_regions[0] = {out_region[0], out_region[1], {0, in[0].shape[2]}, {0, in[0].shape[3]}};
}

void run_tile(const Node& node, std::span<const Tensor* const> in, std::span<Tensor* const> out, const Region& out_region,
              const void*, TileScratch&) {
  Tensor& y = *out[0];
  check_region(node, out_region, y.shape());
  const std::vector<ValueInfo> infos = infos_of_tensors(in);
  const PlaneResize kind = plane_resize(node, infos, y.shape());
  if (kind == PlaneResize::none) return reference_whole(node, in, out, out_region);
  const ResizePlan plan = resize_plan(node, infos);
  const int64_t channels = y.dim(1);
  for (int64_t n = out_region[0].begin; n < out_region[0].end; ++n) {
    const int64_t begin = n * channels + out_region[1].begin, end = n * channels + out_region[1].end;
    if (kind == PlaneResize::bilinear) bilinear_planes(plan, *in[0], y, begin, end);
    else nearest_planes(plan, *in[0], y, begin, end);
  }
}

}  // namespace resize_rule

void add_resize_rules(RuleTable& t) {
  using namespace resize_rule;
  for (const char* op : {"Resize", "Upsample"}) t[op] = TileRule{cuttable, needs, run_tile};
}

}  // namespace grove::tiling
