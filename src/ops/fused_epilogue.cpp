#include "ops/fused_epilogue.h"

#include "ops/op_util.h"

namespace grove {

kernels::ActivationParams epilogue_activation(const Node& node) {
  using kernels::Activation;
  kernels::ActivationParams p;
  const std::string kind = node.attr_string(kAttrActivation, "");
  p.alpha = node.attr_float(kAttrAlpha, 0.0f);
  p.beta = node.attr_float(kAttrBeta, 0.0f);
  if (kind.empty()) p.kind = Activation::identity;
  else if (kind == "relu") p.kind = Activation::relu;
  else if (kind == "clip") p.kind = Activation::clip;
  else if (kind == "leaky_relu") p.kind = Activation::leaky_relu;
  else if (kind == "sigmoid") p.kind = Activation::sigmoid;
  else if (kind == "hard_sigmoid") p.kind = Activation::hard_sigmoid;
  else if (kind == "hard_swish") p.kind = Activation::hard_swish;
  else if (kind == "gelu_erf") p.kind = Activation::gelu_erf;
  else if (kind == "gelu_tanh") p.kind = Activation::gelu_tanh;
  else if (kind == "swish") p.kind = Activation::swish;
  else throw Error(node.describe() + ": unknown fused activation '" + kind + "'");
  return p;
}

size_t epilogue_max_inputs(const Node& node, size_t plain) {
  return has_fused_epilogue(node) ? kEpilogueResidualInput + 1 : plain;
}

void check_epilogue_inputs(const Node& node, std::span<const ValueInfo> in, const ValueInfo& out, bool column_bias) {
  if (!has_fused_epilogue(node)) return;
  epilogue_activation(node);
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
