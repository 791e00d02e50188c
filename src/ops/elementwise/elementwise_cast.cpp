// Cast and CastLike between float32/64, float16, bfloat16, the integer types and bool. The
// 16-bit floats are storage types here: values are widened to float32 on the way in and
// rounded (half to even) from double on the way out, so every conversion rounds once, as
// numpy's astype does.
#include "kernels/half.h"
#include "ops/elementwise/elementwise.h"

namespace grove::elementwise {
namespace {

bool is_half(DType dtype) { return dtype == DType::f16 || dtype == DType::bf16; }

void require_castable(const Node& node, DType dtype, const char* what = "input") {
  if (!is_half(dtype)) require_dtype(node, dtype, kAny, what);
}

// The `to` attribute as a dtype grove casts to; string and complex are valid ONNX targets
// that grove does not produce.
DType cast_target(const Node& node) {
  if (!node.has_attr("to")) throw Error(node.describe() + ": missing attribute 'to'");
  int64_t to = node.attr_int("to", 0);
  DType dtype = dtype_from_onnx(static_cast<int>(to));
  if (dtype == DType::undefined && to >= 1 && to <= 16)  // 14, 15: complex
    throw Unsupported(node.describe() + ": casting to ONNX data type " + std::to_string(to) + " is not supported");
  if (dtype == DType::undefined) throw Error(node.describe() + ": 'to' is not an ONNX data type: " + std::to_string(to));
  require_castable(node, dtype, "target");
  return dtype;
}

void cast_infer(const Node& node, std::span<const ValueInfo> in, std::span<ValueInfo> out) {
  require_inputs(node, in.size(), 1, 1);
  require_castable(node, in[0].dtype);
  out[0].dtype = cast_target(node);
  out[0].shape = in[0].shape;
}

// CastLike (opset 15): the target dtype is that of the second input.
void cast_like_infer(const Node& node, std::span<const ValueInfo> in, std::span<ValueInfo> out) {
  require_inputs(node, in.size(), 2, 2);
  require_castable(node, in[0].dtype);
  require_castable(node, in[1].dtype, "target_type");
  out[0].dtype = in[1].dtype;
  out[0].shape = in[0].shape;
}

void cast_reference(const Node&, std::span<const Tensor* const> in, std::span<Tensor* const> out) {
  // float32 <-> float16 round once either way: the conversion instructions give the same bits.
  const size_t n = static_cast<size_t>(in[0]->numel());
  uint16_t* y16 = reinterpret_cast<uint16_t*>(out[0]->raw());
  const uint16_t* x16 = reinterpret_cast<const uint16_t*>(in[0]->raw());
  if (in[0]->dtype() == DType::f32 && out[0]->dtype() == DType::f16 &&
      kernels::convert_f32_to_f16(in[0]->data<float>(), y16, n))
    return;
  if (in[0]->dtype() == DType::f16 && out[0]->dtype() == DType::f32 &&
      kernels::convert_f16_to_f32(x16, out[0]->data<float>(), n))
    return;
  if (is_half(out[0]->dtype())) {
    // to_f64 is exact for every source but int64 past 2^53, far past the 16-bit floats' precision
    std::vector<double> values = in[0]->to_f64();
    uint16_t* y = reinterpret_cast<uint16_t*>(out[0]->raw());
    auto narrow = out[0]->dtype() == DType::f16 ? f64_to_f16 : f64_to_bf16;
    for (size_t i = 0; i < values.size(); ++i) y[i] = narrow(values[i]);
    return;
  }
  if (is_half(in[0]->dtype())) {
    Tensor wide(DType::f32, in[0]->shape());
    const uint16_t* x = reinterpret_cast<const uint16_t*>(in[0]->raw());
    auto widen = in[0]->dtype() == DType::f16 ? f16_to_f32 : bf16_to_f32;
    for (int64_t i = 0; i < wide.numel(); ++i) wide.data<float>()[i] = widen(x[i]);
    const Tensor* wide_in[] = {&wide};
    return cast_reference(Node{}, wide_in, out);
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
  r.add("Cast", with_traits(OpSpec{&cast_infer, &cast_reference}, kPerChannel));
  r.add("CastLike", OpSpec{&cast_like_infer, &cast_reference});
}

}  // namespace grove::elementwise
