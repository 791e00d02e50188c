#pragma once
// Helpers for the operators that only move data (shape, movement and resize families). They
// work for every dtype by copying elements of dtype_size bytes, never by value, so one code
// path serves float32, int64, bool and the rest.
#include <cstddef>
#include <span>
#include <vector>

#include "graph/graph.h"
#include "ops/op.h"

namespace grove {

// Bytes per element; Unsupported for dtypes without a fixed size (string, undefined).
size_t element_size(const Node& node, DType dtype);

// Infos (with data) describing tensors, so `reference` can reuse the planning code `infer` runs.
std::vector<ValueInfo> infos_of(std::span<const Tensor* const> in);

// Element count of a shape built from data (Expand, Tile, ConstantOfShape, ...); throws
// rather than overflowing on absurd shapes.
int64_t checked_numel(const Node& node, const Shape& shape);

// An input that must be constant, read as int64 values (shape, axes, pads, repeats, ...).
std::vector<int64_t> constant_ints(const Node& node, std::span<const ValueInfo> in, size_t i, const char* what);

// One element of `dtype` holding `value` (cast like static_cast), as raw bytes.
std::vector<std::byte> scalar_bytes(DType dtype, double value);

// The general "each output element reads one input element" copy. For output dim d,
// offsets[d][i] is what output index i along d adds to the input element offset, or kFill
// when that output element is not read from the input and gets `fill` instead. Transpose,
// Slice, Tile, Expand, Pad and nearest Resize are all tables of this kind.
inline constexpr int64_t kFill = -1;
using AxisOffsets = std::vector<std::vector<int64_t>>;
void gather_by_offsets(const Tensor& in, Tensor& out, const AxisOffsets& offsets,
                       std::span<const std::byte> fill = {});

// Offsets that read input dim in_dims[d] (stride from the input's shape) at index
// start[d] + i * step[d] for output index i along d.
AxisOffsets strided_offsets(const Shape& in_shape, const Shape& out_shape, std::span<const int64_t> in_dims,
                            std::span<const int64_t> start, std::span<const int64_t> step);

// Sub-registrations of the shape and movement families, split into files by topic.
void register_generator_ops(OpRegistry& r);  // generate.cpp: Expand, ConstantOfShape, Range, EyeLike
void register_slice_ops(OpRegistry& r);      // slice.cpp: Slice, Gather, GatherElements, GatherND
void register_pad_ops(OpRegistry& r);        // pad.cpp: Pad

}  // namespace grove
