#pragma once
// Small helpers shared by the operator families.
#include <span>
#include <string>
#include <vector>

#include "graph/graph.h"

namespace grove {

// Throws unless the node has between min and max inputs (max < 0: no upper bound).
void require_inputs(const Node& node, size_t count, size_t min, int max);

// Maps a possibly negative axis into [0, rank); throws when out of range.
int64_t normalize_axis(const Node& node, int64_t axis, int64_t rank);

// numpy-style broadcast of two shapes; throws when they are incompatible.
Shape broadcast_shapes(const Node& node, const Shape& a, const Shape& b);

// Product of shape[from, to) (1 where the range is empty).
int64_t dims_product(const Shape& shape, size_t from, size_t to);

// float32 or float64: the dtypes the float-only families compute in.
inline bool is_f32_or_f64(DType dtype) { return dtype == DType::f32 || dtype == DType::f64; }

// Row-major element strides of a shape.
std::vector<int64_t> strides_of(const Shape& shape);

// For broadcasting: the strides to read `from` (right-aligned) while walking `to`; 0 on broadcast dims.
std::vector<int64_t> broadcast_strides(const Shape& from, const Shape& to);

// The input at i, or nullptr when the node omits it.
inline const Tensor* optional_input(std::span<const Tensor* const> in, size_t i) {
  return i < in.size() ? in[i] : nullptr;
}
inline bool has_input(std::span<const ValueInfo> in, size_t i) { return i < in.size() && in[i].present; }

// The constant data of an input that must be known to compute shapes (Reshape's shape,
// Slice's starts, ...). Throws a message telling the user to bind input shapes.
const Tensor& constant_input(const Node& node, std::span<const ValueInfo> in, size_t i, const char* what);

// FLOP formulas (OpSpec::flops). Shapes are bound but untrusted, so every product is checked:
// an Error rather than a signed overflow.
// The shape of v[i], or nullptr when the node omits it or it is not known.
inline const Shape* known_shape(std::span<const ValueInfo> v, size_t i) {
  return i < v.size() && v[i].present ? &v[i].shape : nullptr;
}
int64_t checked_product(const Shape& shape, size_t from);  // of shape[from, rank)
int64_t checked_add(int64_t a, int64_t b);
// The product of a kernel-shape attribute's values (a pool's window).
int64_t window_size(const Node& node, const char* attribute);
// A convolution's multiply-adds as two FLOPs each: 2 * |output| * (the weight's elements per
// output channel), the weight being input `weight_input`. 0 when a shape is unknown.
int64_t conv_products(std::span<const ValueInfo> in, std::span<const ValueInfo> out, size_t weight_input);
// A matrix product's: 2 * |output| * K, K being input 0's last dim. 0 when a shape is unknown.
int64_t matmul_products(std::span<const ValueInfo> in, std::span<const ValueInfo> out);

}  // namespace grove
