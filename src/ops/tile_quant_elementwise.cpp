// Tile rules of the elementwise quantization ops of QDQ models, cut anywhere, each tile a
// kernel call per contiguous run of its region:
//   grove.internal QLinearAdd (ops/quant_add.cpp);
//   QuantizeLinear float32 -> uint8 and DequantizeLinear 8-bit -> float32 with one scale for
//   the tensor (the activations between the integer ops). Other scale layouts and dtypes are
//   one whole tile on the reference.
#include <cmath>

#include "kernels/quantize.h"
#include "ops/op_util.h"
#include "ops/quant_add.h"
#include "ops/quant_util.h"
#include "ops/tile_util.h"

namespace grove::tiling {
namespace {

// Calls run(offset, count) for each contiguous span of `r` in a row-major tensor of `shape`:
// trailing dims the region covers whole join the dim before them into one span, so a tile of
// whole rows of a [N, C, H, W] tensor is a few long runs, not H x C short ones.
template <class F>
void for_each_span(const Shape& shape, const Region& r, F&& run) {
  size_t d = shape.size();
  int64_t inner = 1;
  while (d > 1 && r[d - 1].begin == 0 && r[d - 1].end == shape[d - 1]) inner *= shape[--d];
  const Region outer(r.begin(), r.begin() + static_cast<std::ptrdiff_t>(d));
  const Shape outer_shape(shape.begin(), shape.begin() + static_cast<std::ptrdiff_t>(d));
  const int64_t count = (outer.empty() ? 1 : outer.back().size()) * inner;
  for_each_row(outer_shape, outer, [&](int64_t offset, const std::vector<int64_t>&) { run(offset * inner, count); });
}

// One scale and zero point for the whole tensor, as constants or not: the fast loops apply.
bool per_tensor(std::span<const ValueInfo> in) {
  if (numel(in[1].shape) != 1 || in[1].shape.size() > 1 || in[1].dtype != DType::f32) return false;
  return !has_input(in, 2) || numel(in[2].shape) == 1;
}

bool quantize_fast(const Node& node, std::span<const ValueInfo> in, std::span<const ValueInfo> out) {
  return per_tensor(in) && !node.has_attr("block_size") && in[0].dtype == DType::f32 && out[0].dtype == DType::u8;
}

bool dequantize_fast(const Node& node, std::span<const ValueInfo> in) {
  return per_tensor(in) && !node.has_attr("block_size") && (in[0].dtype == DType::u8 || in[0].dtype == DType::i8);
}

template <bool (*Fast)(const Node&, std::span<const ValueInfo>, std::span<const ValueInfo>)>
std::vector<int64_t> elementwise_cuttable(const Node& node, std::span<const ValueInfo> in, std::span<const ValueInfo> out) {
  return Fast(node, in, out) ? all_cuttable(out[0].shape) : none_cuttable(out[0].shape);
}

bool dequantize_fast3(const Node& node, std::span<const ValueInfo> in, std::span<const ValueInfo>) {
  return dequantize_fast(node, in);
}

void same_region_needs(const Node&, std::span<const ValueInfo> in, std::span<const ValueInfo>, const Region& out_region,
                       std::span<Region> in_regions) {
  for (size_t i = 0; i < in.size(); ++i) in_regions[i] = has_input(in, i) ? full_region(in[i].shape) : Region{};
  if (in[0].shape.size() == out_region.size()) in_regions[0] = out_region;
}

void run_quantize(const Node& node, std::span<const Tensor* const> in, std::span<Tensor* const> out,
                  const Region& out_region, const void*) {
  check_region(node, out_region, out[0]->shape());
  const std::vector<ValueInfo> infos = infos_of_tensors(in);
  const ValueInfo out_info{out[0]->dtype(), out[0]->shape()};
  if (!quantize_fast(node, infos, std::span<const ValueInfo>(&out_info, 1))) return reference_whole(node, in, out, out_region);
  check_scales(*in[1], "y_scale");
  const float scale = in[1]->data<float>()[0];
  const Tensor* zero = optional_input(in, 2);
  const float zero_point = zero ? static_cast<float>(zero->data<uint8_t>()[0]) : 0.0f;
  const float* x = in[0]->data<float>();
  uint8_t* y = out[0]->data<uint8_t>();
  for_each_span(out[0]->shape(), out_region, [&](int64_t offset, int64_t count) {
    kernels::quantize_u8(x + offset, static_cast<size_t>(count), scale, zero_point, y + offset);
  });
}

void run_dequantize(const Node& node, std::span<const Tensor* const> in, std::span<Tensor* const> out,
                    const Region& out_region, const void*) {
  check_region(node, out_region, out[0]->shape());
  if (!dequantize_fast(node, infos_of_tensors(in))) return reference_whole(node, in, out, out_region);
  const float scale = in[1]->data<float>()[0];
  const Tensor* zero = optional_input(in, 2);
  const bool is_signed = in[0]->dtype() == DType::i8;
  const int32_t z = !zero ? 0 : is_signed ? zero->data<int8_t>()[0] : zero->data<uint8_t>()[0];
  float* y = out[0]->data<float>();
  // The reference's arithmetic: the difference exactly, then one float multiply.
  auto apply = [&](const auto* x) {
    for_each_span(out[0]->shape(), out_region, [&](int64_t offset, int64_t count) {
      for (int64_t i = offset; i < offset + count; ++i) y[i] = static_cast<float>(static_cast<int32_t>(x[i]) - z) * scale;
    });
  };
  if (is_signed) apply(in[0]->data<int8_t>());
  else apply(in[0]->data<uint8_t>());
}

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
  for_each_span(out[0]->shape(), out_region, [&](int64_t offset, int64_t count) {
    kernels::qadd(a + offset, b + offset, static_cast<size_t>(count), p, y + offset);
  });
}

}  // namespace

void add_quant_elementwise_rules(RuleTable& t) {
  t[internal_rule_key("QLinearAdd")] = TileRule{cuttable, needs, run_tile};
  t["QuantizeLinear"] = TileRule{elementwise_cuttable<quantize_fast>, same_region_needs, run_quantize};
  t["DequantizeLinear"] = TileRule{elementwise_cuttable<dequantize_fast3>, same_region_needs, run_dequantize};
}

}  // namespace grove::tiling
