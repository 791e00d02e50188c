// QuantizeLinear, DequantizeLinear and DynamicQuantizeLinear: ONNX's affine quantization,
// q = saturate(round_half_even(x / scale) + zero_point) and x = (q - zero_point) * scale,
// opsets 10 to 21 (axis, block_size and output_dtype attributes). The arithmetic is float32
// in the order the ONNX reference takes, so results match it bit for bit.
#include <algorithm>
#include <cmath>
#include <limits>
#include <string>
#include <type_traits>

#include "kernels/quantize.h"
#include "ops/fused_epilogue.h"
#include "ops/op.h"
#include "ops/op_util.h"
#include "ops/quant_util.h"

namespace grove {
namespace {

// Where each element of x finds its scale and zero point: one for the whole tensor, one per
// index along `axis` (1-D scale), or one per block of `block_size` along axis (scale of x's rank).
struct QuantLayout {
  enum class Mode { tensor, axis, block } mode = Mode::tensor;
  int64_t axis_len = 1, inner = 1, block = 1, blocks_along_axis = 1;

  int64_t param_index(int64_t i) const {
    if (mode == Mode::tensor) return 0;
    int64_t along = (i / inner) % axis_len;
    if (mode == Mode::axis) return along;
    int64_t outer = i / (inner * axis_len), rest = i % inner;
    return (outer * blocks_along_axis + along / block) * inner + rest;
  }
};

QuantLayout quant_layout(const Node& node, const Shape& x, const Shape& scale, const Shape* zero_point) {
  if (zero_point && *zero_point != scale)
    throw Error("zero point of shape " + shape_str(*zero_point) + " must have the scale's shape " + shape_str(scale));
  QuantLayout q;
  int64_t block = node.attr_int("block_size", 0);
  if (numel(scale) == 1 && scale.size() <= 1 && block == 0) return q;
  int64_t rank = static_cast<int64_t>(x.size());
  int64_t axis = normalize_axis(node, node.attr_int("axis", 1), std::max<int64_t>(rank, 1));
  if (rank == 0) throw Error("a scalar input takes a scalar scale, got " + shape_str(scale));
  q.axis_len = x[static_cast<size_t>(axis)];
  for (int64_t d = axis + 1; d < rank; ++d) q.inner *= x[static_cast<size_t>(d)];
  if (block == 0) {
    if (scale.size() != 1 || scale[0] != q.axis_len)
      throw Error("scale " + shape_str(scale) + " must be a scalar or hold one entry per index of axis " +
                  std::to_string(axis) + " of " + shape_str(x));
    q.mode = QuantLayout::Mode::axis;
    return q;
  }
  if (block < 0) throw Error("block_size must not be negative, got " + std::to_string(block));
  q.mode = QuantLayout::Mode::block;
  q.block = block;
  q.blocks_along_axis = (q.axis_len + block - 1) / block;
  Shape want = x;
  want[static_cast<size_t>(axis)] = q.blocks_along_axis;
  if (scale != want)
    throw Error("blocked scale must have shape " + shape_str(want) + " for block_size " + std::to_string(block) +
                ", got " + shape_str(scale));
  return q;
}

void check_scale_dtype(const ValueInfo& scale, const char* what) {
  if (scale.dtype != DType::f32)
    throw Unsupported(std::string(what) + " of dtype " + std::string(dtype_name(scale.dtype)) +
                      " is not supported (float32 is)");
}

// ---- QuantizeLinear(x, y_scale, y_zero_point?) -> y ----

DType quantize_output_dtype(const Node& node, std::span<const ValueInfo> in) {
  if (has_input(in, 2)) return in[2].dtype;
  int64_t onnx_type = node.attr_int("output_dtype", 0);
  return onnx_type == 0 ? DType::u8 : dtype_from_onnx(static_cast<int>(onnx_type));
}

void infer_quantize(const Node& node, std::span<const ValueInfo> in, std::span<ValueInfo> out) {
  require_inputs(node, in.size(), 2, 3);
  if (in[0].dtype != DType::f32 && in[0].dtype != DType::i32)
    throw Unsupported("x of dtype " + std::string(dtype_name(in[0].dtype)) + " is not supported (float32 and int32 are)");
  check_scale_dtype(in[1], "y_scale");
  DType y = quantize_output_dtype(node, in);
  require_quantized_dtype(y, "y");
  quant_layout(node, in[0].shape, in[1].shape, has_input(in, 2) ? &in[2].shape : nullptr);
  if (in[1].data) check_scales(*in[1].data, "y_scale");
  out[0] = ValueInfo{y, in[0].shape};
}

template <class Q>
void quantize_typed(const QuantLayout& layout, const Tensor& x, const float* scale, const Tensor* zero_point, Q* y) {
  const Q* zp = zero_point ? zero_point->data<Q>() : nullptr;
  if (layout.mode == QuantLayout::Mode::tensor && x.dtype() == DType::f32) {
    // One scale for all (QDQ models' activations): a loop without per-element index arithmetic.
    const float s = scale[0], z = zp ? static_cast<float>(zp[0]) : 0.0f;
    const float* xf = x.data<float>();
    if constexpr (std::is_same_v<Q, uint8_t>) {
      kernels::quantize_u8(xf, static_cast<size_t>(x.numel()), s, z, y);  // the same values, vectorised
    } else {
      for (int64_t i = 0; i < x.numel(); ++i) y[i] = saturate_round<Q>(xf[i] / s, z);
    }
    return;
  }
  std::vector<double> xv = x.dtype() == DType::f32 ? std::vector<double>() : x.to_f64();
  const float* xf = x.dtype() == DType::f32 ? x.data<float>() : nullptr;
  for (int64_t i = 0; i < x.numel(); ++i) {
    int64_t p = layout.param_index(i);
    float value = xf ? xf[i] : static_cast<float>(xv[static_cast<size_t>(i)]);
    y[i] = saturate_round<Q>(value / scale[p], zp ? static_cast<float>(zp[p]) : 0.0f);
  }
}

void reference_quantize(const Node& node, std::span<const Tensor* const> in, std::span<Tensor* const> out) {
  const Tensor* zero_point = optional_input(in, 2);
  QuantLayout layout = quant_layout(node, in[0]->shape(), in[1]->shape(), zero_point ? &zero_point->shape() : nullptr);
  check_scales(*in[1], "y_scale");
  visit_quantized(out[0]->dtype(), [&](auto tag) {
    using Q = decltype(tag);
    quantize_typed<Q>(layout, *in[0], in[1]->data<float>(), zero_point, out[0]->data<Q>());
  });
}

// ---- DequantizeLinear(x, x_scale, x_zero_point?) -> y ----

// DequantizeLinear may carry a fused epilogue (passes/fuse_epilogue.cpp): a per-column bias
// as input 3 and an activation, as in a QDQ transformer's DQ -> Add(bias) -> GELU.
constexpr size_t kDequantizeBiasInput = 3;

void infer_dequantize(const Node& node, std::span<const ValueInfo> in, std::span<ValueInfo> out) {
  require_inputs(node, in.size(), 2, has_fused_epilogue(node) ? kDequantizeBiasInput + 1 : 3);
  if (in[0].dtype != DType::i32) require_quantized_dtype(in[0].dtype, "x");
  check_scale_dtype(in[1], "x_scale");
  if (has_input(in, 2) && in[2].dtype != in[0].dtype)
    throw Error("x_zero_point is " + std::string(dtype_name(in[2].dtype)) + ", x is " + std::string(dtype_name(in[0].dtype)));
  quant_layout(node, in[0].shape, in[1].shape, has_input(in, 2) ? &in[2].shape : nullptr);
  out[0] = ValueInfo{DType::f32, in[0].shape};
  if (!has_fused_epilogue(node)) return;
  if (has_input(in, kDequantizeBiasInput)) {
    const ValueInfo& b = in[kDequantizeBiasInput];
    if (b.dtype != DType::f32 || out[0].shape.empty() || numel(b.shape) != out[0].shape.back())
      throw Error(node.describe() + ": fused bias " + shape_str(b.shape) + " does not fit output " + shape_str(out[0].shape));
  }
}

void reference_dequantize(const Node& node, std::span<const Tensor* const> in, std::span<Tensor* const> out) {
  const Tensor* zero_point = optional_input(in, 2);
  QuantLayout layout = quant_layout(node, in[0]->shape(), in[1]->shape(), zero_point ? &zero_point->shape() : nullptr);
  const float* scale = in[1]->data<float>();
  float* y = out[0]->data<float>();
  visit_dtype(in[0]->dtype(), [&](auto tag) {
    using Q = decltype(tag);
    if constexpr (std::is_integral_v<Q> && !std::is_same_v<Q, bool>) {
      const Q* x = in[0]->data<Q>();
      const Q* zp = zero_point ? zero_point->data<Q>() : nullptr;
      if (layout.mode == QuantLayout::Mode::tensor) {  // the same arithmetic, without index math
        const int64_t z = zp ? static_cast<int64_t>(zp[0]) : 0;
        const float s = scale[0];
        for (int64_t i = 0; i < in[0]->numel(); ++i) y[i] = static_cast<float>(static_cast<int64_t>(x[i]) - z) * s;
        return;
      }
      for (int64_t i = 0; i < in[0]->numel(); ++i) {
        int64_t p = layout.param_index(i);
        // int32 x: subtract exactly before the one rounding to float (int32 zero points are 0).
        float shifted = static_cast<float>(static_cast<int64_t>(x[i]) - (zp ? static_cast<int64_t>(zp[p]) : 0));
        y[i] = shifted * scale[p];
      }
    } else {
      throw Unsupported("x of dtype " + std::string(dtype_name(in[0]->dtype())) + " is not supported");
    }
  });
  apply_epilogue_reference(node, optional_input(in, kDequantizeBiasInput), nullptr, *out[0]);
}

// ---- DynamicQuantizeLinear(x) -> y (uint8), y_scale, y_zero_point ----

void infer_dynamic_quantize(const Node& node, std::span<const ValueInfo> in, std::span<ValueInfo> out) {
  require_inputs(node, in.size(), 1, 1);
  if (in[0].dtype != DType::f32)
    throw Unsupported("x of dtype " + std::string(dtype_name(in[0].dtype)) + " is not supported (float32 is)");
  out[0] = ValueInfo{DType::u8, in[0].shape};
  if (out.size() > 1) out[1] = ValueInfo{DType::f32, {}};
  if (out.size() > 2) out[2] = ValueInfo{DType::u8, {}};
}

void reference_dynamic_quantize(const Node& node, std::span<const Tensor* const> in, std::span<Tensor* const> out) {
  const float* x = in[0]->data<float>();
  const int64_t n = in[0]->numel();
  // The range always holds 0, so 0 quantizes exactly. The kernels (kernels/quantize.h) give
  // the scalar loops' bits on every ISA.
  const kernels::FloatRange range = kernels::range_with_zero(x, static_cast<size_t>(n));
  if (range.has_nan) throw Error(node.describe() + ": x holds NaN; its range cannot be quantized");
  const float lo = range.lo, hi = range.hi;
  if (std::isinf(lo) || std::isinf(hi)) throw Error(node.describe() + ": x holds an infinity; its range cannot be quantized");
  // An all-zero x has no range; scale 1 (as ONNX Runtime does) keeps y = 0 and avoids 0/0.
  float scale = hi == lo ? 1.0f : (hi - lo) / 255.0f;
  float zero_point = std::nearbyint(std::clamp(0.0f - lo / scale, 0.0f, 255.0f));
  kernels::quantize_u8(x, static_cast<size_t>(n), scale, zero_point, out[0]->data<uint8_t>());
  if (out.size() > 1 && out[1]) out[1]->data<float>()[0] = scale;
  if (out.size() > 2 && out[2]) out[2]->data<uint8_t>()[0] = static_cast<uint8_t>(zero_point);
}

}  // namespace

void register_quantize_ops(OpRegistry& registry) {
  registry.add("QuantizeLinear", with_traits(OpSpec{infer_quantize, reference_quantize}, kStaticQuant));
  registry.add("DequantizeLinear", with_traits(OpSpec{infer_dequantize, reference_dequantize}, kStaticQuant));
  registry.add("DynamicQuantizeLinear", {infer_dynamic_quantize, reference_dynamic_quantize});
}

}  // namespace grove
