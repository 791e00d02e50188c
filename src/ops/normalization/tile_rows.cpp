// Tile rules of the ops that normalise along some dims: Softmax, LogSoftmax, Hardmax and
// LayerNormalization (cut every dim except the normalised ones), InstanceNormalization (cut
// images and channels) and inference BatchNormalization (cut anywhere). float32; statistics
// and sums are kept in double like the references, so tiles match them closely.
#include <algorithm>
#include <cmath>

#include "kernels/vmath.h"
#include "ops/op_util.h"
#include "ops/normalization/rms_norm.h"
#include "ops/tile_util.h"

namespace grove::tiling {
namespace rows_rule {

bool all_f32(std::span<const ValueInfo> in) {
  for (const auto& v : in)
    if (v.present && v.dtype != DType::f32) return false;
  return !in.empty() && in[0].present;
}

// The dims an op normalises over, as [first, last) plus whether they are one strided axis.
struct RowDims {
  size_t first = 0, last = 0;  // normalised dims [first, last)
};

// Before opset 13 softmax coerces X to 2-D at `axis`: the row is every dim from axis on.
RowDims softmax_dims(const Node& node, const Shape& x) {
  const bool coerce_2d = node.opset > 0 && node.opset < 13;
  const auto rank = static_cast<int64_t>(x.size());
  if (rank == 0) throw Error(node.describe() + ": input must have rank >= 1");
  int64_t axis = node.attr_int("axis", coerce_2d ? 1 : -1);
  if (!(coerce_2d && axis == rank)) axis = normalize_axis(node, axis, rank);
  return coerce_2d ? RowDims{static_cast<size_t>(axis), x.size()}
                   : RowDims{static_cast<size_t>(axis), static_cast<size_t>(axis) + 1};
}

RowDims layernorm_dims(const Node& node, const Shape& x) {
  auto axis = static_cast<size_t>(normalize_axis(node, node.attr_int("axis", -1), static_cast<int64_t>(x.size())));
  return {axis, x.size()};
}

template <RowDims (*Dims)(const Node&, const Shape&)>
std::vector<int64_t> row_cuttable(const Node& node, std::span<const ValueInfo> in, std::span<const ValueInfo> out) {
  std::vector<int64_t> blocks = none_cuttable(out[0].shape);
  if (!all_f32(in)) return blocks;
  RowDims rd = Dims(node, in[0].shape);
  for (size_t d = 0; d < blocks.size(); ++d) blocks[d] = d >= rd.first && d < rd.last ? 0 : 1;
  return blocks;
}

Region widen_rows(const RowDims& rd, const Shape& x, Region r) {
  for (size_t d = rd.first; d < rd.last; ++d) r[d] = {0, x[d]};
  return r;
}

template <RowDims (*Dims)(const Node&, const Shape&)>
void row_needs(const Node& node, std::span<const ValueInfo> in, std::span<const ValueInfo>, const Region& out_region,
               std::span<Region> in_regions) {
  Region x = widen_rows(Dims(node, in[0].shape), in[0].shape, out_region);
  in_regions[0] = x;
  for (size_t i = 1; i < in.size(); ++i)  // LayerNorm's Scale and B broadcast to X
    in_regions[i] = in[i].present ? broadcast_region(in[i].shape, x) : Region{};
}

// Calls row(offset) with the element offset of the first element of each row in the
// region, where `r` spans the rows (normalised dims already collapsed to [0, 1)).
template <class F>
void for_each_row_start(const Shape& x, Region r, const RowDims& rd, F&& row) {
  for (size_t d = rd.first; d < rd.last; ++d) r[d] = {0, 1};
  Shape shape = x;
  shape.push_back(1);
  r.push_back({0, 1});
  std::vector<int64_t> strides = strides_of(x);
  for_each_row(shape, r, [&](int64_t, const std::vector<int64_t>& index) {
    int64_t offset = 0;
    for (size_t d = 0; d < x.size(); ++d) offset += index[d] * strides[d];
    row(offset, index);
  });
}

enum class SoftmaxKind { softmax, log_softmax, hardmax };

template <SoftmaxKind Kind>
void softmax_run(const Node& node, std::span<const Tensor* const> in, std::span<Tensor* const> out, const Region& r, const void*, TileScratch&) {
  std::vector<ValueInfo> infos = infos_of_tensors(in);
  if (!all_f32(infos)) return reference_whole(node, in, out, r);
  check_region(node, r, out[0]->shape());
  const Shape& shape = in[0]->shape();
  RowDims rd = softmax_dims(node, shape);
  int64_t len = 1;
  for (size_t d = rd.first; d < rd.last; ++d) len *= shape[d];
  const int64_t stride = rd.last == rd.first + 1 ? strides_of(shape)[rd.first] : 1;
  const float* x = in[0]->data<float>();
  float* y = out[0]->data<float>();
  for_each_row_start(shape, r, rd, [&](int64_t base, const std::vector<int64_t>&) {
    const float* xr = x + base;
    float* yr = y + base;
    int64_t arg_max = 0;
    for (int64_t j = 1; j < len; ++j)
      if (xr[j * stride] > xr[arg_max * stride]) arg_max = j;
    if constexpr (Kind == SoftmaxKind::softmax) {
      if (stride == 1) return kernels::vmath().softmax(static_cast<size_t>(len), xr, yr);
    }
    if constexpr (Kind == SoftmaxKind::hardmax) {
      for (int64_t j = 0; j < len; ++j) yr[j * stride] = j == arg_max ? 1.0f : 0.0f;
    } else {
      const float peak = len > 0 ? xr[arg_max * stride] : 0.0f;
      double sum = 0;
      for (int64_t j = 0; j < len; ++j) {
        const float e = std::exp(xr[j * stride] - peak);
        if constexpr (Kind == SoftmaxKind::softmax) yr[j * stride] = e;
        sum += e;
      }
      if constexpr (Kind == SoftmaxKind::softmax) {
        const auto inv = static_cast<float>(1.0 / sum);
        for (int64_t j = 0; j < len; ++j) yr[j * stride] *= inv;
      } else {
        const auto log_sum = static_cast<float>(std::log(sum));
        for (int64_t j = 0; j < len; ++j) yr[j * stride] = (xr[j * stride] - peak) - log_sum;
      }
    }
  });
}

void layernorm_run(const Node& node, std::span<const Tensor* const> in, std::span<Tensor* const> out, const Region& r, const void*, TileScratch&) {
  std::vector<ValueInfo> infos = infos_of_tensors(in);
  if (!all_f32(infos) || in.size() < 2 || !in[1]) return reference_whole(node, in, out, r);
  check_region(node, r, out[0]->shape());
  const Shape& shape = in[0]->shape();
  RowDims rd = layernorm_dims(node, shape);
  const double epsilon = node.attr_float("epsilon", 1e-5f);
  const Tensor* scale = in[1];
  const Tensor* bias = optional_input(in, 2);
  const std::vector<int64_t> x_strides = strides_of(shape);
  const float *x = in[0]->data<float>(), *w = scale->data<float>(), *b = bias ? bias->data<float>() : nullptr;
  float* y = out[0]->data<float>();
  const kernels::VMathKernels& k = kernels::vmath();
  // Scale and B shaped like one row (the normalised dims, leading 1s allowed), as every
  // transformer's are: the vector kernel straight away. Walking a row's offsets element by
  // element below cost 10-70 us per tile for GPT-2's 768-wide rows, ten times the norm.
  auto one_row = [&](const Tensor& t) {
    const std::vector<int64_t> strides = broadcast_strides(t.shape(), shape);
    for (size_t d = 0; d < shape.size(); ++d)
      if (shape[d] != 1 && strides[d] != (d < rd.first ? 0 : x_strides[d])) return false;
    return true;
  };
  if (rd.last == shape.size() && one_row(*scale) && (!bias || one_row(*bias))) {
    int64_t cols = 1;
    for (size_t d = rd.first; d < rd.last; ++d) cols *= shape[d];
    for_each_row_start(shape, r, rd, [&](int64_t base, const std::vector<int64_t>&) {
      k.layernorm(static_cast<size_t>(cols), x + base, w, b, static_cast<float>(epsilon), y + base);
    });
    return;
  }
  // Scale and B may broadcast along any dim: an offset per row start and per row element.
  auto row_offsets = [&](const Tensor& t) {
    std::vector<int64_t> s = broadcast_strides(t.shape(), shape);
    std::vector<int64_t> within;
    Region row = full_region(shape);
    for (size_t d = 0; d < rd.first; ++d) row[d] = {0, 1};
    Shape padded = shape;
    padded.push_back(1);
    row.push_back({0, 1});
    for_each_row(padded, row, [&](int64_t, const std::vector<int64_t>& index) {
      int64_t off = 0;
      for (size_t d = rd.first; d < shape.size(); ++d) off += index[d] * s[d];
      within.push_back(off);
    });
    return std::make_pair(s, within);
  };
  std::vector<int64_t> scale_strides, scale_within, bias_strides, bias_within;  // captured below: no bindings
  std::tie(scale_strides, scale_within) = row_offsets(*scale);
  if (bias) std::tie(bias_strides, bias_within) = row_offsets(*bias);
  const int64_t cols = static_cast<int64_t>(scale_within.size());
  // Scale and B laid out like one row in another shape: the vector kernel.
  auto row_contiguous = [](const std::vector<int64_t>& within) {
    for (size_t j = 0; j < within.size(); ++j)
      if (within[j] != static_cast<int64_t>(j)) return false;
    return true;
  };
  const bool vector_rows = row_contiguous(scale_within) && (!b || row_contiguous(bias_within));
  for_each_row_start(shape, r, rd, [&](int64_t base, const std::vector<int64_t>& index) {
    int64_t w_base = 0, b_base = 0;
    for (size_t d = 0; d < rd.first; ++d) {
      w_base += index[d] * scale_strides[d];
      if (b) b_base += index[d] * bias_strides[d];
    }
    const float* xr = x + base;
    if (vector_rows)
      return k.layernorm(static_cast<size_t>(cols), xr, w + w_base, b ? b + b_base : nullptr, static_cast<float>(epsilon), y + base);
    double mean = 0, var = 0;
    for (int64_t j = 0; j < cols; ++j) mean += xr[j];
    mean /= static_cast<double>(cols);
    for (int64_t j = 0; j < cols; ++j) var += (xr[j] - mean) * (xr[j] - mean);
    var /= static_cast<double>(cols);
    const double inv_std = 1.0 / std::sqrt(var + epsilon);
    for (int64_t j = 0; j < cols; ++j) {
      double v = (xr[j] - mean) * inv_std * w[w_base + scale_within[static_cast<size_t>(j)]];
      if (b) v += b[b_base + bias_within[static_cast<size_t>(j)]];
      y[base + j] = static_cast<float>(v);
    }
  });
}

// ---- BatchNormalization (inference, per-channel statistics) and InstanceNormalization.

bool per_channel(std::span<const ValueInfo> in) {
  if (!all_f32(in) || in[0].shape.size() < 2) return false;
  for (size_t i = 1; i < in.size(); ++i)
    if (!in[i].present || in[i].shape != Shape{in[0].shape[1]}) return false;
  return true;
}

std::vector<int64_t> batchnorm_cuttable(const Node& node, std::span<const ValueInfo> in, std::span<const ValueInfo> out) {
  bool ok = per_channel(in) && in.size() == 5 && node.attr_int("training_mode", 0) == 0;
  return ok ? all_cuttable(out[0].shape) : none_cuttable(out[0].shape);
}

std::vector<int64_t> instancenorm_cuttable(const Node&, std::span<const ValueInfo> in, std::span<const ValueInfo> out) {
  std::vector<int64_t> blocks = none_cuttable(out[0].shape);
  if (per_channel(in) && in.size() == 3) blocks[0] = blocks[1] = 1;
  return blocks;
}

// X's region; each per-channel parameter reads the region's channels.
template <bool WholePlanes>
void channel_needs(const Node&, std::span<const ValueInfo> in, std::span<const ValueInfo>, const Region& out_region,
                   std::span<Region> in_regions) {
  Region x = out_region;
  if (WholePlanes)
    for (size_t d = 2; d < x.size(); ++d) x[d] = {0, in[0].shape[d]};
  in_regions[0] = x;
  for (size_t i = 1; i < in.size(); ++i) {
    if (!in[i].present) in_regions[i] = {};
    else in_regions[i] = in[i].shape == Shape{in[0].shape[1]} ? Region{out_region[1]} : full_region(in[i].shape);
  }
}

void batchnorm_run(const Node& node, std::span<const Tensor* const> in, std::span<Tensor* const> out, const Region& r, const void*, TileScratch&) {
  std::vector<ValueInfo> infos = infos_of_tensors(in);
  // Training mode normalises with the batch's statistics, not the inputs': the reference's job.
  if (!per_channel(infos) || in.size() != 5 || node.attr_int("training_mode", 0) != 0)
    return reference_whole(node, in, out, r);
  check_region(node, r, out[0]->shape());
  const double epsilon = node.attr_float("epsilon", 1e-5f);
  const float *scale = in[1]->data<float>(), *bias = in[2]->data<float>(), *mean = in[3]->data<float>(),
              *var = in[4]->data<float>();
  const float* x = in[0]->data<float>();
  float* y = out[0]->data<float>();
  const int64_t run = r.back().size();
  // A row runs along the last dim: on [N, C] (BatchNorm after Gemm or Flatten) that is the
  // channel dim itself, so the channel steps with the element; on [N, C, ...] it is fixed.
  const bool channel_is_run = out[0]->shape().size() == 2;
  for_each_row(out[0]->shape(), r, [&](int64_t offset, const std::vector<int64_t>& index) {
    for (int64_t i = 0; i < run; ++i) {
      const int64_t c = channel_is_run ? index[1] + i : index[1];
      const double inv_std = 1.0 / std::sqrt(static_cast<double>(var[c]) + epsilon);
      y[offset + i] = static_cast<float>((x[offset + i] - static_cast<double>(mean[c])) * inv_std * scale[c] + bias[c]);
    }
  });
}

void instancenorm_run(const Node& node, std::span<const Tensor* const> in, std::span<Tensor* const> out, const Region& r, const void*, TileScratch&) {
  std::vector<ValueInfo> infos = infos_of_tensors(in);
  if (!per_channel(infos) || in.size() != 3) return reference_whole(node, in, out, r);
  check_region(node, r, out[0]->shape());
  const double epsilon = node.attr_float("epsilon", 1e-5f);
  const Shape& shape = in[0]->shape();
  const int64_t channels = shape[1], inner = numel(Shape(shape.begin() + 2, shape.end()));
  const float *x = in[0]->data<float>(), *scale = in[1]->data<float>(), *bias = in[2]->data<float>();
  float* y = out[0]->data<float>();
  for (int64_t n = r[0].begin; n < r[0].end; ++n)
    for (int64_t c = r[1].begin; c < r[1].end; ++c) {
      const int64_t base = (n * channels + c) * inner;
      double mean = 0, var = 0;
      for (int64_t s = 0; s < inner; ++s) mean += x[base + s];
      mean /= static_cast<double>(inner);
      for (int64_t s = 0; s < inner; ++s) var += (x[base + s] - mean) * (x[base + s] - mean);
      var /= static_cast<double>(inner);
      const double inv_std = 1.0 / std::sqrt(var + epsilon);
      for (int64_t s = 0; s < inner; ++s)
        y[base + s] = static_cast<float>((x[base + s] - mean) * inv_std * scale[c] + bias[c]);
    }
}

// RMSNormalization: rows of the region, each over the normalised dims (ops/normalization/rms_norm.h).
void rmsnorm_run(const Node& node, std::span<const Tensor* const> in, std::span<Tensor* const> out, const Region& r,
                 const void*, TileScratch&) {
  check_region(node, r, out[0]->shape());
  const Shape& shape = in[0]->shape();
  const RowDims rd = layernorm_dims(node, shape);
  int64_t cols = 1;
  for (size_t d = rd.first; d < rd.last; ++d) cols *= shape[d];
  const double epsilon = node.attr_float("epsilon", 1e-5f);
  const bool per_element = in[1]->numel() == cols;
  for_each_row_start(shape, r, rd, [&](int64_t base, const std::vector<int64_t>&) {
    rms_norm_row(in[0]->data<float>() + base, in[1]->data<float>(), per_element, cols, epsilon, out[0]->data<float>() + base);
  });
}

}  // namespace rows_rule

void add_row_rules(RuleTable& t) {
  using namespace rows_rule;
  constexpr auto sm_cut = row_cuttable<softmax_dims>;
  constexpr auto sm_needs = row_needs<softmax_dims>;
  t["Softmax"] = {sm_cut, sm_needs, softmax_run<SoftmaxKind::softmax>};
  t["LogSoftmax"] = {sm_cut, sm_needs, softmax_run<SoftmaxKind::log_softmax>};
  t["Hardmax"] = {sm_cut, sm_needs, softmax_run<SoftmaxKind::hardmax>};
  t["LayerNormalization"] = {row_cuttable<layernorm_dims>, row_needs<layernorm_dims>, layernorm_run};
  t["RMSNormalization"] = {row_cuttable<layernorm_dims>, row_needs<layernorm_dims>, rmsnorm_run};
  t["BatchNormalization"] = {batchnorm_cuttable, channel_needs<false>, batchnorm_run};
  t["InstanceNormalization"] = {instancenorm_cuttable, channel_needs<true>, instancenorm_run};
}

}  // namespace grove::tiling
