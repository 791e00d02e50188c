#include "ops/byte_copy.h"

#include <algorithm>
#include <cstring>
#include <limits>

#include "ops/op_util.h"

namespace grove {

size_t element_size(const Node& node, DType dtype) {
  size_t size = dtype_size(dtype);
  if (size == 0) throw Unsupported(node.describe() + ": dtype " + std::string(dtype_name(dtype)) + " is not supported");
  return size;
}

std::vector<ValueInfo> infos_of(std::span<const Tensor* const> in) {
  std::vector<ValueInfo> infos(in.size());
  for (size_t i = 0; i < in.size(); ++i) {
    if (in[i]) infos[i] = ValueInfo{in[i]->dtype(), in[i]->shape(), in[i], true};
    else infos[i].present = false;
  }
  return infos;
}

int64_t checked_numel(const Node& node, const Shape& shape) {
  // 2^40 elements is far beyond any real CPU tensor and far from int64 overflow.
  constexpr int64_t kLimit = int64_t{1} << 40;
  int64_t n = 1;
  for (int64_t d : shape) {
    if (d < 0) throw Error(node.describe() + ": shape " + shape_str(shape) + " has a negative dimension");
    if (d != 0 && n > kLimit / d) throw Error(node.describe() + ": shape " + shape_str(shape) + " is too large");
    n *= d;
  }
  return n;
}

std::vector<int64_t> constant_ints(const Node& node, std::span<const ValueInfo> in, size_t i, const char* what) {
  const Tensor& t = constant_input(node, in, i, what);
  if (t.dtype() != DType::i64 && t.dtype() != DType::i32)
    throw Error(node.describe() + ": " + what + " must be int64 or int32, got " + std::string(dtype_name(t.dtype())));
  return t.to_i64();
}

std::vector<std::byte> scalar_bytes(DType dtype, double value) {
  std::vector<std::byte> bytes;
  visit_dtype(dtype, [&](auto tag) {
    using T = decltype(tag);
    T v = static_cast<T>(value);
    bytes.resize(sizeof(T));
    std::memcpy(bytes.data(), &v, sizeof(T));
  });
  return bytes;
}

namespace {

struct OffsetCopy {
  const std::byte* in;
  std::byte* out;
  const Shape& shape;
  const AxisOffsets& offsets;
  std::span<const std::byte> fill;
  size_t elem;
  std::vector<int64_t> block;  // elements under one index of dim d

  void fill_elements(int64_t count) {
    for (int64_t k = 0; k < count; ++k, out += elem) {
      if (fill.size() == elem) std::memcpy(out, fill.data(), elem);
      else std::memset(out, 0, elem);
    }
  }

  void copy(size_t d, int64_t base) {
    const std::vector<int64_t>& table = offsets[d];
    if (d + 1 == shape.size()) {
      for (int64_t i = 0; i < shape[d]; ++i) {
        if (table[i] == kFill) { fill_elements(1); continue; }
        std::memcpy(out, in + static_cast<size_t>(base + table[i]) * elem, elem);
        out += elem;
      }
      return;
    }
    for (int64_t i = 0; i < shape[d]; ++i) {
      if (table[i] == kFill) fill_elements(block[d]);
      else copy(d + 1, base + table[i]);
    }
  }
};

}  // namespace

void gather_by_offsets(const Tensor& in, Tensor& out, const AxisOffsets& offsets, std::span<const std::byte> fill) {
  if (in.dtype() != out.dtype()) throw Error("gather_by_offsets: dtype mismatch");
  const Shape& shape = out.shape();
  if (offsets.size() != shape.size()) throw Error("gather_by_offsets: one offset table per output dim is needed");
  if (out.numel() == 0) return;  // the tables of an empty output may be left empty
  for (size_t d = 0; d < shape.size(); ++d)
    if (static_cast<int64_t>(offsets[d].size()) != shape[d]) throw Error("gather_by_offsets: offset table size mismatch");
  // Callers build the tables from validated shapes; this keeps a slip from reading out of bounds.
  int64_t last = 0;
  bool reads = true;  // false when some dim is all fill, so no element reads the input
  for (const auto& table : offsets) {
    int64_t most = kFill;
    for (int64_t o : table) {
      if (o < 0 && o != kFill) throw Error("gather_by_offsets: negative offset");
      most = std::max(most, o);
    }
    if (most == kFill) reads = false;
    else last += most;
  }
  if (reads && last >= in.numel()) throw Error("gather_by_offsets: offset past the end of the input");
  size_t elem = dtype_size(in.dtype());
  if (shape.empty()) {
    if (in.numel() < 1) throw Error("gather_by_offsets: empty input");
    std::memcpy(out.raw(), in.raw(), elem);
    return;
  }
  OffsetCopy c{in.raw(), out.raw(), shape, offsets, fill, elem, {}};
  c.block.assign(shape.size(), 1);
  for (size_t d = shape.size() - 1; d-- > 0;) c.block[d] = c.block[d + 1] * shape[d + 1];
  c.copy(0, 0);
}

AxisOffsets strided_offsets(const Shape& in_shape, const Shape& out_shape, std::span<const int64_t> in_dims,
                            std::span<const int64_t> start, std::span<const int64_t> step) {
  std::vector<int64_t> strides = strides_of(in_shape);
  AxisOffsets offsets(out_shape.size());
  // An empty output may still have huge dims (a hostile Slice of [0, 2^40]): no tables for it.
  if (std::find(out_shape.begin(), out_shape.end(), 0) != out_shape.end()) return offsets;
  for (size_t d = 0; d < out_shape.size(); ++d) {
    int64_t stride = strides.at(static_cast<size_t>(in_dims[d]));
    offsets[d].resize(static_cast<size_t>(out_shape[d]));
    for (int64_t i = 0; i < out_shape[d]; ++i) offsets[d][i] = (start[d] + i * step[d]) * stride;
  }
  return offsets;
}

}  // namespace grove
