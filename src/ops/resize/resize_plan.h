#pragma once
// What a Resize or Upsample node asks for, read once from its attributes and constant
// inputs: the interpolation, the coordinate mapping and the per-dim scales and sizes.
#include <span>
#include <vector>

#include "graph/graph.h"

namespace grove {

enum class InterpolationMode { nearest, linear, cubic };
// `simple` is what Upsample and Resize-10 do (as ONNX Runtime reads them): floor when
// upsampling, ceil when downsampling.
enum class NearestMode { round_prefer_floor, round_prefer_ceil, floor, ceil, simple };
enum class CoordinateMode { half_pixel, pytorch_half_pixel, align_corners, asymmetric, tf_half_pixel_for_nn, tf_crop_and_resize };

struct ResizePlan {
  InterpolationMode mode = InterpolationMode::nearest;
  NearestMode nearest = NearestMode::round_prefer_floor;
  CoordinateMode coordinates = CoordinateMode::half_pixel;
  double cubic_a = -0.75;
  bool exclude_outside = false;
  double extrapolation_value = 0;
  std::vector<double> scales;  // per dim; output/input when sizes are given
  std::vector<double> roi;     // starts then ends, normalized; tf_crop_and_resize only
  Shape out_shape;
};

// Throws Error for malformed nodes and Unsupported for valid modes grove does not implement.
ResizePlan resize_plan(const Node& node, std::span<const ValueInfo> in);

// The input coordinate that output index x along `axis` maps to.
double source_coordinate(const ResizePlan& plan, size_t axis, int64_t x, int64_t in_len);

// Bilinear resizing of the last two dims of a 4-D float32 tensor (half_pixel,
// pytorch_half_pixel or asymmetric coordinates, no exclude_outside): resize.cpp computes it
// in float32 with ONNX Runtime's weights and order, one (image, channel) plane at a time, so
// its tiles may take any run of planes.
bool is_plane_bilinear(const ResizePlan& plan, const Shape& in, const Shape& out);
// Planes [begin, end) of that case (plane n * channels + c), of the whole tensors x and y.
void bilinear_planes(const ResizePlan& plan, const Tensor& x, Tensor& y, int64_t begin, int64_t end);

// Nearest resizing of the last two dims of a 4-D tensor of 4-byte elements (the batch and
// channel dims kept; any coordinate and rounding mode but tf_crop_and_resize): every output
// element is the input element the reference picks, so its tiles may take any run of planes.
bool is_plane_nearest(const ResizePlan& plan, DType dtype, const Shape& in, const Shape& out);
// Planes [begin, end) of that case, of the whole tensors x and y.
void nearest_planes(const ResizePlan& plan, const Tensor& x, Tensor& y, int64_t begin, int64_t end);

}  // namespace grove
