// Operators that rearrange elements without computing on them: Transpose, Concat, Split, Tile,
// DepthToSpace, SpaceToDepth and Trilu. Slice/Gather live in slice.cpp, Pad in pad.cpp.
#include <algorithm>
#include <cstring>
#include <numeric>

#include "ops/byte_copy.h"
#include "ops/op.h"
#include "ops/op_util.h"

namespace grove {
namespace {

// ---- Transpose ----

std::vector<int64_t> transpose_perm(const Node& node, size_t rank) {
  std::vector<int64_t> perm(rank);
  std::iota(perm.rbegin(), perm.rend(), 0);  // the default reverses the dims
  if (node.has_attr("perm")) perm = node.attr_ints("perm");
  if (perm.size() != rank)
    throw Error(node.describe() + ": perm has " + std::to_string(perm.size()) + " entries for rank " + std::to_string(rank));
  std::vector<bool> seen(rank, false);
  for (int64_t p : perm) {
    if (p < 0 || p >= static_cast<int64_t>(rank) || seen[static_cast<size_t>(p)])
      throw Error(node.describe() + ": perm is not a permutation of 0.." + std::to_string(rank - 1));
    seen[static_cast<size_t>(p)] = true;
  }
  return perm;
}

void transpose_infer(const Node& node, std::span<const ValueInfo> in, std::span<ValueInfo> out) {
  require_inputs(node, in.size(), 1, 1);
  element_size(node, in[0].dtype);
  std::vector<int64_t> perm = transpose_perm(node, in[0].shape.size());
  Shape shape;
  for (int64_t p : perm) shape.push_back(in[0].shape[static_cast<size_t>(p)]);
  out[0] = ValueInfo{in[0].dtype, shape};
}

void transpose_reference(const Node& node, std::span<const Tensor* const> in, std::span<Tensor* const> out) {
  std::vector<int64_t> perm = transpose_perm(node, in[0]->shape().size());
  std::vector<int64_t> zeros(perm.size(), 0), ones(perm.size(), 1);
  gather_by_offsets(*in[0], *out[0], strided_offsets(in[0]->shape(), out[0]->shape(), perm, zeros, ones));
}

// ---- Concat ----

void concat_infer(const Node& node, std::span<const ValueInfo> in, std::span<ValueInfo> out) {
  require_inputs(node, in.size(), 1, -1);
  if (!node.has_attr("axis")) throw Error(node.describe() + ": attribute 'axis' is required");
  for (const auto& v : in)
    if (!v.present) throw Error(node.describe() + ": inputs must not be empty names");
  element_size(node, in[0].dtype);
  const Shape& first = in[0].shape;
  size_t axis = static_cast<size_t>(normalize_axis(node, node.attr_int("axis", 0), static_cast<int64_t>(first.size())));
  Shape shape = first;
  shape[axis] = 0;
  for (const auto& v : in) {
    if (v.dtype != in[0].dtype) throw Error(node.describe() + ": inputs have different dtypes");
    bool fits = v.shape.size() == first.size();
    for (size_t d = 0; fits && d < first.size(); ++d) fits = d == axis || v.shape[d] == first[d];
    if (!fits) throw Error(node.describe() + ": cannot concatenate " + shape_str(first) + " and " + shape_str(v.shape));
    shape[axis] += v.shape[axis];
  }
  out[0] = ValueInfo{in[0].dtype, shape};
}

void concat_reference(const Node& node, std::span<const Tensor* const> in, std::span<Tensor* const> out) {
  Tensor& y = *out[0];
  size_t axis = static_cast<size_t>(normalize_axis(node, node.attr_int("axis", 0), y.rank()));
  size_t elem = dtype_size(y.dtype());
  int64_t outer = dims_product(y.shape(), 0, axis);
  size_t inner = static_cast<size_t>(dims_product(y.shape(), axis + 1, y.shape().size())) * elem;
  std::byte* dst = y.raw();
  for (int64_t o = 0; o < outer; ++o)
    for (const Tensor* x : in) {
      size_t chunk = static_cast<size_t>(x->dim(static_cast<int64_t>(axis))) * inner;
      std::memcpy(dst, x->raw() + static_cast<size_t>(o) * chunk, chunk);
      dst += chunk;
    }
}

// ---- Split ----

std::vector<int64_t> split_lengths(const Node& node, std::span<const ValueInfo> in, size_t axis) {
  int64_t dim = in[0].shape[axis];
  int64_t parts = static_cast<int64_t>(node.outputs.size());
  std::vector<int64_t> lengths;
  if (node.opset < 13 && node.has_attr("split")) lengths = node.attr_ints("split");
  else if (node.opset >= 13 && has_input(in, 1)) lengths = constant_ints(node, in, 1, "split");
  if (lengths.empty()) {
    if (parts == 0) throw Error(node.describe() + ": no outputs");
    int64_t chunk = dim / parts;
    if (dim % parts != 0) {
      if (node.opset < 18)
        throw Error(node.describe() + ": dim " + std::to_string(dim) + " does not split into " + std::to_string(parts) +
                    " equal parts");
      chunk += 1;  // opset 18 lets the last part be smaller
    }
    for (int64_t p = 0; p < parts; ++p) lengths.push_back(std::min(chunk, dim - std::min(dim, p * chunk)));
  }
  if (static_cast<int64_t>(lengths.size()) != parts)
    throw Error(node.describe() + ": split has " + std::to_string(lengths.size()) + " entries for " +
                std::to_string(parts) + " outputs");
  int64_t total = 0;
  for (int64_t l : lengths) {
    if (l < 0) throw Error(node.describe() + ": split has a negative length");
    total += l;
  }
  if (total != dim)
    throw Error(node.describe() + ": split lengths sum to " + std::to_string(total) + ", the dim is " + std::to_string(dim));
  return lengths;
}

size_t split_axis(const Node& node, const Shape& shape) {
  return static_cast<size_t>(normalize_axis(node, node.attr_int("axis", 0), static_cast<int64_t>(shape.size())));
}

void split_infer(const Node& node, std::span<const ValueInfo> in, std::span<ValueInfo> out) {
  require_inputs(node, in.size(), 1, node.opset < 13 ? 1 : 2);
  element_size(node, in[0].dtype);
  size_t axis = split_axis(node, in[0].shape);
  std::vector<int64_t> lengths = split_lengths(node, in, axis);
  for (size_t k = 0; k < out.size(); ++k) {
    Shape shape = in[0].shape;
    shape[axis] = lengths[k];
    out[k] = ValueInfo{in[0].dtype, shape};
  }
}

void split_reference(const Node& node, std::span<const Tensor* const> in, std::span<Tensor* const> out) {
  const Tensor& x = *in[0];
  size_t axis = split_axis(node, x.shape());
  size_t elem = dtype_size(x.dtype());
  int64_t outer = dims_product(x.shape(), 0, axis);
  size_t inner = static_cast<size_t>(dims_product(x.shape(), axis + 1, x.shape().size())) * elem;
  const std::byte* src = x.raw();
  for (int64_t o = 0; o < outer; ++o)
    for (size_t k = 0; k < out.size(); ++k) {
      if (!out[k]) throw Error(node.describe() + ": every Split output must be named");
      int64_t length = out[k]->dim(static_cast<int64_t>(axis));
      size_t chunk = static_cast<size_t>(length) * inner;
      std::memcpy(out[k]->raw() + static_cast<size_t>(o) * chunk, src, chunk);
      src += chunk;
    }
}

// ---- Tile ----

std::vector<int64_t> tile_repeats(const Node& node, std::span<const ValueInfo> in) {
  std::vector<int64_t> repeats = constant_ints(node, in, 1, "repeats");
  if (repeats.size() != in[0].shape.size())
    throw Error(node.describe() + ": repeats has " + std::to_string(repeats.size()) + " entries for rank " +
                std::to_string(in[0].shape.size()));
  for (int64_t r : repeats)
    if (r < 0) throw Error(node.describe() + ": repeats must not be negative");
  return repeats;
}

void tile_infer(const Node& node, std::span<const ValueInfo> in, std::span<ValueInfo> out) {
  require_inputs(node, in.size(), 2, 2);
  element_size(node, in[0].dtype);
  std::vector<int64_t> repeats = tile_repeats(node, in);
  Shape shape = in[0].shape;
  for (size_t d = 0; d < shape.size(); ++d) shape[d] = checked_numel(node, {shape[d], repeats[d]});
  checked_numel(node, shape);
  out[0] = ValueInfo{in[0].dtype, shape};
}

void tile_reference(const Node&, std::span<const Tensor* const> in, std::span<Tensor* const> out) {
  // An empty output may still have huge dims: build no offset tables for it.
  if (out[0]->numel() == 0) return;
  const Shape& s = in[0]->shape();
  std::vector<int64_t> strides = strides_of(s);
  AxisOffsets offsets(s.size());
  for (size_t d = 0; d < s.size(); ++d)
    for (int64_t i = 0; i < out[0]->shape()[d]; ++i) offsets[d].push_back(i % s[d] * strides[d]);
  gather_by_offsets(*in[0], *out[0], offsets);
}

// ---- DepthToSpace / SpaceToDepth on NCHW ----

int64_t block_size(const Node& node, const ValueInfo& x) {
  if (x.shape.size() != 4) throw Error(node.describe() + ": input must be 4-D NCHW, got " + shape_str(x.shape));
  int64_t b = node.attr_int("blocksize", 0);
  if (b <= 0) throw Error(node.describe() + ": blocksize must be positive");
  return b;
}

void depth_to_space_infer(const Node& node, std::span<const ValueInfo> in, std::span<ValueInfo> out) {
  require_inputs(node, in.size(), 1, 1);
  element_size(node, in[0].dtype);
  int64_t b = block_size(node, in[0]);
  std::string mode = node.attr_string("mode", "DCR");
  if (mode != "DCR" && mode != "CRD") throw Error(node.describe() + ": unknown mode '" + mode + "'");
  const Shape& s = in[0].shape;
  if (s[1] % (b * b) != 0) throw Error(node.describe() + ": channels are not a multiple of blocksize^2");
  out[0] = ValueInfo{in[0].dtype, {s[0], s[1] / (b * b), s[2] * b, s[3] * b}};
}

// out[n, c, h*b+i, w*b+j] reads channel (i*b+j)*C' + c (DCR) or c*b*b + i*b + j (CRD) at (h, w):
// each output dim adds its own term to the input offset.
void depth_to_space_reference(const Node& node, std::span<const Tensor* const> in, std::span<Tensor* const> out) {
  int64_t b = node.attr_int("blocksize", 0);
  bool dcr = node.attr_string("mode", "DCR") == "DCR";
  const Shape& y = out[0]->shape();
  // An empty output may still have huge dims: build no offset tables for it.
  if (out[0]->numel() == 0) return;
  std::vector<int64_t> st = strides_of(in[0]->shape());
  int64_t c_out = y[1];
  AxisOffsets offsets(4);
  for (int64_t n = 0; n < y[0]; ++n) offsets[0].push_back(n * st[0]);
  for (int64_t c = 0; c < y[1]; ++c) offsets[1].push_back((dcr ? c : c * b * b) * st[1]);
  for (int64_t r = 0; r < y[2]; ++r) offsets[2].push_back(r / b * st[2] + r % b * (dcr ? b * c_out : b) * st[1]);
  for (int64_t q = 0; q < y[3]; ++q) offsets[3].push_back(q / b * st[3] + q % b * (dcr ? c_out : 1) * st[1]);
  gather_by_offsets(*in[0], *out[0], offsets);
}

void space_to_depth_infer(const Node& node, std::span<const ValueInfo> in, std::span<ValueInfo> out) {
  require_inputs(node, in.size(), 1, 1);
  element_size(node, in[0].dtype);
  int64_t b = block_size(node, in[0]);
  const Shape& s = in[0].shape;
  if (s[2] % b != 0 || s[3] % b != 0) throw Error(node.describe() + ": height and width must be multiples of blocksize");
  out[0] = ValueInfo{in[0].dtype, {s[0], s[1] * b * b, s[2] / b, s[3] / b}};
}

// out[n, (i*b+j)*C + c, h, w] = x[n, c, h*b+i, w*b+j].
void space_to_depth_reference(const Node& node, std::span<const Tensor* const> in, std::span<Tensor* const> out) {
  int64_t b = node.attr_int("blocksize", 0);
  const Shape& y = out[0]->shape();
  // An empty output may still have huge dims: build no offset tables for it.
  if (out[0]->numel() == 0) return;
  int64_t c_in = in[0]->dim(1);
  std::vector<int64_t> st = strides_of(in[0]->shape());
  AxisOffsets offsets(4);
  for (int64_t n = 0; n < y[0]; ++n) offsets[0].push_back(n * st[0]);
  for (int64_t oc = 0; oc < y[1]; ++oc) {
    int64_t c = oc % c_in, j = oc / c_in % b, i = oc / c_in / b;
    offsets[1].push_back(c * st[1] + i * st[2] + j * st[3]);
  }
  for (int64_t h = 0; h < y[2]; ++h) offsets[2].push_back(h * b * st[2]);
  for (int64_t w = 0; w < y[3]; ++w) offsets[3].push_back(w * b * st[3]);
  gather_by_offsets(*in[0], *out[0], offsets);
}

// ---- Trilu: keeps the upper (j - i >= k) or lower (j - i <= k) triangle of the last two dims ----

void trilu_infer(const Node& node, std::span<const ValueInfo> in, std::span<ValueInfo> out) {
  require_inputs(node, in.size(), 1, 2);
  element_size(node, in[0].dtype);
  if (in[0].shape.size() < 2) throw Error(node.describe() + ": input must have rank 2 or more");
  out[0] = ValueInfo{in[0].dtype, in[0].shape};
}

void trilu_reference(const Node& node, std::span<const Tensor* const> in, std::span<Tensor* const> out) {
  const Tensor& x = *in[0];
  Tensor& y = *out[0];
  int64_t k = 0;
  if (const Tensor* kt = optional_input(in, 1)) {
    if (kt->numel() != 1) throw Error(node.describe() + ": k must be a scalar");
    k = kt->to_i64()[0];
  }
  bool upper = node.attr_int("upper", 1) != 0;
  size_t elem = dtype_size(x.dtype());
  int64_t rows = x.dim(x.rank() - 2), cols = x.dim(x.rank() - 1);
  int64_t batches = rows * cols != 0 ? x.numel() / (rows * cols) : 0;
  std::memcpy(y.raw(), x.raw(), x.bytes());
  for (int64_t b = 0; b < batches; ++b)
    for (int64_t i = 0; i < rows; ++i)
      for (int64_t j = 0; j < cols; ++j) {
        bool keep = upper ? j - i >= k : j - i <= k;
        if (!keep) std::memset(y.raw() + static_cast<size_t>((b * rows + i) * cols + j) * elem, 0, elem);
      }
}

}  // namespace

void register_movement_ops(OpRegistry& r) {
  r.add("Transpose", {.infer = transpose_infer, .reference = transpose_reference, .cost = OpCost::moves_data});
  r.add("Concat", {.infer = concat_infer, .reference = concat_reference, .cost = OpCost::moves_data});
  r.add("Split", {.infer = split_infer, .reference = split_reference, .cost = OpCost::moves_data});
  r.add("Tile", {.infer = tile_infer, .reference = tile_reference, .cost = OpCost::moves_data});
  r.add("DepthToSpace", {.infer = depth_to_space_infer, .reference = depth_to_space_reference, .cost = OpCost::moves_data});
  r.add("SpaceToDepth", {.infer = space_to_depth_infer, .reference = space_to_depth_reference, .cost = OpCost::moves_data});
  r.add("Trilu", {trilu_infer, trilu_reference});
  register_slice_ops(r);
  register_pad_ops(r);
}

}  // namespace grove
