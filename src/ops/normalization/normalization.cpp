// Normalizations (BatchNormalization, InstanceNormalization, LayerNormalization, LRN) and
// the softmax family (Softmax, LogSoftmax, Hardmax). Statistics are computed in double so
// the references stay an oracle for single-pass float kernels.
#include <algorithm>
#include <cmath>
#include <limits>
#include <type_traits>
#include <vector>

#include "ops/op.h"
#include "ops/op_util.h"

namespace grove {
namespace {

void require_float(DType dtype) {
  if (dtype != DType::f32 && dtype != DType::f64)
    throw Unsupported("dtype " + std::string(dtype_name(dtype)) + " is not supported (float32 and float64 only)");
}

// Calls f(T{}) for the float dtypes the references compute in.
template <class F>
void visit_float(DType dtype, F&& f) {
  if (dtype == DType::f32) f(float{});
  else if (dtype == DType::f64) f(double{});
  else require_float(dtype);
}

// An output that the node names must not be asked of an op that does not produce it.
void require_unnamed_outputs(const Node& node, size_t from, const char* why) {
  for (size_t i = from; i < node.outputs.size(); ++i)
    if (!node.outputs[i].empty()) throw Unsupported(std::string("output ") + std::to_string(i) + " (" + why + ") is not supported");
}

// ---- BatchNormalization -----------------------------------------------------------------
// Inference normalises with the given statistics. training_mode=1 (opsets 14 and 15)
// normalises with the batch's own statistics (mean and population variance per channel
// over N and the spatial dims) and can output the running statistics, the inputs moved
// towards the batch's by `momentum`. Old opsets, which mark training by naming the
// saved-statistics outputs, stay unsupported.

bool training_mode(const Node& node) { return node.attr_int("training_mode", 0) != 0; }

void infer_batchnorm(const Node& node, std::span<const ValueInfo> in, std::span<ValueInfo> out) {
  require_inputs(node, in.size(), 5, 5);
  require_float(in[0].dtype);
  const bool training = training_mode(node);
  if (training) {
    node.attr_float("momentum", 0.9f);  // an Error now if present with the wrong kind
    // Y, running_mean, running_var; the latter two optional.
    if (node.outputs.size() > 3) throw Error("training mode has at most 3 outputs (Y, running_mean, running_var)");
  } else {
    require_unnamed_outputs(node, 1, "training statistics");
  }
  const Shape& x = in[0].shape;
  if (x.size() < 2) throw Error("BatchNormalization input must have rank >= 2, got " + shape_str(x));
  // spatial=0 (opset 7/8) gives per-element statistics of shape x[1:]; otherwise one per channel.
  // Training mode exists only from opset 14, which has per-channel statistics only.
  const int64_t per_channel = x[1], per_element = dims_product(x, 1, x.size());
  for (size_t i = 1; i < 5; ++i) {
    if (in[i].dtype != in[0].dtype && node.opset > 0 && node.opset < 15)
      throw Error("input " + std::to_string(i) + " dtype differs from X");
    require_float(in[i].dtype);
    int64_t count = numel(in[i].shape);
    if (count != per_channel && (training || count != per_element))
      throw Error("input " + std::to_string(i) + " has shape " + shape_str(in[i].shape) + ", expected [" +
                  std::to_string(per_channel) + "] for input " + shape_str(x));
  }
  out[0] = ValueInfo{in[0].dtype, x};
  // The running statistics keep the dtypes of the statistics they update.
  for (size_t i = 1; training && i < out.size(); ++i)
    if (!node.outputs[i].empty()) out[i] = ValueInfo{in[i + 2].dtype, Shape{per_channel}};
}

double read_f64(const Tensor& t, int64_t i) {
  return t.dtype() == DType::f32 ? t.data<float>()[i] : t.data<double>()[i];
}

void write_f64(Tensor& t, int64_t i, double v) {
  if (t.dtype() == DType::f32) t.data<float>()[i] = static_cast<float>(v);
  else t.data<double>()[i] = v;
}

// Per channel: the batch mean and population variance over N and the spatial dims.
void batch_statistics(const Tensor& x, std::vector<double>& mean, std::vector<double>& var) {
  const int64_t n = x.dim(0), channels = x.dim(1), inner = dims_product(x.shape(), 2, x.shape().size());
  mean.assign(static_cast<size_t>(channels), 0.0);
  var.assign(static_cast<size_t>(channels), 0.0);
  // An empty batch has no statistics: NaN, as the mean of nothing is.
  const double count = static_cast<double>(n * inner);
  for (int64_t c = 0; c < channels; ++c) {
    const auto ci = static_cast<size_t>(c);
    for (int64_t b = 0; b < n; ++b)
      for (int64_t s = 0; s < inner; ++s) mean[ci] += read_f64(x, (b * channels + c) * inner + s);
    mean[ci] = count > 0 ? mean[ci] / count : std::numeric_limits<double>::quiet_NaN();
    for (int64_t b = 0; b < n; ++b)
      for (int64_t s = 0; s < inner; ++s) {
        const double d = read_f64(x, (b * channels + c) * inner + s) - mean[ci];
        var[ci] += d * d;
      }
    var[ci] = count > 0 ? var[ci] / count : std::numeric_limits<double>::quiet_NaN();
  }
}

void reference_batchnorm(const Node& node, std::span<const Tensor* const> in, std::span<Tensor* const> out) {
  const Tensor& x = *in[0];
  const double epsilon = node.attr_float("epsilon", 1e-5f);
  const int64_t n = x.dim(0), channels = x.dim(1), inner = dims_product(x.shape(), 2, x.shape().size());
  const bool training = training_mode(node);
  std::vector<double> batch_mean, batch_var;
  if (training) {
    batch_statistics(x, batch_mean, batch_var);
    const double momentum = node.attr_float("momentum", 0.9f);
    for (size_t i = 1; i < 3 && i < out.size(); ++i) {
      if (!out[i]) continue;  // unnamed
      const std::vector<double>& current = i == 1 ? batch_mean : batch_var;
      for (int64_t c = 0; c < channels; ++c)
        write_f64(*out[i], c, read_f64(*in[i + 2], c) * momentum + current[static_cast<size_t>(c)] * (1 - momentum));
    }
  }
  visit_float(x.dtype(), [&](auto tag) {
    using T = decltype(tag);
    const T* src = x.data<T>();
    T* dst = out[0]->data<T>();
    for (int64_t b = 0; b < n; ++b)
      for (int64_t c = 0; c < channels; ++c)
        for (int64_t s = 0; s < inner; ++s) {
          // With per-element statistics the parameter index runs over channel and position.
          auto param = [&](size_t i) {
            return read_f64(*in[i], in[i]->numel() == channels ? c : c * inner + s);
          };
          const double mean = training ? batch_mean[static_cast<size_t>(c)] : param(3),
                       var = training ? batch_var[static_cast<size_t>(c)] : param(4);
          int64_t at = (b * channels + c) * inner + s;
          double normalized = (src[at] - mean) / std::sqrt(var + epsilon);
          dst[at] = static_cast<T>(normalized * param(1) + param(2));
        }
  });
}

// ---- InstanceNormalization ------------------------------------------------------------

void infer_instancenorm(const Node& node, std::span<const ValueInfo> in, std::span<ValueInfo> out) {
  require_inputs(node, in.size(), 3, 3);
  require_float(in[0].dtype);
  const Shape& x = in[0].shape;
  if (x.size() < 2) throw Error("InstanceNormalization input must have rank >= 2, got " + shape_str(x));
  for (size_t i = 1; i < 3; ++i) {
    if (in[i].dtype != in[0].dtype) throw Error("input " + std::to_string(i) + " dtype differs from X");
    if (in[i].shape != Shape{x[1]})
      throw Error("input " + std::to_string(i) + " has shape " + shape_str(in[i].shape) + ", expected [" + std::to_string(x[1]) + "]");
  }
  out[0] = ValueInfo{in[0].dtype, x};
}

void reference_instancenorm(const Node& node, std::span<const Tensor* const> in, std::span<Tensor* const> out) {
  const Tensor& x = *in[0];
  const double epsilon = node.attr_float("epsilon", 1e-5f);
  const int64_t channels = x.dim(1), planes = x.dim(0) * channels, inner = dims_product(x.shape(), 2, x.shape().size());
  visit_float(x.dtype(), [&](auto tag) {
    using T = decltype(tag);
    const T *src = x.data<T>(), *scale = in[1]->data<T>(), *bias = in[2]->data<T>();
    T* dst = out[0]->data<T>();
    for (int64_t p = 0; p < planes; ++p) {
      const T* plane = src + p * inner;
      double mean = 0, var = 0;
      for (int64_t s = 0; s < inner; ++s) mean += plane[s];
      mean /= static_cast<double>(inner);
      for (int64_t s = 0; s < inner; ++s) var += (plane[s] - mean) * (plane[s] - mean);
      var /= static_cast<double>(inner);
      const double inv_std = 1.0 / std::sqrt(var + epsilon);
      const int64_t c = p % channels;
      for (int64_t s = 0; s < inner; ++s)
        dst[p * inner + s] = static_cast<T>((plane[s] - mean) * inv_std * scale[c] + bias[c]);
    }
  });
}

// ---- LayerNormalization (opset 17) ----------------------------------------------------

struct LayerNormPlan {
  int64_t axis = 0;
  int64_t rows = 0, cols = 0;  // x viewed as [rows, cols], normalized along cols
};

LayerNormPlan plan_layernorm(const Node& node, const Shape& x) {
  LayerNormPlan plan;
  plan.axis = normalize_axis(node, node.attr_int("axis", -1), static_cast<int64_t>(x.size()));
  plan.rows = dims_product(x, 0, static_cast<size_t>(plan.axis));
  plan.cols = dims_product(x, static_cast<size_t>(plan.axis), x.size());
  return plan;
}

// Scale and B broadcast (unidirectionally) to X.
void check_broadcasts_to(const Shape& from, const Shape& to, const char* what) {
  bool fits = from.size() <= to.size();
  for (size_t i = 0; fits && i < from.size(); ++i) {
    int64_t want = to[to.size() - from.size() + i];
    fits = from[i] == want || from[i] == 1;
  }
  if (!fits) throw Error(std::string(what) + " of shape " + shape_str(from) + " does not broadcast to " + shape_str(to));
}

void infer_layernorm(const Node& node, std::span<const ValueInfo> in, std::span<ValueInfo> out) {
  require_inputs(node, in.size(), 2, 3);
  require_float(in[0].dtype);
  if (node.attr_int("stash_type", 1) != 1) throw Unsupported("stash_type other than 1 (float32) is not supported");
  const Shape& x = in[0].shape;
  LayerNormPlan plan = plan_layernorm(node, x);
  const char* names[] = {"X", "Scale", "B"};
  for (size_t i = 1; i < in.size(); ++i) {
    if (!in[i].present) continue;
    if (in[i].dtype != in[0].dtype) throw Error(std::string(names[i]) + " dtype differs from X");
    check_broadcasts_to(in[i].shape, x, names[i]);
  }
  out[0] = ValueInfo{in[0].dtype, x};
  // Mean and InvStdDev keep X's leading dims and collapse the normalized ones to 1.
  Shape stats_shape = x;
  for (size_t d = static_cast<size_t>(plan.axis); d < x.size(); ++d) stats_shape[d] = 1;
  for (size_t i = 1; i < out.size() && i < 3; ++i)
    if (!node.outputs[i].empty()) out[i] = ValueInfo{DType::f32, stats_shape};
}

void reference_layernorm(const Node& node, std::span<const Tensor* const> in, std::span<Tensor* const> out) {
  const Tensor& x = *in[0];
  const double epsilon = node.attr_float("epsilon", 1e-5f);
  LayerNormPlan plan = plan_layernorm(node, x.shape());
  const Tensor* scale = in[1];
  const Tensor* bias = optional_input(in, 2);
  // Element strides to read Scale/B while walking X (0 along broadcast dims).
  const std::vector<int64_t> x_strides = strides_of(x.shape());
  auto param_offsets = [&](const Tensor& t) {
    std::vector<int64_t> s = broadcast_strides(t.shape(), x.shape()), offsets(static_cast<size_t>(x.numel()));
    for (int64_t i = 0; i < x.numel(); ++i) {
      int64_t rest = i, off = 0;
      for (size_t d = 0; d < s.size(); ++d) {
        off += (rest / x_strides[d]) * s[d];
        rest %= x_strides[d];
      }
      offsets[static_cast<size_t>(i)] = off;
    }
    return offsets;
  };
  const std::vector<int64_t> scale_at = param_offsets(*scale);
  const std::vector<int64_t> bias_at = bias ? param_offsets(*bias) : std::vector<int64_t>{};
  Tensor* mean_out = out.size() > 1 ? out[1] : nullptr;
  Tensor* inv_std_out = out.size() > 2 ? out[2] : nullptr;
  visit_float(x.dtype(), [&](auto tag) {
    using T = decltype(tag);
    const T *src = x.data<T>(), *w = scale->data<T>(), *b = bias ? bias->data<T>() : nullptr;
    T* dst = out[0]->data<T>();
    for (int64_t r = 0; r < plan.rows; ++r) {
      const int64_t base = r * plan.cols;
      double mean = 0, var = 0;
      for (int64_t j = 0; j < plan.cols; ++j) mean += src[base + j];
      mean /= static_cast<double>(plan.cols);
      for (int64_t j = 0; j < plan.cols; ++j) var += (src[base + j] - mean) * (src[base + j] - mean);
      var /= static_cast<double>(plan.cols);
      const double inv_std = 1.0 / std::sqrt(var + epsilon);
      for (int64_t j = 0; j < plan.cols; ++j) {
        const auto at = static_cast<size_t>(base + j);
        double y = (src[at] - mean) * inv_std * w[scale_at[at]];
        if (b) y += b[bias_at[at]];
        dst[at] = static_cast<T>(y);
      }
      if (mean_out) mean_out->data<float>()[r] = static_cast<float>(mean);
      if (inv_std_out) inv_std_out->data<float>()[r] = static_cast<float>(inv_std);
    }
  });
}

// ---- LRN ------------------------------------------------------------------------------

void infer_lrn(const Node& node, std::span<const ValueInfo> in, std::span<ValueInfo> out) {
  require_inputs(node, in.size(), 1, 1);
  require_float(in[0].dtype);
  if (in[0].shape.size() < 3) throw Error("LRN input must have rank >= 3, got " + shape_str(in[0].shape));
  if (!node.has_attr("size") || node.attr_int("size", 0) < 1) throw Error("LRN needs a positive 'size' attribute");
  out[0] = ValueInfo{in[0].dtype, in[0].shape};
}

void reference_lrn(const Node& node, std::span<const Tensor* const> in, std::span<Tensor* const> out) {
  const Tensor& x = *in[0];
  const int64_t size = node.attr_int("size", 1);
  const double alpha = node.attr_float("alpha", 1e-4f), beta = node.attr_float("beta", 0.75f),
               bias = node.attr_float("bias", 1.0f);
  const int64_t channels = x.dim(1), inner = dims_product(x.shape(), 2, x.shape().size());
  // The window over channels is [c - floor((size-1)/2), c + ceil((size-1)/2)], clipped.
  const int64_t before = (size - 1) / 2, after = size - 1 - before;
  visit_float(x.dtype(), [&](auto tag) {
    using T = decltype(tag);
    const T* src = x.data<T>();
    T* dst = out[0]->data<T>();
    for (int64_t b = 0; b < x.dim(0); ++b)
      for (int64_t c = 0; c < channels; ++c)
        for (int64_t s = 0; s < inner; ++s) {
          double square_sum = 0;
          for (int64_t k = std::max<int64_t>(0, c - before); k <= std::min(channels - 1, c + after); ++k) {
            double v = src[(b * channels + k) * inner + s];
            square_sum += v * v;
          }
          const int64_t at = (b * channels + c) * inner + s;
          dst[at] = static_cast<T>(src[at] / std::pow(bias + alpha / static_cast<double>(size) * square_sum, beta));
        }
  });
}

// ---- Softmax, LogSoftmax, Hardmax -----------------------------------------------------

// x viewed as [outer, len, inner], the op working along len. Before opset 13 the input is
// coerced to 2-D at `axis` (default 1), so len spans every dim from axis on; from 13 the op
// runs along the single dim `axis` (default -1).
struct SoftmaxPlan {
  int64_t outer = 0, len = 0, inner = 0;
};

SoftmaxPlan plan_softmax(const Node& node, const Shape& x) {
  const bool coerce_2d = node.opset > 0 && node.opset < 13;
  const int64_t rank = static_cast<int64_t>(x.size());
  if (rank == 0) throw Error(node.op_type + " input must have rank >= 1");
  int64_t axis_attr = node.attr_int("axis", coerce_2d ? 1 : -1);
  // Coercion accepts axis == rank (everything in the outer dim).
  const auto axis = static_cast<size_t>(coerce_2d && axis_attr == rank ? rank : normalize_axis(node, axis_attr, rank));
  SoftmaxPlan plan;
  plan.outer = dims_product(x, 0, axis);
  if (coerce_2d) {
    plan.len = dims_product(x, axis, x.size());
    plan.inner = 1;
  } else {
    plan.len = x[axis];
    plan.inner = dims_product(x, axis + 1, x.size());
  }
  return plan;
}

void infer_softmax(const Node& node, std::span<const ValueInfo> in, std::span<ValueInfo> out) {
  require_inputs(node, in.size(), 1, 1);
  require_float(in[0].dtype);
  plan_softmax(node, in[0].shape);
  out[0] = ValueInfo{in[0].dtype, in[0].shape};
}

enum class SoftmaxKind { softmax, log_softmax, hardmax };

template <SoftmaxKind kind>
void reference_softmax(const Node& node, std::span<const Tensor* const> in, std::span<Tensor* const> out) {
  const Tensor& x = *in[0];
  SoftmaxPlan plan = plan_softmax(node, x.shape());
  visit_float(x.dtype(), [&](auto tag) {
    using T = decltype(tag);
    const T* src = x.data<T>();
    T* dst = out[0]->data<T>();
    for (int64_t o = 0; o < plan.outer; ++o)
      for (int64_t i = 0; i < plan.inner; ++i) {
        const int64_t base = o * plan.len * plan.inner + i;
        auto at = [&](int64_t j) { return base + j * plan.inner; };
        // The max shift keeps exp from overflowing; Hardmax marks its first occurrence.
        int64_t arg_max = 0;
        for (int64_t j = 1; j < plan.len; ++j)
          if (src[at(j)] > src[at(arg_max)]) arg_max = j;
        if constexpr (kind == SoftmaxKind::hardmax) {
          for (int64_t j = 0; j < plan.len; ++j) dst[at(j)] = j == arg_max ? T{1} : T{0};
        } else {
          const double peak = plan.len > 0 ? static_cast<double>(src[at(arg_max)]) : 0.0;
          double sum = 0;
          for (int64_t j = 0; j < plan.len; ++j) sum += std::exp(src[at(j)] - peak);
          for (int64_t j = 0; j < plan.len; ++j) {
            const double shifted = src[at(j)] - peak;
            dst[at(j)] = static_cast<T>(kind == SoftmaxKind::softmax ? std::exp(shifted) / sum : shifted - std::log(sum));
          }
        }
      }
  });
}

}  // namespace

void register_normalization_ops(OpRegistry& registry) {
  registry.add("BatchNormalization", {infer_batchnorm, reference_batchnorm});
  registry.add("InstanceNormalization", {infer_instancenorm, reference_instancenorm});
  registry.add("LayerNormalization", {infer_layernorm, reference_layernorm});
  registry.add("LRN", {infer_lrn, reference_lrn});
  registry.add("Softmax", with_traits(OpSpec{infer_softmax, reference_softmax<SoftmaxKind::softmax>}, kPerChannel));
  registry.add("LogSoftmax", with_traits(OpSpec{infer_softmax, reference_softmax<SoftmaxKind::log_softmax>}, kPerChannel));
  registry.add("Hardmax", {infer_softmax, reference_softmax<SoftmaxKind::hardmax>});
}

}  // namespace grove
