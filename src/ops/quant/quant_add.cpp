// grove.internal QLinearAdd(a, a_scale, a_zero_point, b, b_scale, b_zero_point, y_scale,
// y_zero_point) -> y: the DequantizeLinear, DequantizeLinear -> Add [-> Relu] ->
// QuantizeLinear chain of a QDQ model's residual add as one op on bytes (passes/fuse_qdq.cpp
// makes it; the importer never sees it). a, b and y have one shape and one dtype, uint8 or
// int8; scales and zero points are one per tensor. A fused Relu is the epilogue activation relu (graph/node_decisions.h).
// Its values are the chain's bit for bit: kernels/qadd.h does the chain's float32 steps.
#include "graph/node_decisions.h"
#include "kernels/qadd.h"
#include "ops/op.h"
#include "ops/op_util.h"
#include "ops/quant/quant_add.h"
#include "ops/quant_util.h"

namespace grove {

kernels::QAddParams qadd_params(const Node& node, std::span<const Tensor* const> in) {
  check_scales(*in[6], "y_scale");
  kernels::QAddParams p;
  p.a_scale = in[1]->data<float>()[0], p.a_zero = static_cast<float>(in[2]->to_i64().at(0));
  p.b_scale = in[4]->data<float>()[0], p.b_zero = static_cast<float>(in[5]->to_i64().at(0));
  p.y_scale = in[6]->data<float>()[0], p.y_zero = static_cast<float>(in[7]->to_i64().at(0));
  p.is_signed = in[0]->dtype() == DType::i8;
  p.lo = p.is_signed ? -128.0f : 0.0f, p.hi = p.is_signed ? 127.0f : 255.0f;
  p.relu = fused_epilogue(node).activation == FusedActivation::relu;
  return p;
}

namespace {

void infer_qlinear_add(const Node& node, std::span<const ValueInfo> in, std::span<ValueInfo> out) {
  require_inputs(node, in.size(), 8, 8);
  if (in[0].dtype != DType::u8 && in[0].dtype != DType::i8)
    throw Unsupported("a of dtype " + std::string(dtype_name(in[0].dtype)) + " is not supported (uint8 and int8 are)");
  if (in[3].dtype != in[0].dtype || in[3].shape != in[0].shape)
    throw Error("b must have a's dtype and shape, got " + std::string(dtype_name(in[3].dtype)) + " " + shape_str(in[3].shape));
  for (size_t i : {1, 4, 6})
    if (in[i].dtype != DType::f32 || numel(in[i].shape) != 1) throw Error("scales must be one float32 each");
  for (size_t i : {2, 5, 7})
    if (in[i].dtype != in[0].dtype || numel(in[i].shape) != 1) throw Error("zero points must be one value of a's dtype each");
  out[0] = ValueInfo{in[0].dtype, in[0].shape};
}

void reference_qlinear_add(const Node& node, std::span<const Tensor* const> in, std::span<Tensor* const> out) {
  kernels::qadd_scalar(in[0]->raw(), in[3]->raw(), static_cast<size_t>(in[0]->numel()), qadd_params(node, in),
                       out[0]->raw());
}

}  // namespace

void register_quant_add_ops(OpRegistry& r) { r.add_internal("QLinearAdd", OpSpec{&infer_qlinear_add, &reference_qlinear_add}); }

}  // namespace grove
