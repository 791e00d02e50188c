// Signal processing: DFT, STFT, the window generators (HannWindow, HammingWindow,
// BlackmanWindow) and MelWeightMatrix. All are naive references: a plain DFT summed in double
// precision, since these ops feed audio front ends where sizes are small and exactness beats
// speed. Complex tensors use ONNX's real representation: a trailing dim holding (real, imaginary),
// or only the real part for a real signal.
#include <algorithm>
#include <cmath>
#include <numbers>
#include <type_traits>
#include <vector>

#include "ops/byte_copy.h"
#include "ops/op.h"
#include "ops/op_util.h"

namespace grove {
namespace {

// ---- shared helpers ----

bool is_signal_dtype(DType d) { return d == DType::f32 || d == DType::f64; }

void require_signal_dtype(const Node& node, DType d, const char* what) {
  if (!is_signal_dtype(d))
    throw Unsupported(node.describe() + ": " + what + " dtype " + std::string(dtype_name(d)) + " is not supported");
}

// A scalar (or one-element) integer input that shapes depend on, so it must be constant.
int64_t constant_scalar_int(const Node& node, std::span<const ValueInfo> in, size_t i, const char* what) {
  std::vector<int64_t> v = constant_ints(node, in, i, what);
  if (v.size() != 1) throw Error(node.describe() + ": " + what + " must be a scalar, got " + std::to_string(v.size()) + " values");
  return v[0];
}

// A one-element numeric input read as a double (the values, not the shape, depend on it).
double scalar_value(const Node& node, const Tensor& t, const char* what) {
  if (t.numel() != 1) throw Error(node.describe() + ": " + what + " must be a scalar, got shape " + shape_str(t.shape()));
  if (t.dtype() == DType::boolean) throw Error(node.describe() + ": " + what + " must be numeric");
  return t.to_f64()[0];
}

// The output dtype the generator ops take from `output_datatype` (float by default): the
// numeric dtypes grove computes in, plus float16, stored through a conversion.
DType generated_dtype(const Node& node) {
  int64_t code = node.attr_int("output_datatype", 1);
  DType d = code >= 0 && code <= 1000 ? dtype_from_onnx(static_cast<int>(code)) : DType::undefined;
  switch (d) {
    case DType::f32: case DType::f64: case DType::f16: case DType::i8: case DType::u8: case DType::i16:
    case DType::u16: case DType::i32: case DType::u32: case DType::i64: case DType::u64:
      return d;
    default:
      throw Unsupported(node.describe() + ": output_datatype " + std::to_string(code) + " is not supported");
  }
}

// Stores doubles into a tensor of any generated dtype, rounding like a cast.
void store_values(Tensor& y, const std::vector<double>& values) {
  if (y.dtype() == DType::f16) {
    uint16_t* p = reinterpret_cast<uint16_t*>(y.raw());
    for (size_t i = 0; i < values.size(); ++i) p[i] = f64_to_f16(values[i]);
    return;
  }
  visit_dtype(y.dtype(), [&](auto tag) {
    using T = decltype(tag);
    T* p = y.data<T>();
    for (size_t i = 0; i < values.size(); ++i) p[i] = static_cast<T>(values[i]);
  });
}

// One DFT of length n over `count` input samples (count <= n: the rest are zero padding),
// reading sample k at x[k*stride] (its imaginary part next to it for complex input) times
// weights[k] when given, and writing each bin f as a (real, imaginary) pair at y[f*out_stride].
// `inverse` flips the sign of the exponent and divides by n. The phase is kept as
// (f*k) mod n, an integer, so it never grows with f*k and the angle keeps full precision;
// no twiddle table, whose size would follow dft_length even for an empty batch.
template <class T>
void dft_1d(const T* x, int64_t stride, int64_t channels, const double* weights, int64_t count, int64_t n,
            int64_t bins, bool inverse, T* y, int64_t out_stride) {
  double sign = inverse ? 1.0 : -1.0, scale = inverse ? 1.0 / static_cast<double>(n) : 1.0;
  double radians_per_phase = 2 * std::numbers::pi / static_cast<double>(n);
  for (int64_t f = 0; f < bins; ++f) {
    double re = 0, im = 0;
    int64_t phase = 0;  // (f * k) mod n, advanced by f each step
    int64_t step = f % n;
    for (int64_t k = 0; k < count; ++k) {
      double w = weights ? weights[k] : 1.0;
      double a = static_cast<double>(x[k * stride]) * w;
      double b = channels == 2 ? static_cast<double>(x[k * stride + 1]) * w : 0.0;
      double angle = radians_per_phase * static_cast<double>(phase);
      double c = std::cos(angle), s = sign * std::sin(angle);
      re += a * c - b * s;
      im += a * s + b * c;
      phase += step;
      if (phase >= n) phase -= n;
    }
    y[f * out_stride] = static_cast<T>(re * scale);
    y[f * out_stride + 1] = static_cast<T>(im * scale);
  }
}

// ---- DFT ----

struct DftPlan {
  size_t axis = 0;
  int64_t length = 0;  // the DFT size (dft_length, or the input's length along the axis)
  int64_t bins = 0;    // output length along the axis
  bool inverse = false;
  Shape out_shape;
};

DftPlan dft_plan(const Node& node, std::span<const ValueInfo> in) {
  // Opset 20 made the axis an optional third input (default -2) instead of an attribute (default 1).
  bool axis_is_input = node.opset >= 20;
  require_inputs(node, in.size(), 1, axis_is_input ? 3 : 2);
  require_signal_dtype(node, in[0].dtype, "input");
  const Shape& s = in[0].shape;
  int64_t rank = static_cast<int64_t>(s.size());
  if (rank < 2) throw Error(node.describe() + ": input must have rank 2 or more, got " + shape_str(s));
  if (s.back() != 1 && s.back() != 2)
    throw Error(node.describe() + ": the last dim must be 1 (real) or 2 (complex), got " + shape_str(s));
  int64_t axis = axis_is_input ? -2 : node.attr_int("axis", 1);
  if (axis_is_input && has_input(in, 2)) axis = constant_scalar_int(node, in, 2, "axis");
  // The axis counts over the input's dims, the trailing complex dim included, which it may not name.
  DftPlan p;
  p.axis = static_cast<size_t>(normalize_axis(node, axis, rank));
  if (static_cast<int64_t>(p.axis) == rank - 1)
    throw Error(node.describe() + ": axis " + std::to_string(axis) + " names the complex dim, not a signal dim");
  p.length = s[p.axis];
  if (has_input(in, 1)) {
    p.length = constant_scalar_int(node, in, 1, "dft_length");
    if (p.length < 1) throw Error(node.describe() + ": dft_length must be positive, got " + std::to_string(p.length));
  }
  if (p.length < 1) throw Error(node.describe() + ": the signal along axis " + std::to_string(p.axis) + " is empty");
  p.inverse = node.attr_int("inverse", 0) != 0;
  p.bins = node.attr_int("onesided", 0) != 0 ? p.length / 2 + 1 : p.length;
  p.out_shape = s;
  p.out_shape[p.axis] = p.bins;
  p.out_shape.back() = 2;
  checked_numel(node, p.out_shape);
  return p;
}

void dft_infer(const Node& node, std::span<const ValueInfo> in, std::span<ValueInfo> out) {
  DftPlan p = dft_plan(node, in);
  out[0] = ValueInfo{in[0].dtype, p.out_shape};
}

void dft_reference(const Node& node, std::span<const Tensor* const> in, std::span<Tensor* const> out) {
  std::vector<ValueInfo> infos = infos_of(in);
  DftPlan p = dft_plan(node, infos);
  const Shape& s = in[0]->shape();
  int64_t channels = s.back(), n_in = s[p.axis];
  int64_t outer = 1, inner = 1;
  for (size_t d = 0; d < p.axis; ++d) outer *= s[d];
  for (size_t d = p.axis + 1; d + 1 < s.size(); ++d) inner *= s[d];
  int64_t count = std::min(n_in, p.length);  // a longer input is truncated, a shorter one zero padded
  visit_dtype(in[0]->dtype(), [&](auto tag) {
    using T = decltype(tag);
    if constexpr (std::is_floating_point_v<T>) {
      const T* x = in[0]->data<T>();
      T* y = out[0]->data<T>();
      for (int64_t o = 0; o < outer; ++o)
        for (int64_t i = 0; i < inner; ++i)
          dft_1d(x + (o * n_in * inner + i) * channels, inner * channels, channels, nullptr, count, p.length, p.bins,
                 p.inverse, y + (o * p.bins * inner + i) * 2, inner * 2);
    }
  });
}

// ---- STFT: DFTs of frames of frame_length samples taken every frame_step samples ----

struct StftPlan {
  int64_t step = 0, length = 0, frames = 0, bins = 0;
  Shape out_shape;
};

StftPlan stft_plan(const Node& node, std::span<const ValueInfo> in) {
  require_inputs(node, in.size(), 2, 4);
  require_signal_dtype(node, in[0].dtype, "signal");
  const Shape& s = in[0].shape;
  if (s.size() != 3 || (s[2] != 1 && s[2] != 2))
    throw Error(node.describe() + ": signal must be [batch, length, 1 or 2], got " + shape_str(s));
  StftPlan p;
  p.step = constant_scalar_int(node, in, 1, "frame_step");
  if (p.step < 1) throw Error(node.describe() + ": frame_step must be positive, got " + std::to_string(p.step));
  bool has_window = has_input(in, 2), has_length = has_input(in, 3);
  if (has_window) {
    if (in[2].dtype != in[0].dtype) throw Error(node.describe() + ": window must have the signal's dtype");
    if (in[2].shape.size() != 1) throw Error(node.describe() + ": window must be 1-D, got " + shape_str(in[2].shape));
  }
  p.length = has_length ? constant_scalar_int(node, in, 3, "frame_length") : has_window ? in[2].shape[0] : s[1];
  if (has_window && has_length && in[2].shape[0] != p.length)
    throw Error(node.describe() + ": window length " + std::to_string(in[2].shape[0]) + " differs from frame_length " +
                std::to_string(p.length));
  if (p.length < 1 || p.length > s[1])
    throw Error(node.describe() + ": frame_length " + std::to_string(p.length) + " must be in [1, signal length " +
                std::to_string(s[1]) + "]");
  p.frames = (s[1] - p.length) / p.step + 1;
  p.bins = node.attr_int("onesided", 1) != 0 ? p.length / 2 + 1 : p.length;
  p.out_shape = {s[0], p.frames, p.bins, 2};
  checked_numel(node, p.out_shape);
  return p;
}

void stft_infer(const Node& node, std::span<const ValueInfo> in, std::span<ValueInfo> out) {
  StftPlan p = stft_plan(node, in);
  out[0] = ValueInfo{in[0].dtype, p.out_shape};
}

void stft_reference(const Node& node, std::span<const Tensor* const> in, std::span<Tensor* const> out) {
  std::vector<ValueInfo> infos = infos_of(in);
  StftPlan p = stft_plan(node, infos);
  const Shape& s = in[0]->shape();
  int64_t batch = s[0], n = s[1], channels = s[2];
  std::vector<double> window;
  if (const Tensor* w = optional_input(in, 2)) window = w->to_f64();
  visit_dtype(in[0]->dtype(), [&](auto tag) {
    using T = decltype(tag);
    if constexpr (std::is_floating_point_v<T>) {
      const T* x = in[0]->data<T>();
      T* y = out[0]->data<T>();
      for (int64_t b = 0; b < batch; ++b)
        for (int64_t t = 0; t < p.frames; ++t)
          dft_1d(x + (b * n + t * p.step) * channels, channels, channels, window.empty() ? nullptr : window.data(),
                 p.length, p.length, p.bins, false, y + (b * p.frames + t) * p.bins * 2, 2);
    }
  });
}

// ---- HannWindow, HammingWindow, BlackmanWindow: generalized cosine windows ----

// w[n] = a0 - a1 cos(2 pi n / N) + a2 cos(4 pi n / N), where N is the size for a periodic
// window (the default) and one less for a symmetric one.
struct CosineWindow {
  double a0, a1, a2;
};

int64_t window_size(const Node& node, std::span<const ValueInfo> in) {
  require_inputs(node, in.size(), 1, 1);
  int64_t size = constant_scalar_int(node, in, 0, "size");
  if (size < 0) throw Error(node.describe() + ": size must not be negative, got " + std::to_string(size));
  checked_numel(node, {size});
  return size;
}

void window_infer(const Node& node, std::span<const ValueInfo> in, std::span<ValueInfo> out) {
  int64_t size = window_size(node, in);
  out[0] = ValueInfo{generated_dtype(node), {size}};
}

template <CosineWindow W>
void window_reference(const Node& node, std::span<const Tensor* const> in, std::span<Tensor* const> out) {
  std::vector<ValueInfo> infos = infos_of(in);
  int64_t size = window_size(node, infos);
  int64_t denom = node.attr_int("periodic", 1) != 0 ? size : size - 1;
  std::vector<double> w(static_cast<size_t>(size), 1.0);  // a symmetric window of one sample is just 1
  if (denom > 0)
    for (int64_t i = 0; i < size; ++i) {
      double x = 2 * std::numbers::pi * static_cast<double>(i) / static_cast<double>(denom);
      w[static_cast<size_t>(i)] = W.a0 - W.a1 * std::cos(x) + W.a2 * std::cos(2 * x);
    }
  store_values(*out[0], w);
}

// ---- MelWeightMatrix: triangular filters mapping DFT bins to mel bands ----

struct MelShape {
  int64_t mel_bins = 0, dft_length = 0;
};

MelShape mel_shape(const Node& node, std::span<const ValueInfo> in) {
  require_inputs(node, in.size(), 5, 5);
  MelShape m;
  m.mel_bins = constant_scalar_int(node, in, 0, "num_mel_bins");
  m.dft_length = constant_scalar_int(node, in, 1, "dft_length");
  if (m.mel_bins < 1) throw Error(node.describe() + ": num_mel_bins must be positive, got " + std::to_string(m.mel_bins));
  if (m.dft_length < 1) throw Error(node.describe() + ": dft_length must be positive, got " + std::to_string(m.dft_length));
  checked_numel(node, {m.dft_length / 2 + 1, m.mel_bins});
  return m;
}

void mel_infer(const Node& node, std::span<const ValueInfo> in, std::span<ValueInfo> out) {
  MelShape m = mel_shape(node, in);
  out[0] = ValueInfo{generated_dtype(node), {m.dft_length / 2 + 1, m.mel_bins}};
}

void mel_reference(const Node& node, std::span<const Tensor* const> in, std::span<Tensor* const> out) {
  std::vector<ValueInfo> infos = infos_of(in);
  MelShape m = mel_shape(node, infos);
  double sample_rate = scalar_value(node, *in[2], "sample_rate");
  double lower = scalar_value(node, *in[3], "lower_edge_hertz"), upper = scalar_value(node, *in[4], "upper_edge_hertz");
  if (!(sample_rate > 0)) throw Error(node.describe() + ": sample_rate must be positive");
  // Band edges are evenly spaced on the HTK mel scale, then floored to a DFT bin. As ONNX
  // specifies, the mel range is divided by the edge count, one more step than there are gaps.
  auto to_mel = [](double hz) { return 2595 * std::log10(1 + hz / 700); };
  double low_mel = to_mel(lower), mel_step = (to_mel(upper) - low_mel) / static_cast<double>(m.mel_bins + 2);
  std::vector<int64_t> edge(static_cast<size_t>(m.mel_bins + 2));
  for (size_t i = 0; i < edge.size(); ++i) {
    double hz = 700 * (std::pow(10.0, (static_cast<double>(i) * mel_step + low_mel) / 2595) - 1);
    double bin = std::floor(static_cast<double>(m.dft_length + 1) * hz / sample_rate);
    // Bounded well inside int64 so differences of edges cannot overflow either.
    if (!(std::fabs(bin) < 0x1p52))
      throw Error(node.describe() + ": the band edges from lower_edge_hertz and upper_edge_hertz are out of range");
    edge[i] = static_cast<int64_t>(bin);
  }
  int64_t rows = m.dft_length / 2 + 1, cols = m.mel_bins;
  std::vector<double> w(static_cast<size_t>(rows * cols), 0.0);
  // Edges past the spectrogram (an upper edge above Nyquist) write nothing there.
  auto set = [&](int64_t row, int64_t col, double v) {
    if (row >= 0 && row < rows) w[static_cast<size_t>(row * cols + col)] = v;
  };
  for (int64_t i = 0; i < cols; ++i) {
    int64_t lo = edge[static_cast<size_t>(i)], center = edge[static_cast<size_t>(i + 1)], hi = edge[static_cast<size_t>(i + 2)];
    if (center == lo) {
      set(center, i, 1.0);
    } else {
      for (int64_t j = std::max(lo, int64_t{0}); j <= std::min(center, rows - 1); ++j)
        set(j, i, static_cast<double>(j - lo) / static_cast<double>(center - lo));
    }
    if (hi > center)
      for (int64_t j = std::max(center, int64_t{0}); j < std::min(hi, rows); ++j)
        set(j, i, static_cast<double>(hi - j) / static_cast<double>(hi - center));
  }
  store_values(*out[0], w);
}

}  // namespace

void register_signal_ops(OpRegistry& r) {
  r.add("DFT", {dft_infer, dft_reference});
  r.add("STFT", {stft_infer, stft_reference});
  r.add("HannWindow", {window_infer, window_reference<CosineWindow{0.5, 0.5, 0.0}>});
  r.add("HammingWindow", {window_infer, window_reference<CosineWindow{25.0 / 46.0, 21.0 / 46.0, 0.0}>});
  r.add("BlackmanWindow", {window_infer, window_reference<CosineWindow{0.42, 0.5, 0.08}>});
  r.add("MelWeightMatrix", {mel_infer, mel_reference});
}

}  // namespace grove
