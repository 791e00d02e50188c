// Conv, ConvTranspose, ConvInteger and QLinearConv, NCHW (N x C x D1 x ... x Dn) as ONNX
// defines them, any number of spatial dims. The references are direct loops over the
// window taps, accumulating in double.
#include <algorithm>
#include <cmath>
#include <string>
#include <type_traits>
#include <vector>

#include "ops/conv/conv_geometry.h"
#include "ops/fused_epilogue.h"
#include "graph/node_decisions.h"
#include "ops/op.h"
#include "ops/op_util.h"
#include "ops/quant_util.h"

namespace grove {
namespace {

struct ConvShapes {
  WindowGeometry geometry;
  int64_t batch = 0, in_channels = 0, out_channels = 0, group = 1;
  Shape output;  // N x M x spatial
};

void require_float(const Node& node, DType dtype) {
  if (dtype != DType::f32 && dtype != DType::f64)
    throw Unsupported(node.describe() + ": dtype " + std::string(dtype_name(dtype)) + " is not supported (float32 and float64 are)");
}

void check_dtypes(const Node& node, std::span<const ValueInfo> in) {
  require_float(node, in[0].dtype);
  for (size_t i = 1; i < in.size(); ++i)
    if (in[i].present && in[i].dtype != in[0].dtype)
      throw Error(node.describe() + ": input " + std::to_string(i) + " is " + std::string(dtype_name(in[i].dtype)) +
                  ", X is " + std::string(dtype_name(in[0].dtype)));
}

// The kernel is W's spatial dims; a kernel_shape attribute, when given, must agree.
std::vector<int64_t> kernel_from_weights(const Node& node, const Shape& w) {
  std::vector<int64_t> kernel(w.begin() + 2, w.end());
  std::vector<int64_t> attr = node.attr_ints("kernel_shape");
  if (!attr.empty() && attr != kernel)
    throw Error(node.describe() + ": kernel_shape " + shape_str(attr) + " does not match the weights " + shape_str(w));
  return kernel;
}

// Shared by Conv and ConvTranspose: ranks, group, bias. W's channel dim that must match X's
// channels is dim 1 (times group) for Conv and dim 0 for ConvTranspose.
ConvShapes channel_shapes(const Node& node, const Shape& x, const Shape& w, bool transposed) {
  if (x.size() < 3) throw Error(node.describe() + ": X must be N x C x D1 ..., got " + shape_str(x));
  if (w.size() != x.size())
    throw Error(node.describe() + ": W " + shape_str(w) + " must have the rank of X " + shape_str(x));
  ConvShapes s;
  s.group = node.attr_int("group", 1);
  if (s.group < 1) throw Error(node.describe() + ": group must be positive, got " + std::to_string(s.group));
  s.batch = x[0];
  s.in_channels = x[1];
  if (s.in_channels % s.group != 0)
    throw Error(node.describe() + ": " + std::to_string(s.in_channels) + " input channels do not split into " +
                std::to_string(s.group) + " groups");
  if (!transposed) {
    s.out_channels = w[0];
    if (w[1] * s.group != s.in_channels || s.out_channels % s.group != 0)
      throw Error(node.describe() + ": W " + shape_str(w) + " does not fit X " + shape_str(x) + " with group " +
                  std::to_string(s.group));
  } else {
    s.out_channels = w[1] * s.group;
    if (w[0] != s.in_channels)
      throw Error(node.describe() + ": W " + shape_str(w) + " must have X's " + std::to_string(s.in_channels) +
                  " channels in dim 0");
  }
  return s;
}

void check_bias(const Node& node, const ConvShapes& s, const Shape* bias) {
  if (bias && !(bias->size() == 1 && (*bias)[0] == s.out_channels))
    throw Error(node.describe() + ": bias must have shape " + std::to_string(s.out_channels) + ", got " + shape_str(*bias));
}

ConvShapes conv_shapes(const Node& node, const Shape& x, const Shape& w, const Shape* bias, bool transposed) {
  ConvShapes s = channel_shapes(node, x, w, transposed);
  check_bias(node, s, bias);
  std::span<const int64_t> spatial(x.data() + 2, x.size() - 2);
  std::vector<int64_t> kernel = kernel_from_weights(node, w);
  s.geometry = transposed ? transposed_geometry(node, spatial, std::move(kernel))
                          : window_geometry(node, spatial, std::move(kernel), false);
  s.output = {s.batch, s.out_channels};
  s.output.insert(s.output.end(), s.geometry.output.begin(), s.geometry.output.end());
  return s;
}

template <bool Transposed>
void infer_conv(const Node& node, std::span<const ValueInfo> in, std::span<ValueInfo> out) {
  require_inputs(node, in.size(), 2, static_cast<int>(Transposed ? 3 : epilogue_max_inputs(node, 3)));
  if (!in[0].present || !in[1].present) throw Error(node.describe() + ": X and W are required");
  check_dtypes(node, in);
  const Shape* bias = has_input(in, 2) ? &in[2].shape : nullptr;
  ConvShapes s = conv_shapes(node, in[0].shape, in[1].shape, bias, Transposed);
  out[0].dtype = in[0].dtype;
  out[0].shape = s.output;
  check_epilogue_inputs(node, in, out[0], false);
}

// Each output position gathers its window once; every (image, output channel) reuses it.
template <class T>
void conv_direct(const ConvShapes& s, const T* x, const T* w, const T* bias, T* y) {
  const WindowGeometry& g = s.geometry;
  int64_t in_plane = numel(g.input), out_plane = numel(g.output), taps_per_kernel = numel(g.kernel);
  int64_t cin = s.in_channels / s.group, cout = s.out_channels / s.group;
  std::vector<int64_t> pos(g.rank(), 0);
  std::vector<Tap> taps;
  for (int64_t p = 0; p < out_plane; ++p, next_index(pos, g.output)) {
    window_taps(g, pos, g.input, taps);
    for (int64_t n = 0; n < s.batch; ++n)
      for (int64_t grp = 0; grp < s.group; ++grp)
        for (int64_t oc = grp * cout; oc < (grp + 1) * cout; ++oc) {
          double acc = bias ? static_cast<double>(bias[oc]) : 0.0;
          for (int64_t ic = 0; ic < cin; ++ic) {
            const T* x_plane = x + (n * s.in_channels + grp * cin + ic) * in_plane;
            const T* w_kernel = w + (oc * cin + ic) * taps_per_kernel;
            for (const Tap& t : taps) acc += static_cast<double>(x_plane[t.offset]) * static_cast<double>(w_kernel[t.index]);
          }
          y[(n * s.out_channels + oc) * out_plane + p] = static_cast<T>(acc);
        }
  }
}

// The adjoint of conv_direct: each input element scatters through its window into the
// output. Pads crop the full result (negative end pads extend it with bias-only rows).
template <class T>
void conv_transpose_direct(const ConvShapes& s, const T* x, const T* w, const T* bias, T* y) {
  const WindowGeometry& g = s.geometry;
  int64_t in_plane = numel(g.input), out_plane = numel(g.output), taps_per_kernel = numel(g.kernel);
  int64_t cin = s.in_channels / s.group, cout = s.out_channels / s.group;
  std::vector<double> acc(static_cast<size_t>(s.batch * s.out_channels * out_plane), 0.0);
  std::vector<int64_t> pos(g.rank(), 0);
  std::vector<Tap> taps;
  for (int64_t p = 0; p < in_plane; ++p, next_index(pos, g.input)) {
    window_taps(g, pos, g.output, taps);
    for (int64_t n = 0; n < s.batch; ++n)
      for (int64_t ic = 0; ic < s.in_channels; ++ic) {
        double xv = static_cast<double>(x[(n * s.in_channels + ic) * in_plane + p]);
        int64_t grp = ic / cin;
        for (int64_t oc_in_group = 0; oc_in_group < cout; ++oc_in_group) {
          const T* w_kernel = w + (ic * cout + oc_in_group) * taps_per_kernel;
          double* y_plane = acc.data() + (n * s.out_channels + grp * cout + oc_in_group) * out_plane;
          for (const Tap& t : taps) y_plane[t.offset] += xv * static_cast<double>(w_kernel[t.index]);
        }
      }
  }
  for (int64_t n = 0; n < s.batch; ++n)
    for (int64_t oc = 0; oc < s.out_channels; ++oc)
      for (int64_t q = 0; q < out_plane; ++q) {
        size_t i = static_cast<size_t>((n * s.out_channels + oc) * out_plane + q);
        y[i] = static_cast<T>(acc[i] + (bias ? static_cast<double>(bias[oc]) : 0.0));
      }
}

template <bool Transposed>
void reference_conv(const Node& node, std::span<const Tensor* const> in, std::span<Tensor* const> out) {
  const Tensor& x = *in[0];
  const Tensor& w = *in[1];
  const Tensor* bias = optional_input(in, 2);
  ConvShapes s = conv_shapes(node, x.shape(), w.shape(), bias ? &bias->shape() : nullptr, Transposed);
  auto run = [&](auto zero) {
    using T = decltype(zero);
    if constexpr (std::is_same_v<T, float> || std::is_same_v<T, double>) {
      const T* b = bias ? bias->data<T>() : nullptr;
      if constexpr (Transposed) conv_transpose_direct<T>(s, x.data<T>(), w.data<T>(), b, out[0]->data<T>());
      else conv_direct<T>(s, x.data<T>(), w.data<T>(), b, out[0]->data<T>());
    } else {
      require_float(node, x.dtype());
    }
  };
  visit_dtype(x.dtype(), run);
  if constexpr (!Transposed) apply_epilogue_reference(node, nullptr, optional_input(in, kEpilogueResidualInput), *out[0]);
}

// ---- ConvInteger and QLinearConv: the same direct conv over zero-point-shifted integers.
// Products of 8-bit values summed in double stay exact far beyond any real layer size.

bool is_8bit(DType t) { return t == DType::u8 || t == DType::i8; }

void require_8bit(const Node& node, const ValueInfo& v, const char* what) {
  if (!is_8bit(v.dtype))
    throw Unsupported(node.describe() + ": " + what + " of dtype " + std::string(dtype_name(v.dtype)) +
                      " is not supported (uint8 and int8 are)");
}

// A zero point or scale is one value, or (for the weights) one per output channel.
void check_per_channel(const Node& node, const ValueInfo& v, int64_t channels, const char* what) {
  int64_t n = numel(v.shape);
  if (v.shape.size() > 1 || (n != 1 && n != channels))
    throw Error(node.describe() + ": " + what + " must be a scalar or have " + std::to_string(channels) +
                " entries, got " + shape_str(v.shape));
}

// t - zero_point as doubles; zero_point holds 1 value or one per slice of t's dim 0.
std::vector<double> shifted(const Tensor& t, const Tensor* zero_point) {
  std::vector<double> v = t.to_f64();
  if (!zero_point) return v;
  std::vector<double> zp = zero_point->to_f64();
  if (zp.empty()) return v;
  int64_t slices = zp.size() == 1 ? 1 : t.dim(0), slice = static_cast<int64_t>(v.size()) / std::max<int64_t>(slices, 1);
  for (size_t i = 0; i < v.size(); ++i) v[i] -= zp[zp.size() == 1 ? 0 : static_cast<size_t>(static_cast<int64_t>(i) / slice)];
  return v;
}

void infer_conv_integer(const Node& node, std::span<const ValueInfo> in, std::span<ValueInfo> out) {
  require_inputs(node, in.size(), 2, 4);
  require_8bit(node, in[0], "X");
  require_8bit(node, in[1], "W");
  ConvShapes s = conv_shapes(node, in[0].shape, in[1].shape, nullptr, false);
  if (has_input(in, 2)) check_per_channel(node, in[2], 1, "x_zero_point");
  if (has_input(in, 3)) check_per_channel(node, in[3], s.out_channels, "w_zero_point");
  out[0] = ValueInfo{DType::i32, s.output, nullptr, true};
}

void reference_conv_integer(const Node& node, std::span<const Tensor* const> in, std::span<Tensor* const> out) {
  ConvShapes s = conv_shapes(node, in[0]->shape(), in[1]->shape(), nullptr, false);
  std::vector<double> x = shifted(*in[0], optional_input(in, 2)), w = shifted(*in[1], optional_input(in, 3));
  std::vector<double> acc(static_cast<size_t>(numel(s.output)));
  conv_direct<double>(s, x.data(), w.data(), nullptr, acc.data());
  int32_t* y = out[0]->data<int32_t>();
  for (size_t i = 0; i < acc.size(); ++i) y[i] = static_cast<int32_t>(acc[i]);
}

// Inputs: x, x_scale, x_zero_point, w, w_scale, w_zero_point, y_scale, y_zero_point, B.
void infer_qlinear_conv(const Node& node, std::span<const ValueInfo> in, std::span<ValueInfo> out) {
  require_inputs(node, in.size(), 8, 9);
  for (size_t i : {0, 1, 3, 4, 6})
    if (!in[i].present) throw Error(node.describe() + ": input " + std::to_string(i) + " is required");
  require_8bit(node, in[0], "x");
  require_8bit(node, in[3], "w");
  const Shape* bias = has_input(in, 8) ? &in[8].shape : nullptr;
  if (bias && in[8].dtype != DType::i32) throw Error(node.describe() + ": B must be int32");
  ConvShapes s = conv_shapes(node, in[0].shape, in[3].shape, bias, false);
  for (size_t i : {1, 2, 6, 7})
    if (has_input(in, i)) check_per_channel(node, in[i], 1, "a scale or zero point of x or y");
  check_per_channel(node, in[4], s.out_channels, "w_scale");
  if (has_input(in, 5)) check_per_channel(node, in[5], s.out_channels, "w_zero_point");
  if (in[6].data) check_scales(*in[6].data, "y_scale");
  DType y_type = has_input(in, 7) ? in[7].dtype : in[0].dtype;
  if (!is_8bit(y_type)) throw Unsupported(node.describe() + ": y_zero_point must be uint8 or int8");
  out[0] = ValueInfo{y_type, s.output, nullptr, true};
}

// Requantizes in float like the runtimes do: round half to even, then saturate.
void reference_qlinear_conv(const Node& node, std::span<const Tensor* const> in, std::span<Tensor* const> out) {
  const Tensor* bias = optional_input(in, 8);
  check_scales(*in[6], "y_scale");
  ConvShapes s = conv_shapes(node, in[0]->shape(), in[3]->shape(), bias ? &bias->shape() : nullptr, false);
  std::vector<double> x = shifted(*in[0], optional_input(in, 2)), w = shifted(*in[3], optional_input(in, 5));
  std::vector<double> acc(static_cast<size_t>(numel(s.output)));
  std::vector<double> b = bias ? bias->to_f64() : std::vector<double>();
  conv_direct<double>(s, x.data(), w.data(), bias ? b.data() : nullptr, acc.data());
  float x_scale = static_cast<float>(in[1]->to_f64().at(0)), y_scale = static_cast<float>(in[6]->to_f64().at(0));
  std::vector<double> w_scale = in[4]->to_f64();
  const Tensor* y_zp_tensor = optional_input(in, 7);
  double y_zp = y_zp_tensor ? y_zp_tensor->to_f64().at(0) : 0.0;
  bool is_signed = out[0]->dtype() == DType::i8;
  double lo = is_signed ? -128 : 0, hi = is_signed ? 127 : 255;
  // A Relu fused by passes/fuse_qdq.cpp: quantized values below y's zero point are negative.
  if (fused_epilogue(node).activation == FusedActivation::relu) lo = std::max(lo, y_zp);
  int64_t plane = numel(s.geometry.output);
  for (size_t i = 0; i < acc.size(); ++i) {
    size_t channel = static_cast<size_t>((static_cast<int64_t>(i) / plane) % s.out_channels);
    float multiplier = x_scale * static_cast<float>(w_scale[w_scale.size() == 1 ? 0 : channel]) / y_scale;
    double q = std::clamp(static_cast<double>(std::nearbyint(static_cast<float>(acc[i]) * multiplier)) + y_zp, lo, hi);
    if (is_signed) out[0]->data<int8_t>()[i] = static_cast<int8_t>(q);
    else out[0]->data<uint8_t>()[i] = static_cast<uint8_t>(q);
  }
}

}  // namespace

void register_conv_ops(OpRegistry& registry) {
  registry.add("Conv", {.infer = infer_conv<false>,
                        .reference = reference_conv<false>,
                        .flops = [](const Node&, std::span<const ValueInfo> in, std::span<const ValueInfo> out) { return conv_products(in, out, 1); }});
  // Each input element is scattered through the whole kernel.
  registry.add("ConvTranspose", {.infer = infer_conv<true>,
                                 .reference = reference_conv<true>,
                                 .flops = [](const Node&, std::span<const ValueInfo> in, std::span<const ValueInfo>) {
                                   const Shape* x = known_shape(in, 0);
                                   const Shape* w = known_shape(in, 1);
                                   if (!x || !w || w->empty()) return int64_t{0};
                                   return checked_mul(checked_mul(2, numel(*x)), checked_product(*w, 1));
                                 }});
  // The integer products count as FLOPs too (one multiply and one add each), so the GFLOP/s
  // of a quantized model compares with its float original's.
  registry.add("ConvInteger", {.infer = infer_conv_integer,
                               .reference = reference_conv_integer,
                               .flops = [](const Node&, std::span<const ValueInfo> in, std::span<const ValueInfo> out) { return conv_products(in, out, 1); },
                               .traits = kStaticQuant});
  registry.add("QLinearConv", {.infer = infer_qlinear_conv,
                               .reference = reference_qlinear_conv,
                               .flops = [](const Node&, std::span<const ValueInfo> in, std::span<const ValueInfo> out) { return conv_products(in, out, 3); },
                               .traits = kStaticQuant});
}

}  // namespace grove
