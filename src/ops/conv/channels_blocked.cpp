// ConvNchwc(x, W [, B [, r]]) of grove.internal, made by passes/layout_nchwc.cpp (the importer
// never sees it): the float32 Conv (one group or depthwise, 2-D, no dilation) with its fused epilogue
// (graph/node_decisions.h), x as [N, C / b, H, W, b] and y (and r) as [N, M / b, OH, OW, b];
// W stays [M, C, kh, kw] (tile_conv_nchwc.cpp packs it). Both channel counts are multiples of
// the block b, x's last dim. Every attribute means what it means on Conv, and the reference is
// Conv's on unblocked tensors, so both layouts give the same values.
#include "ops/conv/channels_blocked.h"

#include <cstring>

#include "graph/node_decisions.h"
#include "kernels/conv_nchwc.h"
#include "ops/evaluate.h"
#include "ops/op.h"
#include "ops/op_util.h"

namespace grove {

bool conv_is_depthwise(const Node& node, const Shape& x, const Shape& w) {
  return x.size() == 4 && w.size() == 4 && x[1] > 1 && node.attr_int("group", 1) == x[1] && w[0] == x[1] && w[1] == 1;
}

bool conv_fits_nchwc(const Node& node, const Shape& x, const Shape& w, int64_t block) {
  if (block <= 0 || x.size() != 4 || w.size() != 4) return false;
  if (node.attr_int("group", 1) != 1 && !conv_is_depthwise(node, x, w)) return false;
  for (int64_t d : node.attr_ints("dilations", {1, 1}))
    if (d != 1) return false;
  const int64_t per_group = node.attr_int("group", 1) == 1 ? x[1] : 1;
  return w[1] == per_group && x[1] % block == 0 && w[0] % block == 0 && w[0] > 0 && x[1] > 0 && w[3] >= 1 &&
         w[3] <= int64_t(kernels::kConvNchwcMaxKernelW);
}

Tensor nchw_to_blocked(const Tensor& t, int64_t block) {
  if (t.rank() != 4 || t.dtype() != DType::f32 || block <= 0 || t.dim(1) % block != 0)
    throw Error("expected a float32 NCHW tensor whose channels are whole blocks of " + std::to_string(block));
  Tensor out(DType::f32, blocked_shape(t.shape(), block));
  const int64_t c = t.dim(1), plane = t.dim(2) * t.dim(3);
  const float* src = t.data<float>();
  float* dst = out.data<float>();
  for (int64_t n = 0; n < t.dim(0); ++n)
    for (int64_t ch = 0; ch < c; ++ch)
      for (int64_t p = 0; p < plane; ++p)
        dst[((n * (c / block) + ch / block) * plane + p) * block + ch % block] = src[(n * c + ch) * plane + p];
  return out;
}

Tensor blocked_to_nchw(const Tensor& t) {
  if (t.rank() != 5 || t.dtype() != DType::f32) throw Error("expected a float32 blocked tensor [N, C / b, H, W, b]");
  const int64_t block = t.dim(4), c = t.dim(1) * block, plane = t.dim(2) * t.dim(3);
  Tensor out(DType::f32, {t.dim(0), c, t.dim(2), t.dim(3)});
  const float* src = t.data<float>();
  float* dst = out.data<float>();
  for (int64_t n = 0; n < t.dim(0); ++n)
    for (int64_t ch = 0; ch < c; ++ch)
      for (int64_t p = 0; p < plane; ++p)
        dst[(n * c + ch) * plane + p] = src[((n * (c / block) + ch / block) * plane + p) * block + ch % block];
  return out;
}

namespace {

Node conv_twin(const Node& node) {
  Node twin = node;
  twin.op_type = "Conv";
  twin.domain.clear();
  twin.opset = std::max(node.opset, 11);
  return twin;
}

void infer_conv_nchwc(const Node& node, std::span<const ValueInfo> in, std::span<ValueInfo> out) {
  if (in.size() < 2 || !in[0].present || !in[1].present || in[0].shape.size() != 5 || in[0].shape[4] <= 0)
    throw Error(node.describe() + ": x must be 5-D [N, C / b, H, W, b]");
  if (in[0].dtype != DType::f32) throw Unsupported(node.describe() + ": x must be float32");
  const int64_t block = in[0].shape[4];
  const int64_t group = node.attr_int("group", 1);
  if (group != 1 && group != in[0].shape[1] * block)
    throw Unsupported(node.describe() + ": only group 1 or one group per channel (depthwise) runs channel-blocked");
  if (in[1].shape.size() != 4 || in[1].shape[0] % block != 0)
    throw Error(node.describe() + ": W must be 4-D [M, C, kh, kw] with M a multiple of the block " + std::to_string(block));
  std::vector<ValueInfo> nchw(in.begin(), in.end());
  nchw[0].shape = unblocked_shape(in[0].shape);
  nchw[0].data = nullptr;
  if (nchw.size() > kEpilogueResidualInput && nchw[kEpilogueResidualInput].present) {
    ValueInfo& r = nchw[kEpilogueResidualInput];
    if (r.shape.size() != 5 || r.shape[4] != block)
      throw Error(node.describe() + ": the residual must be blocked like y [N, M / b, OH, OW, b]");
    r.shape = unblocked_shape(r.shape);
    r.data = nullptr;
  }
  std::vector<ValueInfo> y = infer_node(conv_twin(node), nchw);
  out[0] = ValueInfo{y.at(0).dtype, blocked_shape(y[0].shape, block), nullptr, true};
}

void reference_conv_nchwc(const Node& node, std::span<const Tensor* const> in, std::span<Tensor* const> out) {
  std::vector<Tensor> unblocked_inputs;
  unblocked_inputs.reserve(2);
  std::vector<const Tensor*> nchw(in.begin(), in.end());
  for (size_t i : {size_t{0}, kEpilogueResidualInput})
    if (i < nchw.size() && nchw[i]) nchw[i] = &unblocked_inputs.emplace_back(blocked_to_nchw(*nchw[i]));
  std::vector<Tensor> y = evaluate_node(conv_twin(node), nchw);
  const Tensor back = nchw_to_blocked(y.at(0), in[0]->dim(4));
  if (back.shape() != out[0]->shape() || back.dtype() != out[0]->dtype())
    throw Error(node.describe() + ": output shape does not match");
  std::memcpy(out[0]->raw(), back.raw(), back.bytes());
}

}  // namespace

void register_channels_blocked_ops(OpRegistry& r) { 
  r.add_internal("ConvNchwc", {.infer = &infer_conv_nchwc,
                               .reference = &reference_conv_nchwc,
                               .flops = [](const Node&, std::span<const ValueInfo> in, std::span<const ValueInfo> out) { return conv_products(in, out, 1); },
                               .traits = kChannelsBlocked});
 }

}  // namespace grove
