// Operators that change only the shape, never the bytes: Reshape, Flatten, Squeeze,
// Unsqueeze, Identity and inference-mode Dropout; and Shape/Size, which read only the shape.
#include <algorithm>
#include <cstring>

#include "ops/byte_copy.h"
#include "ops/op.h"
#include "ops/op_util.h"

namespace grove {
namespace {

// The output holds the same bytes as the input under another shape.
void copy_same_bytes(const Node& node, std::span<const Tensor* const> in, std::span<Tensor* const> out) {
  const Tensor& x = *in[0];
  Tensor& y = *out[0];
  element_size(node, x.dtype());
  if (x.bytes() != y.bytes()) throw Error(node.describe() + ": output size does not match input size");
  if (x.bytes()) std::memcpy(y.raw(), x.raw(), x.bytes());
}

void same_bytes_reference(const Node& node, std::span<const Tensor* const> in, std::span<Tensor* const> out) {
  copy_same_bytes(node, in, out);
}

// ---- Reshape ----

Shape reshape_target(const Node& node, const Shape& in_shape, const std::vector<int64_t>& spec, bool allowzero) {
  Shape out(spec.size());
  int64_t known = 1;
  int infer_at = -1;
  for (size_t i = 0; i < spec.size(); ++i) {
    int64_t d = spec[i];
    if (d == -1) {
      if (infer_at >= 0) throw Error(node.describe() + ": shape has more than one -1");
      infer_at = static_cast<int>(i);
      continue;
    }
    if (d == 0 && !allowzero) {
      if (i >= in_shape.size())
        throw Error(node.describe() + ": shape has 0 at index " + std::to_string(i) + " beyond the input rank");
      d = in_shape[i];
    }
    if (d < 0) throw Error(node.describe() + ": shape has invalid dimension " + std::to_string(d));
    out[i] = d;
    known = d == 0 ? 0 : known;
    if (d) known = checked_numel(node, {known, d});
  }
  int64_t total = numel(in_shape);
  if (infer_at >= 0) {
    if (known == 0 || total % known != 0)
      throw Error(node.describe() + ": cannot reshape " + shape_str(in_shape) + " with -1 in the shape");
    out[static_cast<size_t>(infer_at)] = total / known;
  }
  if (numel(out) != total)
    throw Error(node.describe() + ": cannot reshape " + shape_str(in_shape) + " to " + shape_str(out));
  return out;
}

void reshape_infer(const Node& node, std::span<const ValueInfo> in, std::span<ValueInfo> out) {
  require_inputs(node, in.size(), 2, 2);
  std::vector<int64_t> spec = constant_ints(node, in, 1, "the target shape");
  if (constant_input(node, in, 1, "the target shape").rank() != 1) throw Error(node.describe() + ": shape must be 1-D");
  bool allowzero = node.opset >= 14 && node.attr_int("allowzero", 0) != 0;
  if (allowzero && std::count(spec.begin(), spec.end(), 0) && std::count(spec.begin(), spec.end(), -1))
    throw Error(node.describe() + ": allowzero=1 with both 0 and -1 in the shape is invalid");
  out[0] = ValueInfo{in[0].dtype, reshape_target(node, in[0].shape, spec, allowzero)};
}

// ---- Flatten ----

void flatten_infer(const Node& node, std::span<const ValueInfo> in, std::span<ValueInfo> out) {
  require_inputs(node, in.size(), 1, 1);
  const Shape& s = in[0].shape;
  int64_t rank = static_cast<int64_t>(s.size());
  int64_t axis = node.attr_int("axis", 1);
  if (axis < 0) axis += rank;
  if (axis < 0 || axis > rank)
    throw Error(node.describe() + ": axis " + std::to_string(node.attr_int("axis", 1)) + " is out of range for rank " +
                std::to_string(rank));
  int64_t outer = 1, inner = 1;
  for (int64_t i = 0; i < rank; ++i) (i < axis ? outer : inner) *= s[static_cast<size_t>(i)];
  out[0] = ValueInfo{in[0].dtype, {outer, inner}};
}

// ---- Squeeze / Unsqueeze: axes are an attribute before opset 13, an input from 13 ----

std::optional<std::vector<int64_t>> axes_of(const Node& node, std::span<const ValueInfo> in) {
  if (node.opset < 13) {
    if (!node.has_attr("axes")) return std::nullopt;
    return node.attr_ints("axes");
  }
  if (!has_input(in, 1)) return std::nullopt;
  return constant_ints(node, in, 1, "axes");
}

void squeeze_infer(const Node& node, std::span<const ValueInfo> in, std::span<ValueInfo> out) {
  require_inputs(node, in.size(), 1, node.opset < 13 ? 1 : 2);
  const Shape& s = in[0].shape;
  int64_t rank = static_cast<int64_t>(s.size());
  std::vector<bool> drop(s.size(), false);
  if (auto axes = axes_of(node, in)) {
    for (int64_t a : *axes) {
      size_t axis = static_cast<size_t>(normalize_axis(node, a, rank));
      if (s[axis] != 1)
        throw Error(node.describe() + ": cannot squeeze axis " + std::to_string(a) + " of size " + std::to_string(s[axis]));
      drop[axis] = true;
    }
  } else {
    for (size_t i = 0; i < s.size(); ++i) drop[i] = s[i] == 1;
  }
  Shape result;
  for (size_t i = 0; i < s.size(); ++i)
    if (!drop[i]) result.push_back(s[i]);
  out[0] = ValueInfo{in[0].dtype, result};
}

void unsqueeze_infer(const Node& node, std::span<const ValueInfo> in, std::span<ValueInfo> out) {
  require_inputs(node, in.size(), node.opset < 13 ? 1 : 2, node.opset < 13 ? 1 : 2);
  auto axes = axes_of(node, in);
  if (!axes) throw Error(node.describe() + ": axes are required");
  const Shape& s = in[0].shape;
  int64_t out_rank = static_cast<int64_t>(s.size() + axes->size());
  std::vector<bool> inserted(static_cast<size_t>(out_rank), false);
  for (int64_t a : *axes) {
    size_t axis = static_cast<size_t>(normalize_axis(node, a, out_rank));
    if (inserted[axis]) throw Error(node.describe() + ": axis " + std::to_string(a) + " is repeated");
    inserted[axis] = true;
  }
  Shape result;
  size_t next = 0;
  for (bool one : inserted) result.push_back(one ? 1 : s[next++]);
  out[0] = ValueInfo{in[0].dtype, result};
}

// ---- Identity ----

void identity_infer(const Node& node, std::span<const ValueInfo> in, std::span<ValueInfo> out) {
  require_inputs(node, in.size(), 1, 1);
  element_size(node, in[0].dtype);
  out[0] = ValueInfo{in[0].dtype, in[0].shape};
}

// ---- Shape / Size: only the input's shape is read, never its data ----

// The [start, end) slice of the dims that Shape-15 returns.
std::pair<int64_t, int64_t> shape_range(const Node& node, int64_t rank) {
  auto clamp_index = [rank](int64_t i) { return std::clamp(i < 0 ? i + rank : i, int64_t{0}, rank); };
  if (node.opset < 15) return {0, rank};
  int64_t start = clamp_index(node.attr_int("start", 0));
  int64_t end = node.has_attr("end") ? clamp_index(node.attr_int("end", rank)) : rank;
  return {start, std::max(start, end)};
}

void shape_infer(const Node& node, std::span<const ValueInfo> in, std::span<ValueInfo> out) {
  require_inputs(node, in.size(), 1, 1);
  auto [start, end] = shape_range(node, static_cast<int64_t>(in[0].shape.size()));
  out[0] = ValueInfo{DType::i64, {end - start}};
}

void shape_reference(const Node& node, std::span<const Tensor* const> in, std::span<Tensor* const> out) {
  const Shape& s = in[0]->shape();
  auto [start, end] = shape_range(node, static_cast<int64_t>(s.size()));
  int64_t* dst = out[0]->data<int64_t>();
  for (int64_t i = start; i < end; ++i) dst[i - start] = s[static_cast<size_t>(i)];
}

void size_infer(const Node& node, std::span<const ValueInfo> in, std::span<ValueInfo> out) {
  require_inputs(node, in.size(), 1, 1);
  out[0] = ValueInfo{DType::i64, {}};
}

void size_reference(const Node&, std::span<const Tensor* const> in, std::span<Tensor* const> out) {
  out[0]->data<int64_t>()[0] = numel(in[0]->shape());
}

// ---- Dropout: inference only, so the output is the input and the mask is all true ----

// Dropout-7 (used up to opset 9) gives the mask the data's dtype; from Dropout-10 it is bool.
DType mask_dtype(const Node& node, DType data) { return node.opset < 10 ? data : DType::boolean; }

// Training mode with a non-zero ratio would drop values at random, which grove does not do.
void check_inference_mode(const Node& node, std::span<const ValueInfo> in) {
  if (node.opset < 12 || !has_input(in, 2) || !in[2].data) return;
  if (in[2].data->numel() != 1) throw Error(node.describe() + ": training_mode must be a scalar");
  if (in[2].data->to_f64()[0] == 0) return;
  double ratio = 0.5;
  if (has_input(in, 1)) {
    if (!in[1].data) throw Unsupported(node.describe() + ": training mode with a ratio computed at run time");
    if (in[1].data->numel() != 1) throw Error(node.describe() + ": ratio must be a scalar");
    ratio = in[1].data->to_f64()[0];
  }
  if (ratio != 0) throw Unsupported(node.describe() + ": training mode (random dropout) is not supported");
}

void dropout_infer(const Node& node, std::span<const ValueInfo> in, std::span<ValueInfo> out) {
  require_inputs(node, in.size(), 1, node.opset < 12 ? 1 : 3);
  element_size(node, in[0].dtype);
  check_inference_mode(node, in);
  out[0] = ValueInfo{in[0].dtype, in[0].shape};
  if (out.size() > 1) out[1] = ValueInfo{mask_dtype(node, in[0].dtype), in[0].shape};
}

void dropout_reference(const Node& node, std::span<const Tensor* const> in, std::span<Tensor* const> out) {
  check_inference_mode(node, infos_of(in));
  copy_same_bytes(node, in, out);
  if (out.size() > 1 && out[1]) {
    Tensor& mask = *out[1];
    std::vector<std::byte> one = scalar_bytes(mask.dtype(), 1.0);
    for (int64_t i = 0; i < mask.numel(); ++i) std::memcpy(mask.raw() + i * one.size(), one.data(), one.size());
  }
}

}  // namespace

void register_shape_ops(OpRegistry& r) {
  r.add("Reshape", {.infer = reshape_infer, .reference = same_bytes_reference, .cost = OpCost::moves_data, .traits = kView});
  r.add("Flatten", {.infer = flatten_infer, .reference = same_bytes_reference, .cost = OpCost::moves_data, .traits = kView});
  r.add("Squeeze", {.infer = squeeze_infer, .reference = same_bytes_reference, .cost = OpCost::moves_data, .traits = kView});
  r.add("Unsqueeze", {.infer = unsqueeze_infer, .reference = same_bytes_reference, .cost = OpCost::moves_data, .traits = kView});
  r.add("Identity", {.infer = identity_infer, .reference = same_bytes_reference, .cost = OpCost::moves_data, .traits = kPerChannel});
  r.add("Shape", {.infer = shape_infer, .reference = shape_reference, .cost = OpCost::moves_data});
  r.add("Size", {.infer = size_infer, .reference = size_reference, .cost = OpCost::moves_data});
  r.add("Dropout", {.infer = dropout_infer, .reference = dropout_reference, .cost = OpCost::moves_data, .traits = kPerChannel});
  register_generator_ops(r);
}

}  // namespace grove
