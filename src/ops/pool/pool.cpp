// MaxPool, AveragePool, LpPool, their Global* forms and MaxUnpool, NCHW with any number of spatial
// dims. Every (image, channel) plane is pooled on its own; the window geometry is shared
// with Conv (conv_geometry.h).
#include <cmath>
#include <limits>
#include <string>
#include <type_traits>
#include <vector>

#include "ops/conv/conv_geometry.h"
#include "ops/op.h"
#include "ops/op_util.h"

namespace grove {
namespace {

enum class PoolKind { max, average, lp };

struct PoolShapes {
  WindowGeometry geometry;
  int64_t planes = 0;  // N * C
  Shape output;
};

void require_rank(const Node& node, const Shape& x) {
  if (x.size() < 3) throw Error(node.describe() + ": X must be N x C x D1 ..., got " + shape_str(x));
}

// MaxPool also takes 8-bit integers (opset 12); averages and norms are float only.
void require_dtype(const Node& node, DType dtype, PoolKind kind) {
  bool ok = dtype == DType::f32 || dtype == DType::f64 ||
            (kind == PoolKind::max && (dtype == DType::i8 || dtype == DType::u8));
  if (!ok) throw Unsupported(node.describe() + ": dtype " + std::string(dtype_name(dtype)) + " is not supported");
}

PoolShapes pool_shapes(const Node& node, const Shape& x) {
  require_rank(node, x);
  std::vector<int64_t> kernel = node.attr_ints("kernel_shape");
  if (kernel.empty()) throw Error(node.describe() + ": missing attribute kernel_shape");
  bool ceil_mode = node.attr_int("ceil_mode", 0) != 0;
  PoolShapes s;
  s.geometry = window_geometry(node, std::span<const int64_t>(x.data() + 2, x.size() - 2), std::move(kernel), ceil_mode);
  s.planes = x[0] * x[1];
  s.output = {x[0], x[1]};
  s.output.insert(s.output.end(), s.geometry.output.begin(), s.geometry.output.end());
  return s;
}

// LpPool's p: an int since opset 2, a float in opset 1.
double lp_norm_order(const Node& node) {
  auto it = node.attrs.find("p");
  double p = 2.0;
  if (it != node.attrs.end()) p = it->second.kind == Attribute::Kind::f ? it->second.f : static_cast<double>(node.attr_int("p", 2));
  if (!(p > 0)) throw Error(node.describe() + ": p must be positive, got " + std::to_string(p));
  return p;
}

template <PoolKind Kind>
void infer_pool(const Node& node, std::span<const ValueInfo> in, std::span<ValueInfo> out) {
  require_inputs(node, in.size(), 1, 1);
  require_dtype(node, in[0].dtype, Kind);
  PoolShapes s = pool_shapes(node, in[0].shape);
  out[0] = ValueInfo{in[0].dtype, s.output, nullptr, true};
  if (out.size() > 1 && !node.outputs[1].empty()) {
    if (Kind != PoolKind::max) throw Error(node.describe() + ": has only one output");
    out[1] = ValueInfo{DType::i64, s.output, nullptr, true};
  }
  if (Kind == PoolKind::max) {
    int64_t order = node.attr_int("storage_order", 0);
    if (order != 0 && order != 1) throw Error(node.describe() + ": storage_order must be 0 or 1, got " + std::to_string(order));
  }
  if (Kind == PoolKind::lp) lp_norm_order(node);
}

// How many taps of the window at `pos` lie inside the padded extent [-pad_begin, in + pad_end):
// AveragePool's divisor with count_include_pad. Taps beyond it (ceil_mode) never count.
int64_t padded_window_size(const WindowGeometry& g, std::span<const int64_t> pos) {
  int64_t count = 1;
  for (size_t d = 0; d < g.rank(); ++d) {
    int64_t inside = 0;
    for (int64_t k = 0; k < g.kernel[d]; ++k) {
      int64_t c = pos[d] * g.strides[d] - g.pads_begin[d] + k * g.dilations[d];
      if (c >= -g.pads_begin[d] && c < g.input[d] + g.pads_end[d]) ++inside;
    }
    count *= inside;
  }
  return count;
}

// MaxPool's Indices flatten N x C x spatial; storage_order 1 orders the spatial dims column-major.
int64_t spatial_index(const WindowGeometry& g, int64_t row_major_offset, bool column_major) {
  if (!column_major) return row_major_offset;
  std::vector<int64_t> coord(g.rank());
  for (size_t d = g.rank(); d-- > 0;) {
    coord[d] = row_major_offset % g.input[d];
    row_major_offset /= g.input[d];
  }
  int64_t index = 0;
  for (size_t d = g.rank(); d-- > 0;) index = index * g.input[d] + coord[d];
  return index;
}

template <PoolKind Kind, class T>
void pool_direct(const Node& node, const PoolShapes& s, const T* x, T* y, int64_t* indices) {
  const WindowGeometry& g = s.geometry;
  int64_t in_plane = numel(g.input), out_plane = numel(g.output);
  bool include_pad = node.attr_int("count_include_pad", 0) != 0;
  bool column_major = node.attr_int("storage_order", 0) == 1;
  double p = Kind == PoolKind::lp ? lp_norm_order(node) : 2.0;
  std::vector<int64_t> pos(g.rank(), 0);
  std::vector<Tap> taps;
  for (int64_t q = 0; q < out_plane; ++q, next_index(pos, g.output)) {
    window_taps(g, pos, g.input, taps);
    int64_t divisor = include_pad ? padded_window_size(g, pos) : static_cast<int64_t>(taps.size());
    for (int64_t plane = 0; plane < s.planes; ++plane) {
      const T* xp = x + plane * in_plane;
      T* out = y + plane * out_plane + q;
      if constexpr (Kind == PoolKind::max) {
        // A window entirely in padding has no maximum; lowest() is what the runtimes give.
        T best = std::numeric_limits<T>::lowest();
        int64_t best_offset = taps.empty() ? 0 : taps[0].offset;
        // NaN propagates (the first NaN of the window wins, and nothing replaces it), as the
        // tile kernels do (docs/correctness.md).
        for (const Tap& t : taps) {
          const T v = xp[t.offset];
          if ((v > best || v != v) && best == best) best = v, best_offset = t.offset;
        }
        *out = best;
        if (indices) indices[plane * out_plane + q] = plane * in_plane + spatial_index(g, best_offset, column_major);
      } else if constexpr (Kind == PoolKind::average) {
        double sum = 0;
        for (const Tap& t : taps) sum += static_cast<double>(xp[t.offset]);
        *out = static_cast<T>(divisor > 0 ? sum / static_cast<double>(divisor) : 0.0);
      } else {
        double sum = 0;
        for (const Tap& t : taps) sum += std::pow(std::abs(static_cast<double>(xp[t.offset])), p);
        *out = static_cast<T>(std::pow(sum, 1.0 / p));
      }
    }
  }
}

template <PoolKind Kind>
void reference_pool(const Node& node, std::span<const Tensor* const> in, std::span<Tensor* const> out) {
  const Tensor& x = *in[0];
  require_dtype(node, x.dtype(), Kind);
  PoolShapes s = pool_shapes(node, x.shape());
  int64_t* indices = out.size() > 1 && out[1] ? out[1]->data<int64_t>() : nullptr;
  visit_dtype(x.dtype(), [&](auto zero) {
    using T = decltype(zero);
    if constexpr (std::is_same_v<T, float> || std::is_same_v<T, double> ||
                  (Kind == PoolKind::max && (std::is_same_v<T, int8_t> || std::is_same_v<T, uint8_t>)))
      pool_direct<Kind, T>(node, s, x.data<T>(), out[0]->data<T>(), indices);
  });
}

template <PoolKind Kind>
void infer_global_pool(const Node& node, std::span<const ValueInfo> in, std::span<ValueInfo> out) {
  require_inputs(node, in.size(), 1, 1);
  require_dtype(node, in[0].dtype, Kind == PoolKind::max ? PoolKind::average : Kind);
  require_rank(node, in[0].shape);
  Shape shape(in[0].shape.size(), 1);
  shape[0] = in[0].shape[0];
  shape[1] = in[0].shape[1];
  out[0] = ValueInfo{in[0].dtype, shape, nullptr, true};
  if (Kind == PoolKind::lp) lp_norm_order(node);
}

// One window covering the whole plane. An empty plane gives lowest() / 0.
template <PoolKind Kind>
void reference_global_pool(const Node& node, std::span<const Tensor* const> in, std::span<Tensor* const> out) {
  const Tensor& x = *in[0];
  require_dtype(node, x.dtype(), Kind == PoolKind::max ? PoolKind::average : Kind);
  require_rank(node, x.shape());
  int64_t planes = x.dim(0) * x.dim(1), plane_size = planes > 0 ? x.numel() / planes : 0;
  double p = Kind == PoolKind::lp ? lp_norm_order(node) : 2.0;
  visit_dtype(x.dtype(), [&](auto zero) {
    using T = decltype(zero);
    if constexpr (std::is_same_v<T, float> || std::is_same_v<T, double>) {
      const T* xs = x.data<T>();
      T* ys = out[0]->data<T>();
      for (int64_t plane = 0; plane < planes; ++plane) {
        const T* xp = xs + plane * plane_size;
        if constexpr (Kind == PoolKind::max) {
          T best = std::numeric_limits<T>::lowest();
          for (int64_t i = 0; i < plane_size; ++i) best = xp[i] > best || xp[i] != xp[i] ? xp[i] : best;  // NaN propagates
          ys[plane] = best;
        } else if constexpr (Kind == PoolKind::average) {
          double sum = 0;
          for (int64_t i = 0; i < plane_size; ++i) sum += static_cast<double>(xp[i]);
          ys[plane] = static_cast<T>(plane_size > 0 ? sum / static_cast<double>(plane_size) : 0.0);
        } else {
          double sum = 0;
          for (int64_t i = 0; i < plane_size; ++i) sum += std::pow(std::abs(static_cast<double>(xp[i])), p);
          ys[plane] = static_cast<T>(std::pow(sum, 1.0 / p));
        }
      }
    }
  });
}

// MaxUnpool scatters X back to where MaxPool found it: Indices are flat over N x C x spatial,
// and the size inverts MaxPool's: (in - 1) * stride + kernel - pads.
Shape unpool_shape(const Node& node, std::span<const ValueInfo> in) {
  const Shape& x = in[0].shape;
  require_rank(node, x);
  if (in[1].shape != x) throw Error(node.describe() + ": indices " + shape_str(in[1].shape) + " must have X's shape " + shape_str(x));
  std::vector<int64_t> kernel = node.attr_ints("kernel_shape");
  if (kernel.empty()) throw Error(node.describe() + ": missing attribute kernel_shape");
  WindowGeometry g = transposed_geometry(node, std::span<const int64_t>(x.data() + 2, x.size() - 2), std::move(kernel));
  Shape shape = {x[0], x[1]};
  shape.insert(shape.end(), g.output.begin(), g.output.end());
  // A larger output_shape is ambiguous: PyTorch and ONNX Runtime index into it, while ONNX's
  // own test data indexes into the inferred shape and pads. Claim only the case they agree on.
  if (has_input(in, 2) && constant_input(node, in, 2, "output_shape").to_i64() != shape)
    throw Unsupported(node.describe() + ": output_shape " + shape_str(in[2].data->to_i64()) +
                      " differs from the unpooled shape " + shape_str(shape) + "; runtimes disagree on its meaning");
  return shape;
}

void infer_max_unpool(const Node& node, std::span<const ValueInfo> in, std::span<ValueInfo> out) {
  require_inputs(node, in.size(), 2, 3);
  require_dtype(node, in[0].dtype, PoolKind::average);
  if (in[1].dtype != DType::i64) throw Error(node.describe() + ": indices must be int64");
  out[0] = ValueInfo{in[0].dtype, unpool_shape(node, in), nullptr, true};
}

void reference_max_unpool(const Node& node, std::span<const Tensor* const> in, std::span<Tensor* const> out) {
  Tensor& y = *out[0];
  std::span<const int64_t> indices = in[1]->span<int64_t>();
  visit_dtype(y.dtype(), [&](auto zero) {
    using T = decltype(zero);
    if constexpr (std::is_same_v<T, float> || std::is_same_v<T, double>) {
      const T* x = in[0]->data<T>();
      T* ys = y.data<T>();
      for (size_t j = 0; j < indices.size(); ++j) {
        if (indices[j] < 0 || indices[j] >= y.numel())
          throw Error(node.describe() + ": index " + std::to_string(indices[j]) + " is outside the output " + shape_str(y.shape()));
        ys[indices[j]] = x[j];
      }
    }
  });
}

}  // namespace

void register_pool_ops(OpRegistry& registry) {
  // One operation per output element and window tap.
  constexpr FlopsFn per_tap = [](const Node& node, std::span<const ValueInfo> in, std::span<const ValueInfo> out) {
    const Shape* y = known_shape(out, 0);
    return y ? checked_mul(numel(*y), window_size(node, "kernel_shape")) : int64_t{0};
  };
  registry.add("MaxPool", {.infer = infer_pool<PoolKind::max>, .reference = reference_pool<PoolKind::max>, .flops = per_tap, .traits = kPerChannel});
  registry.add("AveragePool",
               {.infer = infer_pool<PoolKind::average>, .reference = reference_pool<PoolKind::average>, .flops = per_tap, .traits = kPerChannel});
  registry.add("LpPool", {.infer = infer_pool<PoolKind::lp>, .reference = reference_pool<PoolKind::lp>, .flops = per_tap, .traits = kPerChannel});
  registry.add("GlobalMaxPool", {.infer = infer_global_pool<PoolKind::max>,
                                 .reference = reference_global_pool<PoolKind::max>,
                                 .cost = OpCost::per_input_element, .traits = kPerChannel});
  registry.add("GlobalAveragePool", {.infer = infer_global_pool<PoolKind::average>,
                                     .reference = reference_global_pool<PoolKind::average>,
                                     .cost = OpCost::per_input_element, .traits = kPerChannel});
  registry.add("MaxUnpool", {infer_max_unpool, reference_max_unpool});
  registry.add("GlobalLpPool", {.infer = infer_global_pool<PoolKind::lp>,
                                .reference = reference_global_pool<PoolKind::lp>,
                                .cost = OpCost::per_input_element});
}

}  // namespace grove
