// Resize (opsets 10, 11, 13) and Upsample (opsets 7, 9): nearest, n-linear and cubic
// interpolation over any dims. Coordinates follow the ONNX reference implementation,
// including its use of scale * input_length (not the rounded output length) as the
// resized length when scales are given.
//
// Interpolation is separable: one 1-D pass per resized axis, last axis first as the ONNX
// reference recurses. Nearest is a pure index table, so it moves bytes and works for any
// dtype; linear and cubic compute in double and support float32.
//
// One exception: bilinear resizing of the last two dims of a 4-D tensor (an upsampling
// layer's usual form) computes in float32 with ONNX Runtime's weights and summation order,
// so the two agree bit for bit. A dynamically quantized model re-derives each layer's scale
// from its input's range, and there a 1-ulp difference after a Resize grew to 6e-2 at the
// outputs (docs/quantization.md).
#include <algorithm>
#include <cmath>
#include <cstring>

#include "ops/byte_copy.h"
#include "ops/op.h"
#include "ops/op_util.h"
#include "ops/resize/resize_plan.h"

namespace grove {
namespace {

// One output position along an axis: the weighted input indices it reads, or the
// extrapolation value (tf_crop_and_resize outside the crop box).
struct Taps {
  bool extrapolate = false;
  std::vector<std::pair<int64_t, double>> reads;  // (input index, weight)
};

double cubic_weight(double t, double a) {
  t = std::fabs(t);
  if (t <= 1) return ((a + 2) * t - (a + 3)) * t * t + 1;
  if (t < 2) return ((a * t - 5 * a) * t + 8 * a) * t - 4 * a;
  return 0;
}

int64_t nearest_index(const ResizePlan& p, double x, double scale) {
  double lower = std::floor(x);
  double r = x - lower;
  if (r == 0) return static_cast<int64_t>(lower);
  switch (p.nearest) {
    case NearestMode::round_prefer_floor: return static_cast<int64_t>(r <= 0.5 ? lower : lower + 1);
    case NearestMode::round_prefer_ceil: return static_cast<int64_t>(r < 0.5 ? lower : lower + 1);
    case NearestMode::floor: return static_cast<int64_t>(lower);
    case NearestMode::ceil: return static_cast<int64_t>(lower + 1);
    case NearestMode::simple: return static_cast<int64_t>(scale < 1 ? lower + 1 : lower);
  }
  return static_cast<int64_t>(lower);
}

std::vector<Taps> axis_taps(const ResizePlan& p, size_t axis, int64_t in_len, int64_t out_len) {
  std::vector<Taps> taps(static_cast<size_t>(out_len));
  for (int64_t x = 0; x < out_len; ++x) {
    Taps& t = taps[static_cast<size_t>(x)];
    double src = source_coordinate(p, axis, x, in_len);
    if (p.coordinates == CoordinateMode::tf_crop_and_resize && (src < 0 || src > static_cast<double>(in_len - 1))) {
      t.extrapolate = true;
      continue;
    }
    if (p.mode == InterpolationMode::nearest) {
      t.reads.emplace_back(nearest_index(p, src, p.scales[axis]), 1.0);
    } else {
      int64_t lower = static_cast<int64_t>(std::floor(src));
      double r = src - static_cast<double>(lower);
      if (p.mode == InterpolationMode::linear) {
        t.reads = {{lower, 1 - r}, {lower + 1, r}};
      } else {
        for (int64_t k = -1; k <= 2; ++k) t.reads.emplace_back(lower + k, cubic_weight(r - static_cast<double>(k), p.cubic_a));
      }
    }
    // Reads past the edge repeat the edge value, unless exclude_outside drops them.
    double kept = 0;
    for (auto& [index, weight] : t.reads) {
      bool outside = index < 0 || index >= in_len;
      if (outside && p.exclude_outside) weight = 0;
      index = std::clamp(index, int64_t{0}, in_len - 1);
      kept += weight;
    }
    if (p.exclude_outside && kept != 0)
      for (auto& read : t.reads) read.second /= kept;
  }
  return taps;
}

// An axis whose every output reads its own input position with weight 1 needs no pass.
bool is_identity(const std::vector<Taps>& taps, int64_t in_len) {
  if (static_cast<int64_t>(taps.size()) != in_len) return false;
  for (size_t x = 0; x < taps.size(); ++x) {
    if (taps[x].extrapolate) return false;
    for (const auto& [index, weight] : taps[x].reads)
      if (weight != 0 && (index != static_cast<int64_t>(x) || weight != 1)) return false;
  }
  return true;
}

void nearest_reference(const ResizePlan& p, const Tensor& x, Tensor& y) {
  // An empty output may still have huge dims: build no offset tables for it.
  if (y.numel() == 0) return;
  std::vector<int64_t> strides = strides_of(x.shape());
  AxisOffsets offsets(y.shape().size());
  for (size_t d = 0; d < offsets.size(); ++d)
    for (const Taps& t : axis_taps(p, d, x.dim(static_cast<int64_t>(d)), y.dim(static_cast<int64_t>(d))))
      offsets[d].push_back(t.extrapolate ? kFill : t.reads[0].first * strides[d]);
  gather_by_offsets(x, y, offsets, scalar_bytes(x.dtype(), p.extrapolation_value));
}

// One 1-D interpolation pass along `axis`.
Tensor interpolate_axis(const ResizePlan& p, const Tensor& x, size_t axis, const std::vector<Taps>& taps) {
  Shape shape = x.shape();
  int64_t in_len = shape[axis];
  shape[axis] = static_cast<int64_t>(taps.size());
  Tensor y(DType::f32, shape);
  int64_t outer = 1, inner = 1;
  for (size_t d = 0; d < axis; ++d) outer *= shape[d];
  for (size_t d = axis + 1; d < shape.size(); ++d) inner *= shape[d];
  const float* src = x.data<float>();
  float* dst = y.data<float>();
  std::vector<double> acc(static_cast<size_t>(inner));
  for (int64_t o = 0; o < outer; ++o)
    for (size_t q = 0; q < taps.size(); ++q) {
      float* row = dst + (o * static_cast<int64_t>(taps.size()) + static_cast<int64_t>(q)) * inner;
      if (taps[q].extrapolate) {
        std::fill(row, row + inner, static_cast<float>(p.extrapolation_value));
        continue;
      }
      std::fill(acc.begin(), acc.end(), 0.0);
      for (const auto& [index, weight] : taps[q].reads) {
        const float* in_row = src + (o * in_len + index) * inner;
        for (int64_t i = 0; i < inner; ++i) acc[i] += weight * static_cast<double>(in_row[i]);
      }
      for (int64_t i = 0; i < inner; ++i) row[i] = static_cast<float>(acc[i]);
    }
  return y;
}

// The input coordinate of output index `x` in float32, for the modes bilinear_float takes.
float source_coordinate_f32(const ResizePlan& p, size_t axis, int64_t x, int64_t out_len) {
  const float scale = static_cast<float>(p.scales[axis]), xf = static_cast<float>(x);
  switch (p.coordinates) {
    case CoordinateMode::half_pixel: return (xf + 0.5f) / scale - 0.5f;
    case CoordinateMode::pytorch_half_pixel: return out_len > 1 ? (xf + 0.5f) / scale - 0.5f : 0.0f;
    case CoordinateMode::asymmetric: return xf / scale;
    default: return 0.0f;
  }
}

// Where each output position along one axis reads, and with what weights (see above).
struct BilinearAxis {
  std::vector<int64_t> lo, hi;
  std::vector<float> w_lo, w_hi;  // ONNX Runtime's d2 and d1: the weights of lo and hi
};

BilinearAxis bilinear_axis(const ResizePlan& p, size_t axis, int64_t in_len, int64_t out_len) {
  BilinearAxis a;
  for (int64_t x = 0; x < out_len; ++x) {
    const float src = std::max(0.0f, std::min(source_coordinate_f32(p, axis, x, out_len),
                                              static_cast<float>(in_len - 1)));
    const int64_t lo = std::min(static_cast<int64_t>(src), in_len - 1), hi = std::min(lo + 1, in_len - 1);
    float d_lo = std::fabs(src - static_cast<float>(lo)), d_hi = std::fabs(src - static_cast<float>(hi));
    if (lo == hi) d_lo = d_hi = 0.5f;
    a.lo.push_back(lo);
    a.hi.push_back(hi);
    a.w_lo.push_back(d_hi);
    a.w_hi.push_back(d_lo);
  }
  return a;
}

}  // namespace

bool is_plane_bilinear(const ResizePlan& p, const Shape& x, const Shape& y) {
  if (p.mode != InterpolationMode::linear || x.size() != 4 || y.size() != 4 || p.exclude_outside || numel(x) == 0)
    return false;
  if (x[0] != y[0] || x[1] != y[1] || p.scales[0] != 1 || p.scales[1] != 1) return false;
  switch (p.coordinates) {
    // align_corners stays on the general path: with scales given, ONNX maps through
    // scale * input length where ONNX Runtime uses the output length.
    case CoordinateMode::half_pixel: case CoordinateMode::pytorch_half_pixel: case CoordinateMode::asymmetric: return true;
    default: return false;
  }
}

// Each product and sum rounds to float32 in ONNX Runtime's order; resize.cpp is compiled
// without FMA contraction (CMakeLists.txt) so no step fuses.
void bilinear_planes(const ResizePlan& p, const Tensor& x, Tensor& y, int64_t begin, int64_t end) {
  const int64_t H = x.dim(2), W = x.dim(3), OH = y.dim(2), OW = y.dim(3);
  const BilinearAxis rows = bilinear_axis(p, 2, H, OH), cols = bilinear_axis(p, 3, W, OW);
  const float* src = x.data<float>() + begin * H * W;
  float* dst = y.data<float>() + begin * OH * OW;
  for (int64_t n = begin; n < end; ++n, src += H * W, dst += OH * OW)
    for (int64_t r = 0; r < OH; ++r) {
      const float* top = src + rows.lo[static_cast<size_t>(r)] * W;
      const float* bottom = src + rows.hi[static_cast<size_t>(r)] * W;
      const float wt = rows.w_lo[static_cast<size_t>(r)], wb = rows.w_hi[static_cast<size_t>(r)];
      for (int64_t c = 0; c < OW; ++c) {
        const auto k = static_cast<size_t>(c);
        const int64_t left = cols.lo[k], right = cols.hi[k];
        const float wl = cols.w_lo[k], wr = cols.w_hi[k];
        dst[r * OW + c] = wl * wt * top[left] + wr * wt * top[right] + wl * wb * bottom[left] + wr * wb * bottom[right];
      }
    }
}

bool is_plane_nearest(const ResizePlan& p, DType dtype, const Shape& x, const Shape& y) {
  if (p.mode != InterpolationMode::nearest || dtype_size(dtype) != 4 || x.size() != 4 || y.size() != 4 || numel(x) == 0)
    return false;
  return x[0] == y[0] && x[1] == y[1] && p.scales[0] == 1 && p.scales[1] == 1 &&
         p.coordinates != CoordinateMode::tf_crop_and_resize;
}

// The reference's index per output row and column (axis_taps, clamped to the plane); an
// output row that picks the same input row as the one before is a copy of it (2x upsampling).
void nearest_planes(const ResizePlan& p, const Tensor& x, Tensor& y, int64_t begin, int64_t end) {
  const int64_t H = x.dim(2), W = x.dim(3), OH = y.dim(2), OW = y.dim(3);
  std::vector<int64_t> rows, cols;
  for (const Taps& t : axis_taps(p, 2, H, OH)) rows.push_back(t.reads[0].first);
  for (const Taps& t : axis_taps(p, 3, W, OW)) cols.push_back(t.reads[0].first);
  const auto* src = reinterpret_cast<const uint32_t*>(x.raw()) + begin * H * W;
  auto* dst = reinterpret_cast<uint32_t*>(y.raw()) + begin * OH * OW;
  for (int64_t n = begin; n < end; ++n, src += H * W, dst += OH * OW)
    for (int64_t r = 0; r < OH; ++r) {
      uint32_t* out = dst + r * OW;
      if (r > 0 && rows[size_t(r)] == rows[size_t(r - 1)]) {
        std::memcpy(out, out - OW, size_t(OW) * sizeof(uint32_t));
        continue;
      }
      const uint32_t* in = src + rows[size_t(r)] * W;
      for (int64_t c = 0; c < OW; ++c) out[c] = in[cols[size_t(c)]];
    }
}

namespace {

void interpolate_reference(const ResizePlan& p, const Tensor& x, Tensor& y) {
  if (x.dtype() != DType::f32)
    throw Unsupported("linear and cubic resize support float32 only, got " + std::string(dtype_name(x.dtype())));
  if (is_plane_bilinear(p, x.shape(), y.shape())) return bilinear_planes(p, x, y, 0, x.dim(0) * x.dim(1));
  Tensor current = x;
  for (size_t axis = x.shape().size(); axis-- > 0;) {
    std::vector<Taps> taps = axis_taps(p, axis, current.dim(static_cast<int64_t>(axis)), y.dim(static_cast<int64_t>(axis)));
    if (is_identity(taps, current.dim(static_cast<int64_t>(axis)))) continue;
    current = interpolate_axis(p, current, axis, taps);
  }
  if (current.numel() != y.numel()) throw Error("resize: internal shape mismatch");
  if (y.bytes()) std::memcpy(y.raw(), current.raw(), y.bytes());
}

void resize_infer(const Node& node, std::span<const ValueInfo> in, std::span<ValueInfo> out) {
  ResizePlan p = resize_plan(node, in);
  if (p.mode != InterpolationMode::nearest && in[0].dtype != DType::f32)
    throw Unsupported(node.describe() + ": linear and cubic resize support float32 only, got " +
                      std::string(dtype_name(in[0].dtype)));
  out[0] = ValueInfo{in[0].dtype, p.out_shape};
}

void resize_reference(const Node& node, std::span<const Tensor* const> in, std::span<Tensor* const> out) {
  ResizePlan p = resize_plan(node, infos_of(in));
  if (p.mode == InterpolationMode::nearest) nearest_reference(p, *in[0], *out[0]);
  else interpolate_reference(p, *in[0], *out[0]);
}

}  // namespace

void register_resize_ops(OpRegistry& r) {
  r.add("Resize", with_traits(OpSpec{resize_infer, resize_reference}, kPerChannel));
  r.add("Upsample", with_traits(OpSpec{resize_infer, resize_reference}, kPerChannel));
}

}  // namespace grove
