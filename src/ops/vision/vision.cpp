// The detection and sampling ops of vision models, as naive references: NonMaxSuppression
// (greedy per-class box selection), RoiAlign (bilinear pooling of regions of a feature map)
// and GridSample (sampling an image at normalized locations). Their semantics follow the
// ONNX reference implementations, which mirror ONNX Runtime, down to the order of tests that
// decide which pixels a sample reads. NonMaxSuppression's row count depends on the boxes'
// values, so, like NonZero, its shape is known only once all its inputs are.
#include <algorithm>
#include <array>
#include <cmath>
#include <limits>
#include <optional>
#include <string>
#include <vector>

#include "ops/byte_copy.h"
#include "ops/op.h"
#include "ops/op_util.h"

namespace grove {
namespace {


void require_float(DType dtype, const char* what) {
  if (!is_f32_or_f64(dtype))
    throw Unsupported(std::string(what) + " has dtype " + std::string(dtype_name(dtype)) +
                      "; float32 and float64 are supported");
}

// Calls f(T{}) with T float or double, matching a dtype require_float accepted.
template <class F>
void visit_float(DType dtype, F&& f) {
  if (dtype == DType::f64) f(double{});
  else f(float{});
}

// ---- NonMaxSuppression ----

struct NmsInputs {
  const Tensor* boxes;
  const Tensor* scores;
  const Tensor* max_output;       // the optional inputs, nullptr when omitted
  const Tensor* iou_threshold;
  const Tensor* score_threshold;
};

// The optional inputs are scalars, given as such or as a single-element tensor; an empty one
// counts as omitted, as in the ONNX reference.
void check_nms_scalar(const ValueInfo& info, const char* what, bool integer) {
  if (!info.present) return;
  if (integer ? (info.dtype != DType::i64 && info.dtype != DType::i32) : !is_f32_or_f64(info.dtype))
    throw Error(std::string(what) + " must be " + (integer ? "int64" : "float") + ", got " +
                std::string(dtype_name(info.dtype)));
  if (numel(info.shape) > 1)
    throw Error(std::string(what) + " must be a scalar, got shape " + shape_str(info.shape));
}

void check_nms_inputs(const Node& node, std::span<const ValueInfo> in) {
  require_inputs(node, in.size(), 2, 5);
  const int64_t center = node.attr_int("center_point_box", 0);
  if (center != 0 && center != 1) throw Error("center_point_box must be 0 or 1, got " + std::to_string(center));
  require_float(in[0].dtype, "boxes");
  if (in[1].dtype != in[0].dtype) throw Error("scores must have the dtype of boxes");
  const Shape &b = in[0].shape, &s = in[1].shape;
  if (b.size() != 3 || b[2] != 4) throw Error("boxes must have shape [batches, boxes, 4], got " + shape_str(b));
  if (s.size() != 3 || s[0] != b[0] || s[2] != b[1])
    throw Error("scores must have shape [" + std::to_string(b[0]) + ", classes, " + std::to_string(b[1]) + "], got " +
                shape_str(s));
  if (in.size() > 2) check_nms_scalar(in[2], "max_output_boxes_per_class", true);
  if (in.size() > 3) check_nms_scalar(in[3], "iou_threshold", false);
  if (in.size() > 4) check_nms_scalar(in[4], "score_threshold", false);
}

// The single value of a scalar input; nullopt when it is omitted or empty.
std::optional<double> scalar_value(const Tensor* t) {
  if (!t || t->numel() == 0) return std::nullopt;
  if (t->dtype() == DType::i64 || t->dtype() == DType::i32) return static_cast<double>(t->to_i64()[0]);
  return t->to_f64()[0];
}

// A box as its extent on each axis, whichever corners or center form the model gave. Boxes
// keep the input's precision so overlaps at the threshold decide as the ONNX reference does.
template <class T>
struct Box {
  T y_min, x_min, y_max, x_max;
};

template <class T>
std::vector<Box<T>> nms_boxes(const Tensor& boxes, bool center_point) {
  const T* v = boxes.data<T>();
  std::vector<Box<T>> out(static_cast<size_t>(boxes.numel() / 4));
  for (size_t i = 0; i < out.size(); ++i) {
    const T* b = v + i * 4;
    if (center_point) {
      // [x_center, y_center, width, height]
      const T half_w = b[2] / 2, half_h = b[3] / 2;
      out[i] = {b[1] - half_h, b[0] - half_w, b[1] + half_h, b[0] + half_w};
    } else {
      // [y1, x1, y2, x2] with either diagonal pair of corners.
      out[i] = {std::min(b[0], b[2]), std::min(b[1], b[3]), std::max(b[0], b[2]), std::max(b[1], b[3])};
    }
  }
  return out;
}

// Whether `a` overlaps an already selected `b` too much. Empty or degenerate boxes never
// suppress, and each early return is one the ONNX reference takes, so NaN coordinates also
// come out as "not suppressed".
template <class T>
bool suppresses(const Box<T>& a, const Box<T>& b, double iou_threshold) {
  const T ix_min = std::max(a.x_min, b.x_min), ix_max = std::min(a.x_max, b.x_max);
  if (ix_max <= ix_min) return false;
  const T iy_min = std::max(a.y_min, b.y_min), iy_max = std::min(a.y_max, b.y_max);
  if (iy_max <= iy_min) return false;
  const T inter = (ix_max - ix_min) * (iy_max - iy_min);
  if (inter <= 0) return false;
  const T area_a = (a.x_max - a.x_min) * (a.y_max - a.y_min);
  const T area_b = (b.x_max - b.x_min) * (b.y_max - b.y_min);
  const T uni = area_a + area_b - inter;
  if (area_a <= 0 || area_b <= 0 || uni <= 0) return false;
  return inter / uni > iou_threshold;
}

struct NmsSettings {
  int64_t per_class;  // boxes kept per class at most
  double iou_threshold;
  std::optional<double> score_threshold;
  bool center_point;
};

// Appends the rows of (batch, class, box) selected, by batch, then class, then selection order.
template <class T>
void nms_select_as(const NmsSettings& st, const Tensor& boxes_t, const Tensor& scores_t,
                   std::vector<std::array<int64_t, 3>>& rows) {
  const int64_t batches = boxes_t.shape()[0], count = boxes_t.shape()[1], classes = scores_t.shape()[1];
  const std::vector<Box<T>> boxes = nms_boxes<T>(boxes_t, st.center_point);
  const std::vector<double> scores = scores_t.to_f64();
  std::vector<int64_t> candidates, kept;
  for (int64_t b = 0; b < batches; ++b)
    for (int64_t c = 0; c < classes; ++c) {
      const double* s = &scores[static_cast<size_t>((b * classes + c) * count)];
      const Box<T>* box = &boxes[static_cast<size_t>(b * count)];
      candidates.clear();
      for (int64_t i = 0; i < count; ++i)
        if (!st.score_threshold || s[i] > *st.score_threshold) candidates.push_back(i);
      // Highest score first, the lower index first among equal scores; NaN ranks last so
      // the order stays a strict weak ordering.
      std::stable_sort(candidates.begin(), candidates.end(), [&](int64_t p, int64_t q) {
        if (std::isnan(s[q])) return !std::isnan(s[p]);
        return s[p] > s[q];
      });
      kept.clear();
      for (int64_t i : candidates) {
        if (static_cast<int64_t>(kept.size()) >= st.per_class) break;
        bool selected = std::none_of(kept.begin(), kept.end(), [&](int64_t k) {
          return suppresses(box[i], box[k], st.iou_threshold);
        });
        if (!selected) continue;
        kept.push_back(i);
        rows.push_back({b, c, i});
      }
    }
}

std::vector<std::array<int64_t, 3>> nms_select(const Node& node, const NmsInputs& in) {
  NmsSettings st;
  st.iou_threshold = scalar_value(in.iou_threshold).value_or(0.0);
  if (!(st.iou_threshold >= 0.0 && st.iou_threshold <= 1.0))
    throw Error("iou_threshold must be in [0, 1], got " + std::to_string(st.iou_threshold));
  st.score_threshold = scalar_value(in.score_threshold);
  st.center_point = node.attr_int("center_point_box", 0) == 1;
  // An omitted max_output_boxes_per_class selects nothing, as the spec's default does.
  const double max_output = std::max(scalar_value(in.max_output).value_or(0.0), 0.0);
  const int64_t count = in.boxes->shape()[1];
  st.per_class = static_cast<int64_t>(std::min(max_output, static_cast<double>(count)));
  std::vector<std::array<int64_t, 3>> rows;
  // No boxes select nothing; the batch and class counts of empty tensors may be anything.
  if (count == 0) return rows;
  visit_float(in.boxes->dtype(), [&](auto tag) { nms_select_as<decltype(tag)>(st, *in.boxes, *in.scores, rows); });
  return rows;
}

void nms_infer(const Node& node, std::span<const ValueInfo> in, std::span<ValueInfo> out) {
  check_nms_inputs(node, in);
  for (size_t i = 0; i < in.size(); ++i)
    if (in[i].present && !in[i].data)
      throw DataDependentShape(
          "NonMaxSuppression's output size depends on the boxes and scores, known only at run time");
  auto optional_data = [&](size_t i) { return has_input(in, i) ? in[i].data : nullptr; };
  NmsInputs inputs{in[0].data, in[1].data, optional_data(2), optional_data(3), optional_data(4)};
  const int64_t selected = static_cast<int64_t>(nms_select(node, inputs).size());
  out[0] = ValueInfo{DType::i64, {selected, 3}};
}

void nms_reference(const Node& node, std::span<const Tensor* const> in, std::span<Tensor* const> out) {
  NmsInputs inputs{in[0], in[1], optional_input(in, 2), optional_input(in, 3), optional_input(in, 4)};
  const std::vector<std::array<int64_t, 3>> rows = nms_select(node, inputs);
  if (out[0]->shape() != Shape{static_cast<int64_t>(rows.size()), 3})
    throw Error("output shape " + shape_str(out[0]->shape()) + " does not match the " + std::to_string(rows.size()) +
                " selected boxes");
  int64_t* ys = out[0]->data<int64_t>();
  for (const auto& row : rows) ys = std::copy(row.begin(), row.end(), ys);
}

// ---- RoiAlign ----

struct RoiAlignAttrs {
  bool max_mode;
  bool half_pixel;  // coordinates shifted by half a pixel; off: malformed RoIs grow to one pixel
  int64_t out_h, out_w, sampling_ratio;
  double spatial_scale;
};

RoiAlignAttrs roi_align_attrs(const Node& node) {
  RoiAlignAttrs a;
  const std::string mode = node.attr_string("mode", "avg");
  if (mode != "avg" && mode != "max") throw Error("mode must be avg or max, got '" + mode + "'");
  a.max_mode = mode == "max";
  // The first RoiAlign had no coordinate_transformation_mode and behaved as output_half_pixel.
  const std::string ctm =
      node.opset < 16 ? "output_half_pixel" : node.attr_string("coordinate_transformation_mode", "half_pixel");
  if (ctm != "half_pixel" && ctm != "output_half_pixel")
    throw Error("coordinate_transformation_mode must be half_pixel or output_half_pixel, got '" + ctm + "'");
  a.half_pixel = ctm == "half_pixel";
  a.out_h = node.attr_int("output_height", 1);
  a.out_w = node.attr_int("output_width", 1);
  if (a.out_h < 1 || a.out_w < 1)
    throw Error("output_height and output_width must be 1 or more, got " + std::to_string(a.out_h) + " and " +
                std::to_string(a.out_w));
  checked_numel(node, {a.out_h, a.out_w});  // bins per RoI, whatever the other dims are
  a.sampling_ratio = node.attr_int("sampling_ratio", 0);
  if (a.sampling_ratio < 0) throw Error("sampling_ratio must be 0 or more, got " + std::to_string(a.sampling_ratio));
  a.spatial_scale = node.attr_float("spatial_scale", 1.0f);
  if (!std::isfinite(a.spatial_scale)) throw Error("spatial_scale must be finite");
  return a;
}

void roi_align_infer(const Node& node, std::span<const ValueInfo> in, std::span<ValueInfo> out) {
  require_inputs(node, in.size(), 3, 3);
  const RoiAlignAttrs a = roi_align_attrs(node);
  require_float(in[0].dtype, "X");
  if (in[1].dtype != in[0].dtype) throw Error("rois must have the dtype of X");
  if (in[2].dtype != DType::i64) throw Error("batch_indices must be int64, got " + std::string(dtype_name(in[2].dtype)));
  const Shape &x = in[0].shape, &rois = in[1].shape, &idx = in[2].shape;
  if (x.size() != 4) throw Error("X must have shape [N, C, H, W], got " + shape_str(x));
  if (x[2] == 0 || x[3] == 0) throw Error("X has an empty feature map " + shape_str(x));
  if (rois.size() != 2 || rois[1] != 4) throw Error("rois must have shape [num_rois, 4], got " + shape_str(rois));
  if (idx != Shape{rois[0]})
    throw Error("batch_indices must have shape [" + std::to_string(rois[0]) + "], got " + shape_str(idx));
  Shape y{rois[0], x[1], a.out_h, a.out_w};
  checked_numel(node, y);
  out[0] = ValueInfo{in[0].dtype, y};
}

// Reading every channel of every bin over a sampling grid that the RoI coordinates size:
// a bound on the total samples keeps hostile coordinates from running for hours.
constexpr double kMaxRoiSamples = 4294967296.0;

// One sample point's four neighbours (flat offsets in a channel) and bilinear weights; an
// all-zero sample lies outside the feature map.
template <class T>
struct RoiSample {
  int64_t pos[4] = {0, 0, 0, 0};
  T w[4] = {0, 0, 0, 0};
};

template <class T>
RoiSample<T> roi_sample(T y, T x, int64_t height, int64_t width) {
  RoiSample<T> s;
  // Written as "not inside" so NaN and infinite coordinates also read nothing.
  if (!(y >= T(-1) && y <= static_cast<T>(height) && x >= T(-1) && x <= static_cast<T>(width))) return s;
  y = std::max(y, T(0));
  x = std::max(x, T(0));
  int64_t y_low = static_cast<int64_t>(y), x_low = static_cast<int64_t>(x), y_high, x_high;
  if (y_low >= height - 1) {
    y_high = y_low = height - 1;
    y = static_cast<T>(y_low);
  } else {
    y_high = y_low + 1;
  }
  if (x_low >= width - 1) {
    x_high = x_low = width - 1;
    x = static_cast<T>(x_low);
  } else {
    x_high = x_low + 1;
  }
  const T ly = y - static_cast<T>(y_low), lx = x - static_cast<T>(x_low);
  const T hy = T(1) - ly, hx = T(1) - lx;
  s.pos[0] = y_low * width + x_low;
  s.pos[1] = y_low * width + x_high;
  s.pos[2] = y_high * width + x_low;
  s.pos[3] = y_high * width + x_high;
  s.w[0] = hy * hx;
  s.w[1] = hy * lx;
  s.w[2] = ly * hx;
  s.w[3] = ly * lx;
  return s;
}

template <class T>
void roi_align_run(const RoiAlignAttrs& a, const Tensor& xt, const Tensor& rois_t, const Tensor& idx_t, Tensor& yt) {
  const Shape& xs = xt.shape();
  const int64_t batches = xs[0], channels = xs[1], height = xs[2], width = xs[3];
  const int64_t num_rois = rois_t.shape()[0], bins = a.out_h * a.out_w;
  const T* x = xt.data<T>();
  const T* rois = rois_t.data<T>();
  const int64_t* batch_of = idx_t.data<int64_t>();
  T* y = yt.data<T>();
  const T scale = static_cast<T>(a.spatial_scale), offset = a.half_pixel ? T(0.5) : T(0);
  double samples_left = kMaxRoiSamples;
  for (int64_t r = 0; r < num_rois; ++r) {
    const int64_t batch = batch_of[r];
    if (batch < 0 || batch >= batches)
      throw Error("batch_indices[" + std::to_string(r) + "] = " + std::to_string(batch) + " is out of range for " +
                  std::to_string(batches) + " images");
    // The coordinates are not rounded; that detail is what makes the op RoiAlign.
    const T* roi = rois + r * 4;
    const T start_w = roi[0] * scale - offset, start_h = roi[1] * scale - offset;
    const T end_w = roi[2] * scale - offset, end_h = roi[3] * scale - offset;
    T roi_w = end_w - start_w, roi_h = end_h - start_h;
    if (!std::isfinite(roi_w) || !std::isfinite(roi_h) || !std::isfinite(start_w) || !std::isfinite(start_h))
      throw Error("RoI " + std::to_string(r) + " has non-finite coordinates");
    if (!a.half_pixel) {
      roi_w = std::max(roi_w, T(1));
      roi_h = std::max(roi_h, T(1));
    }
    const T bin_h = roi_h / static_cast<T>(a.out_h), bin_w = roi_w / static_cast<T>(a.out_w);
    // The sampling grid in each bin: as given, or adaptive (about one sample per pixel). An
    // empty or inverted RoI gets no samples and pools to zero.
    auto grid_side = [&](T bin) {
      const double side = a.sampling_ratio > 0 ? static_cast<double>(a.sampling_ratio) : std::ceil(static_cast<double>(bin));
      return std::max(side, 0.0);
    };
    const double grid_hd = grid_side(bin_h), grid_wd = grid_side(bin_w);
    const double roi_samples = grid_hd * grid_wd * static_cast<double>(bins) * static_cast<double>(channels);
    if (!(grid_hd <= kMaxRoiSamples && grid_wd <= kMaxRoiSamples) || roi_samples > samples_left)
      throw Error("RoI " + std::to_string(r) + " needs a sampling grid of " + std::to_string(grid_hd) + " x " +
                  std::to_string(grid_wd) + " per bin, more samples in all than the op allows");
    samples_left -= roi_samples;
    const int64_t grid_h = static_cast<int64_t>(grid_hd), grid_w = static_cast<int64_t>(grid_wd);
    const T count = static_cast<T>(std::max(grid_hd * grid_wd, 1.0));

    for (int64_t c = 0; c < channels; ++c) {
      const T* plane = x + (batch * channels + c) * height * width;
      T* out = y + (r * channels + c) * bins;
      for (int64_t ph = 0; ph < a.out_h; ++ph)
        for (int64_t pw = 0; pw < a.out_w; ++pw) {
          T value = 0;
          bool first = true;
          for (int64_t iy = 0; iy < grid_h; ++iy) {
            const T yy = start_h + static_cast<T>(ph) * bin_h +
                         (static_cast<T>(iy) + T(0.5)) * bin_h / static_cast<T>(grid_h);
            for (int64_t ix = 0; ix < grid_w; ++ix) {
              const T xx = start_w + static_cast<T>(pw) * bin_w +
                           (static_cast<T>(ix) + T(0.5)) * bin_w / static_cast<T>(grid_w);
              const RoiSample<T> s = roi_sample(yy, xx, height, width);
              if (a.max_mode) {
                // As in the ONNX reference: the largest weighted neighbour, not the largest
                // interpolated value.
                T v = s.w[0] * plane[s.pos[0]];
                for (int j = 1; j < 4; ++j) v = std::max(v, s.w[j] * plane[s.pos[j]]);
                value = first ? v : std::max(value, v);
                first = false;
              } else {
                for (int j = 0; j < 4; ++j) value += s.w[j] * plane[s.pos[j]];
              }
            }
          }
          out[ph * a.out_w + pw] = a.max_mode ? value : value / count;
        }
    }
  }
}

void roi_align_reference(const Node& node, std::span<const Tensor* const> in, std::span<Tensor* const> out) {
  const RoiAlignAttrs a = roi_align_attrs(node);
  visit_float(in[0]->dtype(), [&](auto tag) {
    using T = decltype(tag);
    roi_align_run<T>(a, *in[0], *in[1], *in[2], *out[0]);
  });
}

// ---- GridSample ----

enum class SampleMode { linear, nearest, cubic };
enum class Padding { zeros, border, reflection };

struct GridSampleAttrs {
  SampleMode mode;
  Padding padding;
  bool align_corners;
};

GridSampleAttrs grid_sample_attrs(const Node& node) {
  GridSampleAttrs a;
  // Later opsets renamed bilinear and bicubic to linear and cubic.
  const bool renamed = node.opset >= 20;
  const std::string linear = renamed ? "linear" : "bilinear", cubic = renamed ? "cubic" : "bicubic";
  const std::string mode = node.attr_string("mode", linear);
  if (mode == linear) a.mode = SampleMode::linear;
  else if (mode == "nearest") a.mode = SampleMode::nearest;
  else if (mode == cubic) a.mode = SampleMode::cubic;
  else throw Error("mode must be " + linear + ", nearest or " + cubic + ", got '" + mode + "'");
  const std::string padding = node.attr_string("padding_mode", "zeros");
  if (padding == "zeros") a.padding = Padding::zeros;
  else if (padding == "border") a.padding = Padding::border;
  else if (padding == "reflection") a.padding = Padding::reflection;
  else throw Error("padding_mode must be zeros, border or reflection, got '" + padding + "'");
  a.align_corners = node.attr_int("align_corners", 0) != 0;
  return a;
}

void grid_sample_infer(const Node& node, std::span<const ValueInfo> in, std::span<ValueInfo> out) {
  require_inputs(node, in.size(), 2, 2);
  grid_sample_attrs(node);
  require_float(in[0].dtype, "X");
  require_float(in[1].dtype, "grid");
  const Shape &x = in[0].shape, &grid = in[1].shape;
  if (x.size() != 4) {
    if (node.opset >= 20 && x.size() > 2) throw Unsupported("only 4-D input (spatial, [N, C, H, W]) is supported");
    throw Error("X must have shape [N, C, H, W], got " + shape_str(x));
  }
  if (grid.size() != 4 || grid[0] != x[0] || grid[3] != 2)
    throw Error("grid must have shape [" + std::to_string(x[0]) + ", H_out, W_out, 2], got " + shape_str(grid));
  if (x[2] == 0 || x[3] == 0) throw Error("X has an empty spatial dim " + shape_str(x));
  Shape y{x[0], x[1], grid[1], grid[2]};
  checked_numel(node, y);
  out[0] = ValueInfo{in[0].dtype, y};
}

// Folds x back into [lo, hi] by reflecting it off the nearer edge as often as it takes.
double reflect(double x, double lo, double hi) {
  const double range = hi - lo;
  if (!(range > 0)) return lo;  // one pixel with aligned corners: every location is that pixel
  if (std::isinf(x)) return x < 0 ? lo : hi;
  if (x < lo || x > hi) {
    const double d = x < lo ? lo - x : x - hi;
    const double flips = std::trunc(d / range);
    const double r = d - flips * range;
    const bool toward_hi = (x < lo) == (std::fmod(flips, 2.0) == 0.0);
    x = toward_hi ? lo + r : hi - r;
  }
  return std::clamp(x, lo, hi);
}

// One spatial axis of the input: its size and the location range that counts as inside.
struct SampleAxis {
  int64_t size;
  double lo, hi;

  SampleAxis(int64_t n, bool align_corners)
      : size(n),
        lo(align_corners ? 0.0 : -0.5),
        hi(align_corners ? static_cast<double>(n) - 1 : static_cast<double>(n) - 0.5) {}

  // From normalized units (the ends are the edge pixels' centers with aligned corners, else
  // their outer edges) to pixel units, in the grid's precision: nearest sampling rounds the
  // result, so a half-pixel location must come out as the ONNX reference computes it.
  template <class G>
  double denormalize(double v, bool align_corners) const {
    const G g = static_cast<G>(v), n = static_cast<G>(size);
    return static_cast<double>(align_corners ? (g + 1) / 2 * (n - 1) : ((g + 1) * n - 1) / 2);
  }
  double denormalize(double v, bool align_corners, bool float_grid) const {
    return float_grid ? denormalize<float>(v, align_corners) : denormalize<double>(v, align_corners);
  }

  // A location outside [lo, hi] moved in as the padding mode says; zeros leaves it (its
  // neighbours read as zero). Clamping after, to a few pixels beyond the edges, keeps
  // every neighbour index small without changing what a zeros sample reads.
  double pad(double x, Padding padding) const {
    if (x < lo || x > hi) {
      if (padding == Padding::border) x = std::clamp(x, 0.0, static_cast<double>(size) - 1);
      else if (padding == Padding::reflection) x = reflect(x, lo, hi);
    }
    return std::clamp(x, -4.0, static_cast<double>(size) + 3);
  }

  // The index a neighbour reads, or a negative one when it reads zero.
  int64_t index(int64_t i, Padding padding) const {
    if (padding == Padding::zeros) return i >= 0 && i < size ? i : -1;
    if (padding == Padding::border) return std::clamp<int64_t>(i, 0, size - 1);
    const int64_t r = static_cast<int64_t>(reflect(static_cast<double>(i), lo, hi));
    return std::clamp<int64_t>(r, 0, size - 1);
  }
};

// Keys' cubic convolution weights, with PyTorch's A, for the four neighbours from the one
// before floor(x) to the one two after, where t = x - floor(x).
std::array<double, 4> cubic_weights(double t) {
  constexpr double A = -0.75;
  auto near = [](double d) { return ((A + 2) * d - (A + 3)) * d * d + 1; };       // within a pixel
  auto far = [](double d) { return ((A * d - 5 * A) * d + 8 * A) * d - 4 * A; };  // a pixel or more away
  return {far(t + 1), near(t), near(1 - t), far(2 - t)};
}

template <class T>
void grid_sample_run(const GridSampleAttrs& a, const Tensor& xt, const Tensor& grid_t, Tensor& yt) {
  // Nothing to write, and the dims of an empty tensor need not multiply without overflow.
  if (yt.numel() == 0) return;
  const Shape& xs = xt.shape();
  const int64_t batches = xs[0], channels = xs[1], out_h = grid_t.shape()[1], out_w = grid_t.shape()[2];
  const SampleAxis ay(xs[2], a.align_corners), ax(xs[3], a.align_corners);
  const T* x = xt.data<T>();
  const std::vector<double> grid = grid_t.to_f64();
  const bool float_grid = grid_t.dtype() == DType::f32;
  T* y = yt.data<T>();
  const int64_t plane = xs[2] * xs[3], out_plane = out_h * out_w;

  // Per output location: neighbour indices per axis (negative reads zero) and their weights.
  const int taps = a.mode == SampleMode::cubic ? 4 : a.mode == SampleMode::linear ? 2 : 1;
  std::array<int64_t, 4> iy{}, ix{};
  std::array<double, 4> wy{}, wx{};
  for (int64_t n = 0; n < batches; ++n)
    for (int64_t p = 0; p < out_plane; ++p) {
      const double* g = &grid[static_cast<size_t>((n * out_plane + p) * 2)];
      double fx = ax.denormalize(g[0], a.align_corners, float_grid);
      double fy = ay.denormalize(g[1], a.align_corners, float_grid);
      if (std::isnan(fx) || std::isnan(fy)) {
        for (int64_t c = 0; c < channels; ++c)
          y[(n * channels + c) * out_plane + p] = std::numeric_limits<T>::quiet_NaN();
        continue;
      }
      if (a.mode == SampleMode::nearest) {
        // Round half to even, as PyTorch's spatial nearest sampling.
        fx = std::nearbyint(fx);
        fy = std::nearbyint(fy);
      }
      fx = ax.pad(fx, a.padding);
      fy = ay.pad(fy, a.padding);
      const double x0 = std::floor(fx), y0 = std::floor(fy);
      const double tx = fx - x0, ty = fy - y0;
      if (a.mode == SampleMode::nearest) {
        wx[0] = wy[0] = 1;
      } else if (a.mode == SampleMode::linear) {
        wx = {1 - tx, tx, 0, 0};
        wy = {1 - ty, ty, 0, 0};
      } else {
        wx = cubic_weights(tx);
        wy = cubic_weights(ty);
      }
      const int64_t first = a.mode == SampleMode::cubic ? -1 : 0;
      for (int k = 0; k < taps; ++k) {
        ix[k] = ax.index(static_cast<int64_t>(x0) + first + k, a.padding);
        iy[k] = ay.index(static_cast<int64_t>(y0) + first + k, a.padding);
      }
      for (int64_t c = 0; c < channels; ++c) {
        const T* src = x + (n * channels + c) * plane;
        double sum = 0;
        for (int i = 0; i < taps; ++i) {
          if (iy[i] < 0) continue;
          double row = 0;
          for (int j = 0; j < taps; ++j)
            if (ix[j] >= 0) row += wx[j] * static_cast<double>(src[iy[i] * xs[3] + ix[j]]);
          sum += wy[i] * row;
        }
        y[(n * channels + c) * out_plane + p] = static_cast<T>(sum);
      }
    }
}

void grid_sample_reference(const Node& node, std::span<const Tensor* const> in, std::span<Tensor* const> out) {
  const GridSampleAttrs a = grid_sample_attrs(node);
  visit_float(in[0]->dtype(), [&](auto tag) {
    using T = decltype(tag);
    grid_sample_run<T>(a, *in[0], *in[1], *out[0]);
  });
}

}  // namespace

void register_vision_ops(OpRegistry& r) {
  r.add("NonMaxSuppression", {nms_infer, nms_reference});
  r.add("RoiAlign", {roi_align_infer, roi_align_reference});
  r.add("GridSample", {grid_sample_infer, grid_sample_reference});
}

}  // namespace grove
