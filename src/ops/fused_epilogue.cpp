#include "ops/fused_epilogue.h"

#include "ops/op_util.h"

namespace grove {

kernels::ActivationParams epilogue_activation(const Node& node) {
  using kernels::Activation;
  const FusedEpilogue& e = fused_epilogue(node);
  kernels::ActivationParams p;
  p.alpha = e.alpha;
  p.beta = e.beta;
  switch (e.activation) {
    case FusedActivation::none: p.kind = Activation::identity; break;
    case FusedActivation::relu: p.kind = Activation::relu; break;
    case FusedActivation::clip: p.kind = Activation::clip; break;
    case FusedActivation::leaky_relu: p.kind = Activation::leaky_relu; break;
    case FusedActivation::sigmoid: p.kind = Activation::sigmoid; break;
    case FusedActivation::hard_sigmoid: p.kind = Activation::hard_sigmoid; break;
    case FusedActivation::hard_swish: p.kind = Activation::hard_swish; break;
    case FusedActivation::gelu_erf: p.kind = Activation::gelu_erf; break;
    case FusedActivation::gelu_tanh: p.kind = Activation::gelu_tanh; break;
    case FusedActivation::swish: p.kind = Activation::swish; break;
  }
  return p;
}

size_t epilogue_max_inputs(const Node& node, size_t plain) {
  return has_fused_epilogue(node) ? kEpilogueResidualInput + 1 : plain;
}

void check_epilogue_inputs(const Node& node, std::span<const ValueInfo> in, const ValueInfo& out, bool column_bias) {
  if (!has_fused_epilogue(node)) return;
  if (out.dtype != DType::f32) throw Error(node.describe() + ": a fused epilogue needs float32");
  if (column_bias && has_input(in, kEpilogueBiasInput)) {
    const ValueInfo& b = in[kEpilogueBiasInput];
    if (b.dtype != DType::f32 || out.shape.empty() || numel(b.shape) != out.shape.back())
      throw Error(node.describe() + ": fused bias " + shape_str(b.shape) + " does not fit output " + shape_str(out.shape));
  }
  if (has_input(in, kEpilogueResidualInput)) {
    const ValueInfo& r = in[kEpilogueResidualInput];
    if (r.dtype != DType::f32 || r.shape != out.shape)
      throw Error(node.describe() + ": fused residual " + shape_str(r.shape) + " does not match output " +
                  shape_str(out.shape));
  }
}

void apply_epilogue_reference(const Node& node, const Tensor* column_bias, const Tensor* residual, Tensor& y) {
  if (!has_fused_epilogue(node)) return;
  const kernels::ActivationParams act = epilogue_activation(node);
  float* ys = y.data<float>();
  const float* bias = column_bias ? column_bias->data<float>() : nullptr;
  const float* res = residual ? residual->data<float>() : nullptr;
  const int64_t n = y.rank() > 0 ? y.shape().back() : 1;
  for (int64_t i = 0; i < y.numel(); ++i) {
    float v = ys[i];
    if (bias) v += bias[i % n];
    if (res) v += res[i];
    ys[i] = kernels::apply_activation(v, act);
  }
}

}  // namespace grove
