// Cast and CastLike between float32/64, the integer types and bool. Cast to float16 gives
// float32 values rounded to half precision: grove computes in float32 and widens float16
// weights at import, so a float16-converted model (its inputs Cast to float16, its outputs
// back to float32) runs in float32 with the casts' rounding kept.
#include <cstring>

#include "ops/elementwise.h"

namespace grove::elementwise {
namespace {

constexpr int64_t kOnnxFloat16 = 10;

// The nearest half-precision value (ties to even), as a float; beyond the largest half, inf.
float round_to_half(float x) {
  if (!std::isfinite(x)) return x;
  const float a = std::fabs(x);
  if (a < 6.103515625e-05f) return std::nearbyint(x * 16777216.0f) / 16777216.0f;  // subnormal halves: k * 2^-24
  uint32_t bits;
  std::memcpy(&bits, &x, 4);
  bits += 0xfffu + ((bits >> 13) & 1u);  // round the 23-bit mantissa to 10 bits, ties to even
  bits &= ~0x1fffu;
  float r;
  std::memcpy(&r, &bits, 4);
  return std::fabs(r) > 65504.0f ? std::copysign(INFINITY, x) : r;
}

// The `to` attribute as a dtype grove computes in; float16, bfloat16 and string are valid
// ONNX targets that grove does not produce.
DType cast_target(const Node& node) {
  if (!node.has_attr("to")) throw Error(node.describe() + ": missing attribute 'to'");
  int64_t to = node.attr_int("to", 0);
  if (to == kOnnxFloat16) return DType::f32;
  DType dtype = dtype_from_onnx(static_cast<int>(to));
  if (dtype == DType::undefined && to >= 1 && to <= 16)  // 14, 15: complex, 16: bfloat16
    throw Unsupported(node.describe() + ": casting to ONNX data type " + std::to_string(to) + " is not supported");
  if (dtype == DType::undefined) throw Error(node.describe() + ": 'to' is not an ONNX data type: " + std::to_string(to));
  require_dtype(node, dtype, kAny, "target");
  return dtype;
}

void cast_infer(const Node& node, std::span<const ValueInfo> in, std::span<ValueInfo> out) {
  require_inputs(node, in.size(), 1, 1);
  require_dtype(node, in[0].dtype, kAny);
  out[0].dtype = cast_target(node);
  out[0].shape = in[0].shape;
}

// CastLike (opset 15): the target dtype is that of the second input.
void cast_like_infer(const Node& node, std::span<const ValueInfo> in, std::span<ValueInfo> out) {
  require_inputs(node, in.size(), 2, 2);
  require_dtype(node, in[0].dtype, kAny);
  require_dtype(node, in[1].dtype, kAny, "target_type");
  out[0].dtype = in[1].dtype;
  out[0].shape = in[0].shape;
}

void cast_reference(const Node& node, std::span<const Tensor* const> in, std::span<Tensor* const> out) {
  if (node.op_type == "Cast" && node.attr_int("to", 0) == kOnnxFloat16) {
    dispatch<kAny>(in[0]->dtype(), [&](auto from_tag) {
      using From = decltype(from_tag);
      map_unary<float, From>(*in[0], *out[0], [](From x) { return round_to_half(convert<float, From>(x)); });
    });
    return;
  }
  dispatch<kAny>(in[0]->dtype(), [&](auto from_tag) {
    dispatch<kAny>(out[0]->dtype(), [&](auto to_tag) {
      using From = decltype(from_tag);
      using To = decltype(to_tag);
      map_unary<To, From>(*in[0], *out[0], convert<To, From>);
    });
  });
}

}  // namespace

void register_cast_ops(OpRegistry& r) {
  r.add("Cast", OpDef{&cast_infer, &cast_reference});
  r.add("CastLike", OpDef{&cast_like_infer, &cast_reference});
}

}  // namespace grove::elementwise
