// Tile rule of grove.internal QLinearAdd (ops/quant_add.cpp): elementwise on one shape, cut
// anywhere; a tile runs the kernel over each contiguous run of its region.
#include "ops/op_util.h"
#include "ops/quant_add.h"
#include "ops/tile_util.h"

namespace grove::tiling {
namespace {

std::vector<int64_t> cuttable(const Node&, std::span<const ValueInfo>, std::span<const ValueInfo> out) {
  return all_cuttable(out[0].shape);
}

void needs(const Node&, std::span<const ValueInfo> in, std::span<const ValueInfo>, const Region& out_region,
           std::span<Region> in_regions) {
  for (size_t i = 0; i < in.size(); ++i) in_regions[i] = full_region(in[i].shape);
  in_regions[0] = in_regions[3] = out_region;
}

void run_tile(const Node& node, std::span<const Tensor* const> in, std::span<Tensor* const> out, const Region& out_region,
              const void*) {
  check_region(node, out_region, out[0]->shape());
  const kernels::QAddParams p = qadd_params(node, in);
  const auto* a = reinterpret_cast<const uint8_t*>(in[0]->raw());
  const auto* b = reinterpret_cast<const uint8_t*>(in[3]->raw());
  auto* y = reinterpret_cast<uint8_t*>(out[0]->raw());
  // Trailing dims the region covers whole join the run before them into one contiguous span,
  // so a tile of whole rows of a [N, C, H, W] tensor is a few long kernel calls, not H x C short ones.
  const Shape& shape = out[0]->shape();
  size_t d = shape.size();
  int64_t inner = 1;
  while (d > 1 && out_region[d - 1].begin == 0 && out_region[d - 1].end == shape[d - 1]) inner *= shape[--d];
  Region outer(out_region.begin(), out_region.begin() + static_cast<std::ptrdiff_t>(d));
  Shape outer_shape(shape.begin(), shape.begin() + static_cast<std::ptrdiff_t>(d));
  const auto run = static_cast<size_t>((outer.empty() ? 1 : outer.back().size()) * inner);
  for_each_row(outer_shape, outer, [&](int64_t offset, const std::vector<int64_t>&) {
    kernels::qadd(a + offset * inner, b + offset * inner, run, p, y + offset * inner);
  });
}

}  // namespace

void add_quant_add_rules(RuleTable& t) { t[internal_rule_key("QLinearAdd")] = TileRule{cuttable, needs, run_tile}; }

}  // namespace grove::tiling
