// Operators whose output is built from a shape or a few scalars: Expand, ConstantOfShape,
// Range and EyeLike. Their output shapes depend on input values, which must be constants.
#include <cmath>
#include <cstring>

#include "ops/byte_copy.h"
#include "ops/op.h"
#include "ops/op_util.h"

namespace grove {
namespace {

// ---- Expand: numpy broadcast of the input against the given shape, both ways ----

void expand_infer(const Node& node, std::span<const ValueInfo> in, std::span<ValueInfo> out) {
  require_inputs(node, in.size(), 2, 2);
  element_size(node, in[0].dtype);
  std::vector<int64_t> spec = constant_ints(node, in, 1, "the target shape");
  if (constant_input(node, in, 1, "the target shape").rank() != 1) throw Error(node.describe() + ": shape must be 1-D");
  for (int64_t d : spec)
    if (d < 0) throw Error(node.describe() + ": shape has negative dimension " + std::to_string(d));
  Shape result = broadcast_shapes(node, in[0].shape, spec);
  checked_numel(node, result);
  out[0] = ValueInfo{in[0].dtype, result};
}

void expand_reference(const Node& node, std::span<const Tensor* const> in, std::span<Tensor* const> out) {
  Tensor& y = *out[0];
  // An empty output may still have huge dims: build no offset tables for it.
  if (y.numel() == 0) return;
  std::vector<int64_t> strides = broadcast_strides(in[0]->shape(), y.shape());
  AxisOffsets offsets(y.shape().size());
  for (size_t d = 0; d < offsets.size(); ++d)
    for (int64_t i = 0; i < y.shape()[d]; ++i) offsets[d].push_back(i * strides[d]);
  gather_by_offsets(*in[0], y, offsets);
}

// ---- ConstantOfShape ----

void constant_of_shape_infer(const Node& node, std::span<const ValueInfo> in, std::span<ValueInfo> out) {
  require_inputs(node, in.size(), 1, 1);
  Shape shape = constant_ints(node, in, 0, "the shape");
  if (constant_input(node, in, 0, "the shape").rank() != 1) throw Error(node.describe() + ": shape must be 1-D");
  checked_numel(node, shape);
  DType dtype = DType::f32;
  if (node.has_attr("value")) {
    const Tensor& value = node.attr_tensor("value");
    if (value.numel() != 1) throw Error(node.describe() + ": value must hold exactly one element");
    dtype = value.dtype();
    element_size(node, dtype);
  }
  out[0] = ValueInfo{dtype, shape};
}

void constant_of_shape_reference(const Node& node, std::span<const Tensor* const>, std::span<Tensor* const> out) {
  Tensor& y = *out[0];
  if (!node.has_attr("value")) return;  // the default is float zeros, and buffers start zeroed
  const Tensor& value = node.attr_tensor("value");
  size_t elem = value.bytes();
  for (int64_t i = 0; i < y.numel(); ++i) std::memcpy(y.raw() + static_cast<size_t>(i) * elem, value.raw(), elem);
}

// ---- Range ----

bool is_range_dtype(DType d) {
  return d == DType::f32 || d == DType::f64 || d == DType::i16 || d == DType::i32 || d == DType::i64;
}

struct RangeArgs {
  double start = 0, delta = 0;
  int64_t count = 0;
};

RangeArgs range_args(const Node& node, std::span<const ValueInfo> in) {
  require_inputs(node, in.size(), 3, 3);
  const char* names[] = {"start", "limit", "delta"};
  double v[3];
  std::vector<int64_t> iv(3);
  for (size_t i = 0; i < 3; ++i) {
    const Tensor& t = constant_input(node, in, i, names[i]);
    if (t.numel() != 1) throw Error(node.describe() + ": " + names[i] + " must be a scalar");
    if (t.dtype() != in[0].dtype) throw Error(node.describe() + ": start, limit and delta must have one dtype");
    v[i] = t.to_f64()[0];
    iv[i] = t.dtype() == DType::f32 || t.dtype() == DType::f64 ? 0 : t.to_i64()[0];
  }
  if (!is_range_dtype(in[0].dtype))
    throw Unsupported(node.describe() + ": dtype " + std::string(dtype_name(in[0].dtype)) + " is not supported");
  if (v[2] == 0) throw Error(node.describe() + ": delta must not be zero");
  RangeArgs args{v[0], v[2], 0};
  if (in[0].dtype == DType::f32 || in[0].dtype == DType::f64) {
    double n = std::ceil((v[1] - v[0]) / v[2]);
    if (!(n < double(int64_t{1} << 40))) throw Error(node.describe() + ": the range is too long");
    args.count = n > 0 ? static_cast<int64_t>(n) : 0;
  } else {
    // Integer math: doubles lose precision on large int64 bounds.
    __int128 diff = static_cast<__int128>(iv[1]) - iv[0], delta = iv[2];
    __int128 n = diff / delta + ((diff % delta != 0 && ((diff > 0) == (delta > 0))) ? 1 : 0);
    if (n >= (__int128{1} << 40)) throw Error(node.describe() + ": the range is too long");
    args.count = n > 0 ? static_cast<int64_t>(n) : 0;
    args.start = static_cast<double>(iv[0]);
  }
  return args;
}

void range_infer(const Node& node, std::span<const ValueInfo> in, std::span<ValueInfo> out) {
  RangeArgs args = range_args(node, in);
  out[0] = ValueInfo{in[0].dtype, {args.count}};
}

void range_reference(const Node& node, std::span<const Tensor* const> in, std::span<Tensor* const> out) {
  std::vector<ValueInfo> infos = infos_of(in);
  RangeArgs args = range_args(node, infos);
  visit_dtype(out[0]->dtype(), [&](auto tag) {
    using T = decltype(tag);
    T* y = out[0]->data<T>();
    if constexpr (std::is_integral_v<T>) {
      T start = in[0]->data<T>()[0], delta = in[2]->data<T>()[0];
      for (int64_t i = 0; i < args.count; ++i) y[i] = static_cast<T>(start + static_cast<T>(i) * delta);
    } else {
      for (int64_t i = 0; i < args.count; ++i) y[i] = static_cast<T>(args.start + static_cast<double>(i) * args.delta);
    }
  });
}

// ---- EyeLike ----

DType eye_dtype(const Node& node, DType input) {
  if (!node.has_attr("dtype")) return input;
  DType d = dtype_from_onnx(static_cast<int>(node.attr_int("dtype", 0)));
  if (d == DType::undefined || d == DType::string || d == DType::f16)
    throw Unsupported(node.describe() + ": dtype " + std::to_string(node.attr_int("dtype", 0)) + " is not supported");
  return d;
}

void eye_like_infer(const Node& node, std::span<const ValueInfo> in, std::span<ValueInfo> out) {
  require_inputs(node, in.size(), 1, 1);
  if (in[0].shape.size() != 2) throw Error(node.describe() + ": input must be 2-D, got " + shape_str(in[0].shape));
  out[0] = ValueInfo{eye_dtype(node, in[0].dtype), in[0].shape};
}

void eye_like_reference(const Node& node, std::span<const Tensor* const>, std::span<Tensor* const> out) {
  Tensor& y = *out[0];
  std::vector<std::byte> one = scalar_bytes(y.dtype(), 1.0);
  int64_t rows = y.dim(0), cols = y.dim(1), k = node.attr_int("k", 0);
  for (int64_t r = 0; r < rows; ++r) {
    int64_t c = r + k;
    if (c >= 0 && c < cols) std::memcpy(y.raw() + static_cast<size_t>(r * cols + c) * one.size(), one.data(), one.size());
  }
}

}  // namespace

void register_generator_ops(OpRegistry& r) {
  r.add("Expand", {.infer = expand_infer, .reference = expand_reference, .cost = OpCost::moves_data});
  r.add("ConstantOfShape", {.infer = constant_of_shape_infer, .reference = constant_of_shape_reference, .cost = OpCost::moves_data});
  r.add("Range", {range_infer, range_reference});
  r.add("EyeLike", {eye_like_infer, eye_like_reference});
}

}  // namespace grove
