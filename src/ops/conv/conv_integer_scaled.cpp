// grove.internal ConvIntegerScaled(x, w, x_zero_point, w_zero_point, scale, [bias]): what ONNX
// Runtime's dynamic quantization writes after every quantized conv,
//     ConvInteger -> Cast(to float) -> Mul(scale) [-> Add(bias)] [-> Relu],
// as one node (passes/fuse_qdq.cpp fuses it), so the int32 sums never make the three extra
// passes over memory. scale holds one value or one per output channel (x_scale * w_scale,
// computed at run time), bias one per output channel. Each step rounds as the chain does:
// float(sum) * scale, then + bias, then the Relu, so fused and unfused agree bit for bit.
#include "ops/conv/conv_integer_scaled.h"

#include "graph/node_decisions.h"
#include "ops/evaluate.h"
#include "ops/op.h"
#include "ops/op_util.h"

namespace grove {
namespace {

Node as_conv_integer(const Node& node) {
  Node conv = node;
  conv.op_type = "ConvInteger";
  conv.domain.clear();
  conv.inputs.resize(4);
  conv.decisions.epilogue.activation = FusedActivation::none;
  conv.decisions.epilogue.fused.clear();
  return conv;
}

void check_per_channel(const Node& node, const Shape& shape, int64_t channels, const char* what, bool scalar_ok) {
  const int64_t n = numel(shape);
  if (n == channels || (scalar_ok && n == 1)) return;
  throw Error(node.describe() + ": " + what + " has shape " + shape_str(shape) + ", expected " +
              (scalar_ok ? "one value or " : "") + std::to_string(channels) + " (one per output channel)");
}

void infer(const Node& node, std::span<const ValueInfo> in, std::span<ValueInfo> out) {
  require_inputs(node, in.size(), 5, 6);
  const std::vector<ValueInfo> sums = infer_node(as_conv_integer(node), in.first(4));
  const int64_t channels = sums.at(0).shape.size() > 1 ? sums[0].shape[1] : 1;
  if (in[4].dtype != DType::f32) throw Error(node.describe() + ": scale must be float32");
  check_per_channel(node, in[4].shape, channels, "scale", true);
  if (has_input(in, 5)) {
    if (in[5].dtype != DType::f32) throw Error(node.describe() + ": bias must be float32");
    check_per_channel(node, in[5].shape, channels, "bias", false);
  }
  out[0] = ValueInfo{DType::f32, sums[0].shape};
}

void reference(const Node& node, std::span<const Tensor* const> in, std::span<Tensor* const> out) {
  const Tensor sums = evaluate_node(as_conv_integer(node), in.first(4)).at(0);
  const Shape& shape = sums.shape();
  const int64_t images = shape[0], channels = shape[1], plane = sums.numel() / std::max<int64_t>(images * channels, 1);
  ScaledEpilogue epilogue(node, *in[4], optional_input(in, 5));
  for (int64_t n = 0; n < images; ++n)
    for (int64_t c = 0; c < channels; ++c) {
      const int64_t at = (n * channels + c) * plane;
      epilogue.apply(c, sums.data<int32_t>() + at, out[0]->data<float>() + at, plane);
    }
}

}  // namespace

ScaledEpilogue::ScaledEpilogue(const Node& node, const Tensor& scale, const Tensor* bias)
    : scale_(scale.data<float>()), per_channel_scale_(scale.numel() > 1),
      bias_(bias ? bias->data<float>() : nullptr), relu_(fused_epilogue(node).activation == FusedActivation::relu) {}

void ScaledEpilogue::apply(int64_t channel, const int32_t* sums, float* y, int64_t count) const {
  const float s = scale_[per_channel_scale_ ? channel : 0];
  for (int64_t i = 0; i < count; ++i) {
    float v = static_cast<float>(sums[i]) * s;
    if (bias_) v = v + bias_[channel];
    if (relu_) v = v < 0.0f ? 0.0f : v;
    y[i] = v;
  }
}

void register_conv_integer_scaled_ops(OpRegistry& r) { 
  r.add_internal("ConvIntegerScaled", {.infer = &infer,
                                       .reference = &reference,
                                       .flops = [](const Node&, std::span<const ValueInfo> in, std::span<const ValueInfo> out) { return conv_products(in, out, 1); }});
 }

}  // namespace grove
