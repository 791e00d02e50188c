// The channels-last ops of grove.internal, made by passes/layout_int8.cpp (the importer never
// sees them); each is its ONNX twin with x as [N, H, W, C] and y as [N, OH, OW, M]:
//  - QLinearConvNhwc(x, x_scale, x_zero_point, w, w_scale, w_zero_point, y_scale,
//    y_zero_point, B [, r, r_scale, r_zero_point, c_scale, c_zero_point, z_scale,
//    z_zero_point]): W stays [M, C, kh, kw]; the 8-bit kernel reads each pixel's channels
//    as one contiguous run (tile_quant_conv_nhwc.cpp); with the last 7 inputs a residual
//    QLinearAdd(conv output as c, r) -> z is fused after it and y is z;
//  - MaxPoolNhwc(x) on uint8 or int8 (layout_int8.cpp) or float32 (layout_f32.cpp): one
//    output (no Indices); a pixel's channels are one vector of maxima (tile_pool_nhwc.cpp);
//  - ConvNhwc(x, W [, B [, r]]), made by passes/layout_f32.cpp: the float32 Conv (one group,
//    2-D) with its fused epilogue (graph/node_decisions.h), r channels-last like y; W stays
//    [M, C, kh, kw] (tile_conv_nhwc.cpp); x is NCHW where the node says so (Decisions::x_nchw);
//  - DepthwiseConvNhwc(x, W [, B [, r]]): the same for a depthwise Conv (group = C = M, W
//    [C, 1, kh, kw]; tile_dwconv_nhwc.cpp);
//  - GlobalAveragePoolNhwc(x), float32: the exception to the rule above, y is the twin's
//    [N, C, 1, 1], whose bytes are those of [N, 1, 1, C], so a network's last pool reads the
//    channels-last copy and nothing turns it back (tile_pool_nhwc.cpp).
// Every attribute means what it means on the twin. The references are the twins' on rotated
// tensors, so both layouts give the same bytes.
#include "ops/conv/channels_last.h"

#include <cstring>

#include "graph/node_decisions.h"
#include "kernels/bf16.h"
#include "ops/evaluate.h"
#include "ops/op.h"
#include "ops/op_util.h"
#include "ops/quant_util.h"

namespace grove {

Node nchw_twin(const Node& node) {
  Node twin = node;
  if (node.op_type == "ConvNhwc" || node.op_type == "DepthwiseConvNhwc") {
    twin.op_type = "Conv";
    twin.domain.clear();
    twin.opset = std::max(node.opset, 11);
    return twin;
  }
  twin.op_type = node.op_type == "MaxPoolNhwc" ? "MaxPool" : "QLinearConv";
  twin.domain.clear();
  if (twin.inputs.size() > kResidualInput) twin.inputs.resize(kResidualInput);
  twin.decisions.epilogue.residual_activation = FusedActivation::none;
  twin.opset = std::max(node.opset, 12);  // QLinearConv from 10, 8-bit MaxPool from 12
  return twin;
}

namespace {

// out[i0][i1][i2][i3] = in at the position `from` maps to, for 1-byte or 4-byte elements.
template <class T>
void rotate_as(const Tensor& t, Tensor& out, bool to_nhwc) {
  const int64_t n = t.dim(0);
  const int64_t c = to_nhwc ? t.dim(1) : t.dim(3), h = to_nhwc ? t.dim(2) : t.dim(1), w = to_nhwc ? t.dim(3) : t.dim(2);
  const auto* src = reinterpret_cast<const T*>(t.raw());
  auto* dst = reinterpret_cast<T*>(out.raw());
  for (int64_t i = 0; i < n; ++i)
    for (int64_t ch = 0; ch < c; ++ch)
      for (int64_t p = 0; p < h * w; ++p) {
        const int64_t nchw = (i * c + ch) * h * w + p, nhwc = (i * h * w + p) * c + ch;
        if (to_nhwc) dst[nhwc] = src[nchw];
        else dst[nchw] = src[nhwc];
      }
}

Tensor rotate(const Tensor& t, bool to_nhwc) {
  const size_t size = dtype_size(t.dtype());
  if (t.rank() != 4 || (size != 1 && size != 4)) throw Error("expected a 4-D tensor of 1-byte or 4-byte elements");
  const int64_t n = t.dim(0);
  const int64_t c = to_nhwc ? t.dim(1) : t.dim(3), h = to_nhwc ? t.dim(2) : t.dim(1), w = to_nhwc ? t.dim(3) : t.dim(2);
  Tensor out(t.dtype(), to_nhwc ? Shape{n, h, w, c} : Shape{n, c, h, w});
  if (size == 1) rotate_as<uint8_t>(t, out, to_nhwc);
  else rotate_as<uint32_t>(t, out, to_nhwc);
  return out;
}

Shape nchw_of(const Shape& s) { return s.size() == 4 ? Shape{s[0], s[3], s[1], s[2]} : s; }

bool has_residual(const Node& node, size_t inputs) { return node.op_type == "QLinearConvNhwc" && inputs > kResidualInput; }

void infer_nhwc(const Node& node, std::span<const ValueInfo> in, std::span<ValueInfo> out) {
  if (in.empty() || in[0].shape.size() != 4) throw Error(node.describe() + ": x must be 4-D [N, H, W, C]");
  if (node.attr_int("group", 1) != 1) throw Unsupported(node.describe() + ": only group 1 runs channels-last");
  if (node.op_type == "MaxPoolNhwc" && in[0].dtype != DType::u8 && in[0].dtype != DType::i8 && in[0].dtype != DType::f32)
    throw Unsupported(node.describe() + ": x must be uint8, int8 or float32");
  const bool residual = has_residual(node, in.size());
  if (residual && in.size() != kResidualInput + 7)
    throw Error(node.describe() + ": a fused residual add takes 7 inputs after the conv's 9");
  std::vector<ValueInfo> nchw(in.begin(), in.begin() + static_cast<std::ptrdiff_t>(residual ? kResidualInput : in.size()));
  nchw[0].shape = nchw_of(in[0].shape);
  nchw[0].data = nullptr;
  std::vector<ValueInfo> y = infer_node(nchw_twin(node), nchw);
  const Shape& s = y.at(0).shape;
  out[0] = ValueInfo{y[0].dtype, {s[0], s[2], s[3], s[1]}, nullptr, true};
  if (!residual) return;
  if (in[kResidualInput].dtype != out[0].dtype || in[kResidualInput].shape != out[0].shape)
    throw Error(node.describe() + ": the residual must have y's dtype and shape " + shape_str(out[0].shape));
  for (size_t i = kResidualInput + 1; i < in.size(); i += 2)
    if (in[i].dtype != DType::f32 || numel(in[i].shape) != 1 || in[i + 1].dtype != out[0].dtype ||
        numel(in[i + 1].shape) != 1)
      throw Error(node.describe() + ": the residual add's scales and zero points must be one value each");
}

void reference_nhwc(const Node& node, std::span<const Tensor* const> in, std::span<Tensor* const> out) {
  const bool residual = has_residual(node, in.size());
  const Tensor x = nhwc_to_nchw(*in[0]);
  std::vector<const Tensor*> nchw(in.begin(), in.begin() + static_cast<std::ptrdiff_t>(residual ? kResidualInput : in.size()));
  nchw[0] = &x;
  std::vector<Tensor> y = evaluate_node(nchw_twin(node), nchw);
  const Tensor rotated = nchw_to_nhwc(y.at(0));
  if (rotated.shape() != out[0]->shape()) throw Error(node.describe() + ": output shape does not match");
  if (residual)
    kernels::qadd_scalar(rotated.raw(), in[kResidualInput]->raw(), static_cast<size_t>(rotated.numel()),
                         residual_add_params(node, in), out[0]->raw());
  else
    std::memcpy(out[0]->raw(), rotated.raw(), rotated.bytes());
}

// ConvNhwc: x, and a fused residual (input 3), rotated to NCHW for Conv's own checks and
// reference. x and the residual may be bfloat16 (a bf16-stored y of another such conv: they
// widen exactly to float32), and y is bfloat16 where the plan stores it so (Decisions::output_bf16).
void infer_conv_nhwc(const Node& node, std::span<const ValueInfo> in, std::span<ValueInfo> out) {
  if (in.empty() || in[0].shape.size() != 4) throw Error(node.describe() + ": x must be 4-D [N, H, W, C]");
  const int64_t group = node.attr_int("group", 1);
  if (node.op_type == "ConvNhwc" && group != 1) throw Unsupported(node.describe() + ": only group 1 runs channels-last");
  if (node.op_type == "DepthwiseConvNhwc" && group != in[0].shape[3])
    throw Error(node.describe() + ": a depthwise conv has one group per input channel");
  std::vector<ValueInfo> nchw(in.begin(), in.end());
  for (size_t i : {size_t{0}, kEpilogueResidualInput})
    if (i < nchw.size() && nchw[i].present) {
      if (nchw[i].shape.size() != 4) throw Error(node.describe() + ": the residual must be 4-D [N, OH, OW, M]");
      if (i == 0 && reads_x_nchw(node)) continue;  // x NCHW already
      nchw[i].shape = nchw_of(nchw[i].shape);
      nchw[i].data = nullptr;
      if (nchw[i].dtype == DType::bf16) nchw[i].dtype = DType::f32;
    }
  std::vector<ValueInfo> y = infer_node(nchw_twin(node), nchw);
  const Shape& s = y.at(0).shape;
  if (stores_bf16(node) && y[0].dtype != DType::f32)
    throw Error(node.describe() + ": only a float32 conv stores its output as bfloat16");
  out[0] = ValueInfo{stores_bf16(node) ? DType::bf16 : y[0].dtype, {s[0], s[2], s[3], s[1]}, nullptr, true};
}

Tensor widened(const Tensor& t) {
  if (t.dtype() != DType::bf16) return t;
  Tensor f(DType::f32, t.shape());
  const auto* bits = reinterpret_cast<const uint16_t*>(t.raw());
  float* v = f.data<float>();
  for (int64_t i = 0; i < t.numel(); ++i) v[i] = kernels::bf16_value(bits[i]);
  return f;
}

void reference_conv_nhwc(const Node& node, std::span<const Tensor* const> in, std::span<Tensor* const> out) {
  std::vector<Tensor> rotated;
  rotated.reserve(2);
  std::vector<const Tensor*> nchw(in.begin(), in.end());
  for (size_t i : {size_t{0}, kEpilogueResidualInput})
    if (i < nchw.size() && nchw[i] && !(i == 0 && reads_x_nchw(node)))
      nchw[i] = &rotated.emplace_back(nhwc_to_nchw(widened(*nchw[i])));
  std::vector<Tensor> y = evaluate_node(nchw_twin(node), nchw);
  const Tensor back = nchw_to_nhwc(y.at(0));
  if (back.shape() != out[0]->shape()) throw Error(node.describe() + ": output shape does not match");
  if (out[0]->dtype() == DType::bf16 && back.dtype() == DType::f32) {
    // Rounded as the kernels round (kernels/bf16.h), so both give the same bits for one sum.
    auto* bits = reinterpret_cast<uint16_t*>(out[0]->raw());
    const float* v = back.data<float>();
    for (int64_t i = 0; i < back.numel(); ++i) bits[i] = kernels::bf16_bits(v[i]);
    return;
  }
  if (out[0]->dtype() != back.dtype()) throw Error(node.describe() + ": output dtype does not match");
  std::memcpy(out[0]->raw(), back.raw(), back.bytes());
}

}  // namespace

kernels::QAddParams residual_add_params(const Node& node, std::span<const Tensor* const> in) {
  const size_t r = kResidualInput;
  check_scales(*in[r + 5], "the residual add's y_scale");
  kernels::QAddParams p;
  p.a_scale = in[r + 3]->data<float>()[0], p.a_zero = static_cast<float>(in[r + 4]->to_i64().at(0));
  p.b_scale = in[r + 1]->data<float>()[0], p.b_zero = static_cast<float>(in[r + 2]->to_i64().at(0));
  p.y_scale = in[r + 5]->data<float>()[0], p.y_zero = static_cast<float>(in[r + 6]->to_i64().at(0));
  p.is_signed = in[r]->dtype() == DType::i8;
  p.lo = p.is_signed ? -128.0f : 0.0f, p.hi = p.is_signed ? 127.0f : 255.0f;
  p.relu = fused_epilogue(node).residual_activation == FusedActivation::relu;
  return p;
}

Tensor nchw_to_nhwc(const Tensor& t) { return rotate(t, true); }
Tensor nhwc_to_nchw(const Tensor& t) { return rotate(t, false); }

static void infer_global_average_pool_nhwc(const Node& node, std::span<const ValueInfo> in, std::span<ValueInfo> out) {
  if (in.size() != 1 || in[0].shape.size() != 4) throw Error(node.describe() + ": x must be 4-D [N, H, W, C]");
  if (in[0].dtype != DType::f32) throw Unsupported(node.describe() + ": x must be float32");
  const Shape& s = in[0].shape;
  out[0] = ValueInfo{DType::f32, {s[0], s[3], 1, 1}, nullptr, true};
}

static void reference_global_average_pool_nhwc(const Node& node, std::span<const Tensor* const> in,
                                        std::span<Tensor* const> out) {
  const Tensor x = nhwc_to_nchw(*in[0]);
  Node twin = node;
  twin.op_type = "GlobalAveragePool";
  twin.domain.clear();
  const std::vector<const Tensor*> nchw = {&x};
  std::vector<Tensor> y = evaluate_node(twin, nchw);
  if (y.at(0).shape() != out[0]->shape()) throw Error(node.describe() + ": output shape does not match");
  std::memcpy(out[0]->raw(), y[0].raw(), y[0].bytes());
}

void register_channels_last_ops(OpRegistry& r) {
  // QLinearConv's products, channels-last, and one addition per element for a fused QLinearAdd.
  r.add_internal("QLinearConvNhwc", {.infer = &infer_nhwc,
                                     .reference = &reference_nhwc,
                                     .flops = [](const Node&, std::span<const ValueInfo> in, std::span<const ValueInfo> out) {
                                       const Shape* y = known_shape(out, 0);
                                       const int64_t residual = in.size() > 9 && y ? numel(*y) : 0;
                                       return checked_add(conv_products(in, out, 3), residual);
                                     },
                                     .traits = kChannelsLast});
  r.add_internal("MaxPoolNhwc", {.infer = &infer_nhwc,
                                 .reference = &reference_nhwc,
                                 .flops = [](const Node& node, std::span<const ValueInfo> in, std::span<const ValueInfo> out) {  // one compare per tap
                                   const Shape* y = known_shape(out, 0);
                                   return y ? checked_mul(numel(*y), window_size(node, "kernel_shape")) : int64_t{0};
                                 },
                                 .traits = kChannelsLast});
  constexpr FlopsFn conv_flops = [](const Node&, std::span<const ValueInfo> in, std::span<const ValueInfo> out) { return conv_products(in, out, 1); };
  r.add_internal("ConvNhwc", {.infer = &infer_conv_nhwc, .reference = &reference_conv_nhwc, .flops = conv_flops, .traits = kChannelsLast});
  r.add_internal("DepthwiseConvNhwc", {.infer = &infer_conv_nhwc, .reference = &reference_conv_nhwc, .flops = conv_flops, .traits = kChannelsLast});
  r.add_internal("GlobalAveragePoolNhwc", {.infer = &infer_global_average_pool_nhwc,
                                           .reference = &reference_global_average_pool_nhwc,
                                           .cost = OpCost::per_input_element,
                                           .traits = kChannelsLast});
}

}  // namespace grove
