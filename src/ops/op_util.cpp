#include "ops/op_util.h"

namespace grove {

void require_inputs(const Node& node, size_t count, size_t min, int max) {
  if (count < min || (max >= 0 && count > static_cast<size_t>(max)))
    throw Error(node.describe() + ": expected " + std::to_string(min) +
                (max < 0 ? " or more" : (static_cast<size_t>(max) == min ? "" : " to " + std::to_string(max))) +
                " inputs, got " + std::to_string(count));
}

int64_t normalize_axis(const Node& node, int64_t axis, int64_t rank) {
  int64_t a = axis < 0 ? axis + rank : axis;
  if (a < 0 || a >= rank)
    throw Error(node.describe() + ": axis " + std::to_string(axis) + " is out of range for rank " + std::to_string(rank));
  return a;
}

Shape broadcast_shapes(const Node& node, const Shape& a, const Shape& b) {
  size_t rank = std::max(a.size(), b.size());
  Shape out(rank);
  for (size_t i = 0; i < rank; ++i) {
    int64_t da = i < rank - a.size() ? 1 : a[i - (rank - a.size())];
    int64_t db = i < rank - b.size() ? 1 : b[i - (rank - b.size())];
    if (da != db && da != 1 && db != 1)
      throw Error(node.describe() + ": shapes " + shape_str(a) + " and " + shape_str(b) + " cannot be broadcast");
    out[i] = da == 1 ? db : da;
  }
  return out;
}

std::vector<int64_t> strides_of(const Shape& shape) {
  // Unsigned, so the product wraps instead of overflowing: it only can for an empty tensor
  // with huge dims (fuzz_model), whose strides no element ever uses. For any tensor that
  // exists with elements, the strides are at most its element count and exact.
  std::vector<int64_t> s(shape.size());
  uint64_t acc = 1;
  for (size_t i = shape.size(); i-- > 0;) {
    s[i] = static_cast<int64_t>(acc);
    acc *= static_cast<uint64_t>(shape[i]);
  }
  return s;
}

std::vector<int64_t> broadcast_strides(const Shape& from, const Shape& to) {
  std::vector<int64_t> own = strides_of(from), out(to.size(), 0);
  size_t offset = to.size() - from.size();
  for (size_t i = 0; i < from.size(); ++i) out[offset + i] = from[i] == 1 ? 0 : own[i];
  return out;
}

const Tensor& constant_input(const Node& node, std::span<const ValueInfo> in, size_t i, const char* what) {
  if (i >= in.size() || !in[i].present) throw Error(node.describe() + ": missing input " + what);
  if (!in[i].data)
    throw DataDependentShape(node.describe() + ": " + what + " is computed at run time, so shapes cannot be bound; "
                "give the model's input shapes (--shape NAME=1x3x224x224) so it folds to a constant");
  return *in[i].data;
}

int64_t checked_product(const Shape& shape, size_t from) {
  int64_t n = 1;
  for (size_t i = from; i < shape.size(); ++i) n = checked_mul(n, shape[i]);
  return n;
}

int64_t checked_add(int64_t a, int64_t b) {
  int64_t r = 0;
  if (__builtin_add_overflow(a, b, &r)) throw Error("FLOP count overflows int64");
  return r;
}

int64_t window_size(const Node& node, const char* attribute) {
  int64_t window = 1;
  for (int64_t k : node.attr_ints(attribute)) window = checked_mul(window, k);
  return window;
}

int64_t conv_products(std::span<const ValueInfo> in, std::span<const ValueInfo> out, size_t weight_input) {
  const Shape* y = known_shape(out, 0);
  const Shape* w = known_shape(in, weight_input);
  if (!y || !w || w->empty()) return 0;
  return checked_mul(checked_mul(2, numel(*y)), checked_product(*w, 1));
}

int64_t matmul_products(std::span<const ValueInfo> in, std::span<const ValueInfo> out) {
  const Shape* y = known_shape(out, 0);
  const Shape* x = known_shape(in, 0);
  if (!y || !x || x->empty()) return 0;
  return checked_mul(checked_mul(2, numel(*y)), x->back());
}

}  // namespace grove
