#include "ops/resize/resize_plan.h"

#include <cmath>

#include "ops/byte_copy.h"
#include "ops/op_util.h"

namespace grove {
namespace {

InterpolationMode interpolation_mode(const Node& node, bool legacy) {
  std::string mode = node.attr_string("mode", "nearest");
  if (mode == "nearest") return InterpolationMode::nearest;
  if (mode == "linear" || (legacy && mode == "bilinear")) return InterpolationMode::linear;
  if (mode == "cubic" && !legacy) return InterpolationMode::cubic;
  throw Error(node.describe() + ": unknown mode '" + mode + "'");
}

CoordinateMode coordinate_mode(const Node& node) {
  std::string mode = node.attr_string("coordinate_transformation_mode", "half_pixel");
  if (mode == "half_pixel") return CoordinateMode::half_pixel;
  if (mode == "pytorch_half_pixel") return CoordinateMode::pytorch_half_pixel;
  if (mode == "align_corners") return CoordinateMode::align_corners;
  if (mode == "asymmetric") return CoordinateMode::asymmetric;
  if (mode == "tf_half_pixel_for_nn") return CoordinateMode::tf_half_pixel_for_nn;
  if (mode == "tf_crop_and_resize") return CoordinateMode::tf_crop_and_resize;
  if (mode == "half_pixel_symmetric") throw Unsupported(node.describe() + ": coordinate mode '" + mode + "' is not supported");
  throw Error(node.describe() + ": unknown coordinate_transformation_mode '" + mode + "'");
}

NearestMode nearest_mode(const Node& node) {
  std::string mode = node.attr_string("nearest_mode", "round_prefer_floor");
  if (mode == "round_prefer_floor") return NearestMode::round_prefer_floor;
  if (mode == "round_prefer_ceil") return NearestMode::round_prefer_ceil;
  if (mode == "floor") return NearestMode::floor;
  if (mode == "ceil") return NearestMode::ceil;
  throw Error(node.describe() + ": unknown nearest_mode '" + mode + "'");
}

// Opset 18 options: accepted only at their defaults.
void reject_opset18_options(const Node& node) {
  if (node.attr_int("antialias", 0) != 0) throw Unsupported(node.describe() + ": antialias is not supported");
  if (node.has_attr("axes")) throw Unsupported(node.describe() + ": the axes attribute is not supported");
  if (node.attr_string("keep_aspect_ratio_policy", "stretch") != "stretch")
    throw Unsupported(node.describe() + ": keep_aspect_ratio_policy other than 'stretch' is not supported");
}

std::vector<double> read_scales(const Node& node, std::span<const ValueInfo> in, size_t i) {
  const Tensor& t = constant_input(node, in, i, "scales");
  if (t.dtype() != DType::f32 && t.dtype() != DType::f64) throw Error(node.describe() + ": scales must be float");
  return t.to_f64();
}

bool given(std::span<const ValueInfo> in, size_t i) { return has_input(in, i) && numel(in[i].shape) > 0; }

}  // namespace

ResizePlan resize_plan(const Node& node, std::span<const ValueInfo> in) {
  // Upsample and Resize-10 share one form: asymmetric coordinates, scales only.
  bool legacy = node.op_type == "Upsample" || node.opset < 11;
  ResizePlan p;
  p.mode = interpolation_mode(node, legacy);
  if (in.empty() || !in[0].present) throw Error(node.describe() + ": missing input X");
  const Shape& s = in[0].shape;
  size_t rank = s.size();
  bool from_sizes = false;
  std::vector<int64_t> sizes;
  if (legacy) {
    p.coordinates = CoordinateMode::asymmetric;
    p.nearest = NearestMode::simple;
    if (node.op_type == "Upsample" && node.opset < 9) {
      require_inputs(node, in.size(), 1, 1);
      std::vector<float> f = node.attr_floats("scales");
      p.scales.assign(f.begin(), f.end());
    } else {
      require_inputs(node, in.size(), 2, 2);
      p.scales = read_scales(node, in, 1);
    }
  } else {
    require_inputs(node, in.size(), node.opset < 13 ? 3 : 1, 4);
    reject_opset18_options(node);
    p.coordinates = coordinate_mode(node);
    p.nearest = nearest_mode(node);
    p.cubic_a = node.attr_float("cubic_coeff_a", -0.75f);
    p.exclude_outside = node.attr_int("exclude_outside", 0) != 0;
    p.extrapolation_value = node.attr_float("extrapolation_value", 0.0f);
    bool has_scales = given(in, 2), has_sizes = given(in, 3);
    if (has_scales == has_sizes) throw Error(node.describe() + ": exactly one of scales and sizes must be given");
    if (has_scales) p.scales = read_scales(node, in, 2);
    else {
      sizes = constant_ints(node, in, 3, "sizes");
      from_sizes = true;
    }
    if (p.coordinates == CoordinateMode::tf_crop_and_resize) {
      // roi changes values, not the shape: infer may run before it is known.
      if (!has_input(in, 1)) throw Error(node.describe() + ": tf_crop_and_resize needs the roi input");
      if (in[1].data) {
        p.roi = in[1].data->to_f64();
        if (p.roi.size() != 2 * rank) throw Error(node.describe() + ": roi must have 2 * rank entries");
      }
    }
  }
  if ((from_sizes ? sizes.size() : p.scales.size()) != rank)
    throw Error(node.describe() + ": scales or sizes must have one entry per dim (" + std::to_string(rank) + ")");
  p.out_shape.resize(rank);
  if (from_sizes) p.scales.resize(rank);
  for (size_t d = 0; d < rank; ++d) {
    if (from_sizes) {
      if (sizes[d] < 0) throw Error(node.describe() + ": sizes must not be negative");
      p.out_shape[d] = sizes[d];
      p.scales[d] = s[d] ? static_cast<double>(sizes[d]) / static_cast<double>(s[d]) : 1.0;
    } else {
      if (!(p.scales[d] > 0) || !std::isfinite(p.scales[d])) throw Error(node.describe() + ": scales must be positive");
      double len = p.scales[d] * static_cast<double>(s[d]);
      if (len >= double(int64_t{1} << 40)) throw Error(node.describe() + ": the output is too large");
      // The product in float32, as ONNX Runtime and PyTorch compute it: a scale stored as
      // 1.6666666f times 48 must give 80, where double arithmetic gives 79.99999.
      p.out_shape[d] = static_cast<int64_t>(std::floor(static_cast<float>(p.scales[d]) * static_cast<float>(s[d])));
    }
    if (s[d] == 0 && p.out_shape[d] > 0) throw Error(node.describe() + ": cannot resize an empty dim to a non-empty one");
  }
  checked_numel(node, p.out_shape);
  return p;
}

double source_coordinate(const ResizePlan& p, size_t axis, int64_t x, int64_t in_len) {
  double scale = p.scales[axis];
  double xr = static_cast<double>(x), in = static_cast<double>(in_len);
  // The ONNX reference uses scale * input length as the resized length, not the rounded size.
  double resized = scale * in;
  switch (p.coordinates) {
    case CoordinateMode::half_pixel: return (xr + 0.5) / scale - 0.5;
    case CoordinateMode::pytorch_half_pixel: return resized == 1 ? -0.5 : (xr + 0.5) / scale - 0.5;
    case CoordinateMode::align_corners: return resized == 1 ? 0 : xr * (in - 1) / (resized - 1);
    case CoordinateMode::asymmetric: return xr / scale;
    case CoordinateMode::tf_half_pixel_for_nn: return (xr + 0.5) / scale;
    case CoordinateMode::tf_crop_and_resize: {
      size_t rank = p.roi.size() / 2;
      double start = p.roi.empty() ? 0 : p.roi[axis], end = p.roi.empty() ? 1 : p.roi[rank + axis];
      double span = end - start;
      double mapped = resized == 1 ? span * (in - 1) / 2 : xr * span * (in - 1) / (resized - 1);
      return mapped + start * (in - 1);
    }
  }
  return xr;
}

}  // namespace grove
