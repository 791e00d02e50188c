// Pad: constant, reflect and edge modes over any dims; negative pads crop.
#include <algorithm>
#include <cstring>

#include "ops/byte_copy.h"
#include "ops/op.h"
#include "ops/op_util.h"

namespace grove {
namespace {

enum class PadMode { constant, reflect, edge };

PadMode pad_mode(const Node& node) {
  std::string mode = node.attr_string("mode", "constant");
  if (mode == "constant") return PadMode::constant;
  if (mode == "reflect") return PadMode::reflect;
  if (mode == "edge") return PadMode::edge;
  if (mode == "wrap") throw Unsupported(node.describe() + ": pad mode 'wrap' is not supported");
  throw Error(node.describe() + ": unknown pad mode '" + mode + "'");
}

// [begin_0, begin_1, ..., end_0, end_1, ...]: an attribute before opset 11, an input from 11.
std::vector<int64_t> pad_amounts(const Node& node, std::span<const ValueInfo> in) {
  size_t rank = in[0].shape.size();
  std::vector<int64_t> pads;
  if (node.opset < 11) {
    require_inputs(node, in.size(), 1, 1);
    if (!node.has_attr("pads")) throw Error(node.describe() + ": attribute 'pads' is required");
    pads = node.attr_ints("pads");
  } else {
    require_inputs(node, in.size(), 2, 4);
    if (has_input(in, 3)) throw Unsupported(node.describe() + ": the axes input (opset 18) is not supported");
    pads = constant_ints(node, in, 1, "pads");
  }
  if (pads.size() != 2 * rank)
    throw Error(node.describe() + ": pads has " + std::to_string(pads.size()) + " entries for rank " +
                std::to_string(rank) + " (need " + std::to_string(2 * rank) + ")");
  return pads;
}

Shape padded_shape(const Node& node, const Shape& s, const std::vector<int64_t>& pads) {
  Shape out = s;
  for (size_t d = 0; d < s.size(); ++d) {
    out[d] = s[d] + pads[d] + pads[d + s.size()];
    if (out[d] < 0) throw Error(node.describe() + ": pads crop dim " + std::to_string(d) + " below zero");
  }
  checked_numel(node, out);
  return out;
}

void pad_infer(const Node& node, std::span<const ValueInfo> in, std::span<ValueInfo> out) {
  require_inputs(node, in.size(), 1, 4);
  element_size(node, in[0].dtype);
  PadMode mode = pad_mode(node);
  std::vector<int64_t> pads = pad_amounts(node, in);
  Shape shape = padded_shape(node, in[0].shape, pads);
  if (mode != PadMode::constant)
    for (size_t d = 0; d < shape.size(); ++d)
      if (in[0].shape[d] == 0 && shape[d] > 0)
        throw Error(node.describe() + ": cannot pad an empty dim in edge or reflect mode");
  out[0] = ValueInfo{in[0].dtype, shape};
}

// The input index that padded index i (relative to the input's first element) reads; -1 for the constant.
int64_t source_index(PadMode mode, int64_t i, int64_t dim) {
  if (i >= 0 && i < dim) return i;
  switch (mode) {
    case PadMode::constant: return -1;
    case PadMode::edge: return std::clamp(i, int64_t{0}, dim - 1);
    case PadMode::reflect: {
      if (dim == 1) return 0;
      // Mirroring without repeating the edge is periodic with period 2*(dim-1), like numpy.
      int64_t period = 2 * (dim - 1);
      int64_t m = ((i % period) + period) % period;
      return m < dim ? m : period - m;
    }
  }
  return -1;
}

std::vector<std::byte> pad_value(const Node& node, std::span<const Tensor* const> in, DType dtype) {
  if (node.opset < 11) return scalar_bytes(dtype, node.attr_float("value", 0.0f));
  const Tensor* value = optional_input(in, 2);
  if (!value || value->numel() == 0) return std::vector<std::byte>(dtype_size(dtype));
  if (value->dtype() != dtype || value->numel() != 1)
    throw Error(node.describe() + ": constant_value must be one element of the data's dtype");
  return std::vector<std::byte>(value->raw(), value->raw() + dtype_size(dtype));
}

void pad_reference(const Node& node, std::span<const Tensor* const> in, std::span<Tensor* const> out) {
  const Tensor& x = *in[0];
  Tensor& y = *out[0];
  // An empty output may still have huge dims: build no offset tables for it.
  if (y.numel() == 0) return;
  PadMode mode = pad_mode(node);
  std::vector<int64_t> pads = pad_amounts(node, infos_of(in));
  std::vector<int64_t> strides = strides_of(x.shape());
  AxisOffsets offsets(y.shape().size());
  for (size_t d = 0; d < offsets.size(); ++d)
    for (int64_t o = 0; o < y.shape()[d]; ++o) {
      int64_t i = source_index(mode, o - pads[d], x.shape()[d]);
      offsets[d].push_back(i < 0 ? kFill : i * strides[d]);
    }
  gather_by_offsets(x, y, offsets, pad_value(node, in, x.dtype()));
}

}  // namespace

void register_pad_ops(OpRegistry& r) { r.add("Pad", {.infer = pad_infer, .reference = pad_reference, .cost = OpCost::moves_data}); }

}  // namespace grove
