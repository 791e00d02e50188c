// Tile rules of the elementwise quantization ops of QDQ models, cut anywhere, each tile a
// kernel call per contiguous run of its region:
//   grove.internal QLinearAdd (ops/quant/quant_add.cpp);
//   QuantizeLinear float32 -> uint8 and DequantizeLinear 8-bit -> float32 with one scale for
//   the tensor (the activations between the integer ops), DequantizeLinear with a fused
//   bias and activation too. Other scale layouts and dtypes are one whole tile on the reference.
#include <cmath>

#include "kernels/quantize.h"
#include "kernels/vmath.h"
#include "ops/fused_epilogue.h"
#include "ops/op_util.h"
#include "ops/quant/quant_add.h"
#include "ops/quant_util.h"
#include "ops/tile_util.h"

namespace grove::tiling {
namespace quant_elementwise_rule {

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
                  const Region& out_region, const void*, TileScratch&) {
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
  for_each_run(out[0]->shape(), out_region, [&](int64_t offset, int64_t count) {
    kernels::quantize_u8(x + offset, static_cast<size_t>(count), scale, zero_point, y + offset);
  });
}

// A fused epilogue (passes/fuse_epilogue.cpp): bias per column, then the activation, row by
// row of the region while it is in cache; the erf GELU on the vector kernel.
void apply_epilogue(const Node& node, const Tensor* bias, const Region& r, Tensor& y) {
  const kernels::ActivationParams act = epilogue_activation(node);
  const kernels::VMathKernels& k = kernels::vmath();
  if (r.empty()) return;
  const auto run = static_cast<size_t>(r.back().size());
  const float* b = bias ? bias->data<float>() + r.back().begin : nullptr;
  float* ys = y.data<float>();
  for_each_row(y.shape(), r, [&](int64_t offset, const std::vector<int64_t>&) {
    float* row = ys + offset;
    if (b) k.binary(kernels::BinaryOp::add, kernels::BinaryForm::vector_vector, run, row, b, row);
    if (act.kind == kernels::Activation::gelu_erf) k.unary(kernels::UnaryOp::gelu_erf, run, row, row);
    else if (act.kind != kernels::Activation::identity)
      for (size_t i = 0; i < run; ++i) row[i] = kernels::apply_activation(row[i], act);
  });
}

void run_dequantize(const Node& node, std::span<const Tensor* const> in, std::span<Tensor* const> out,
                    const Region& out_region, const void*, TileScratch&) {
  check_region(node, out_region, out[0]->shape());
  if (!dequantize_fast(node, infos_of_tensors(in))) return reference_whole(node, in, out, out_region);
  const float scale = in[1]->data<float>()[0];
  const Tensor* zero = optional_input(in, 2);
  const bool is_signed = in[0]->dtype() == DType::i8;
  const int32_t z = !zero ? 0 : is_signed ? zero->data<int8_t>()[0] : zero->data<uint8_t>()[0];
  float* y = out[0]->data<float>();
  // The reference's arithmetic: the difference exactly, then one float multiply.
  auto apply = [&](const auto* x) {
    for_each_run(out[0]->shape(), out_region, [&](int64_t offset, int64_t count) {
      for (int64_t i = offset; i < offset + count; ++i) y[i] = static_cast<float>(static_cast<int32_t>(x[i]) - z) * scale;
    });
  };
  if (is_signed) apply(in[0]->data<int8_t>());
  else apply(in[0]->data<uint8_t>());
  if (has_fused_epilogue(node)) apply_epilogue(node, optional_input(in, 3), out_region, *out[0]);
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
              const void*, TileScratch&) {
  check_region(node, out_region, out[0]->shape());
  const kernels::QAddParams p = qadd_params(node, in);
  const auto* a = reinterpret_cast<const uint8_t*>(in[0]->raw());
  const auto* b = reinterpret_cast<const uint8_t*>(in[3]->raw());
  auto* y = reinterpret_cast<uint8_t*>(out[0]->raw());
  for_each_run(out[0]->shape(), out_region, [&](int64_t offset, int64_t count) {
    kernels::qadd(a + offset, b + offset, static_cast<size_t>(count), p, y + offset);
  });
}

}  // namespace quant_elementwise_rule

void add_quant_elementwise_rules(RuleTable& t) {
  using namespace quant_elementwise_rule;
  t[internal_rule_key("QLinearAdd")] = TileRule{cuttable, needs, run_tile};
  t["QuantizeLinear"] = TileRule{elementwise_cuttable<quantize_fast>, same_region_needs, run_quantize};
  t["DequantizeLinear"] = TileRule{elementwise_cuttable<dequantize_fast3>, same_region_needs, run_dequantize};
}

}  // namespace grove::tiling
