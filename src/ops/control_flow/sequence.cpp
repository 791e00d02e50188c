#include "ops/control_flow/sequence.h"

#include <cstring>
#include <set>

#include "ops/op.h"
#include "ops/op_util.h"

namespace grove {
namespace {

const std::set<std::string>& sequence_ops() {
  static const std::set<std::string> ops = {
      "SequenceEmpty", "SequenceConstruct", "SequenceInsert", "SequenceAt", "SequenceErase", "SequenceLength",
      "SplitToSequence", "ConcatFromSequence", "Optional", "OptionalHasElement", "OptionalGetElement"};
  return ops;
}

const Value& required(std::span<const Value* const> in, size_t i, const char* what) {
  if (i >= in.size() || !in[i]) throw Error(std::string(what) + " is missing");
  return *in[i];
}

const std::vector<Tensor>& sequence_input(std::span<const Value* const> in, size_t i) {
  const Value& v = required(in, i, "the sequence input");
  if (!v.is_sequence()) throw Error("input " + std::to_string(i) + " must be a sequence, got " + v.describe());
  return v.items();
}

const Tensor& tensor_input(std::span<const Value* const> in, size_t i, const char* what) {
  const Value& v = required(in, i, what);
  if (!v.is_tensor()) throw Error(std::string(what) + " must be a tensor, got " + v.describe());
  return v.tensor();
}

// A position input: one integer in [-n, n] (or [-n, n-1] without `allow_end`), made non-negative.
int64_t position(const Tensor& t, int64_t n, bool allow_end) {
  if (t.dtype() != DType::i32 && t.dtype() != DType::i64)
    throw Error("position must be int32 or int64, got " + std::string(dtype_name(t.dtype())));
  if (t.numel() != 1) throw Error("position must hold one value, it has shape " + shape_str(t.shape()));
  const int64_t p = t.to_i64()[0];
  const int64_t hi = allow_end ? n : n - 1;
  if (p < -n || p > hi)
    throw Error("position " + std::to_string(p) + " is out of range [" + std::to_string(-n) + ", " + std::to_string(hi) +
                "] for a sequence of " + std::to_string(n));
  return p < 0 ? p + n : p;
}

// Elements before, along and after `axis`: a tensor seen as [outer, shape[axis], inner].
struct ByteAxisView {
  int64_t outer = 1, n = 0, inner = 1;  // inner counts bytes
};
ByteAxisView view_along(const Tensor& t, int64_t axis) {
  ByteAxisView v;
  v.inner = static_cast<int64_t>(dtype_size(t.dtype()));
  for (int64_t d = 0; d < t.rank(); ++d) {
    if (d < axis) v.outer *= t.dim(d);
    else if (d > axis) v.inner *= t.dim(d);
  }
  v.n = t.dim(axis);
  return v;
}

std::vector<Value> split_to_sequence(const Node& node, std::span<const Value* const> in) {
  const Tensor& x = tensor_input(in, 0, "the input");
  if (x.rank() == 0) throw Error("cannot split a scalar");
  const int64_t axis = normalize_axis(node, node.attr_int("axis", 0), x.rank());
  const ByteAxisView v = view_along(x, axis);
  std::vector<int64_t> sizes;
  const bool has_split = in.size() > 1 && in[1];
  bool keep = true;
  if (!has_split) {
    sizes.assign(static_cast<size_t>(v.n), 1);
    keep = node.attr_int("keepdims", 1) != 0;
  } else {
    const Tensor& split = tensor_input(in, 1, "split");
    if (split.dtype() != DType::i32 && split.dtype() != DType::i64)
      throw Error("split must be int32 or int64, got " + std::string(dtype_name(split.dtype())));
    std::vector<int64_t> s = split.to_i64();
    if (split.rank() == 0) {
      if (s[0] <= 0) throw Error("split size " + std::to_string(s[0]) + " must be positive");
      for (int64_t done = 0; done < v.n; done += s[0]) sizes.push_back(std::min(s[0], v.n - done));
    } else {
      int64_t total = 0;
      for (int64_t part : s) {
        if (part < 0) throw Error("split sizes must not be negative, got " + std::to_string(part));
        total += part;
      }
      if (total != v.n)
        throw Error("split sizes add up to " + std::to_string(total) + ", the axis has " + std::to_string(v.n));
      sizes = s;
    }
  }
  std::vector<Tensor> items;
  int64_t start = 0;
  for (int64_t len : sizes) {
    Shape shape = x.shape();
    shape[static_cast<size_t>(axis)] = len;
    if (!keep) shape.erase(shape.begin() + axis);
    Tensor part(x.dtype(), shape);
    for (int64_t o = 0; o < v.outer; ++o)
      std::memcpy(part.raw() + o * len * v.inner, x.raw() + (o * v.n + start) * v.inner,
                  static_cast<size_t>(len * v.inner));
    items.push_back(std::move(part));
    start += len;
  }
  return {Value::sequence(x.dtype(), std::move(items))};
}

std::vector<Value> concat_from_sequence(const Node& node, std::span<const Value* const> in) {
  const std::vector<Tensor>& items = sequence_input(in, 0);
  if (!node.has_attr("axis")) throw Error("attribute 'axis' is required");
  if (items.empty()) throw Error("cannot concatenate an empty sequence");
  const bool new_axis = node.attr_int("new_axis", 0) != 0;
  const Tensor& first = items.front();
  const int64_t out_rank = first.rank() + (new_axis ? 1 : 0);
  const int64_t axis = normalize_axis(node, node.attr_int("axis", 0), out_rank);
  if (!new_axis && first.rank() == 0) throw Error("cannot concatenate scalars without new_axis=1");
  // With new_axis each item is seen with a dim of 1 inserted at `axis`.
  auto as_part = [&](const Tensor& t) {
    if (!new_axis) return t;
    Shape s = t.shape();
    s.insert(s.begin() + axis, 1);
    return t.reshaped(s);
  };
  Shape out_shape = as_part(first).shape();
  int64_t total = 0;
  for (const Tensor& t : items) {
    Shape s = as_part(t).shape();
    Shape a = s, b = out_shape;
    a[static_cast<size_t>(axis)] = b[static_cast<size_t>(axis)] = 0;
    if (a != b) throw Error("sequence items of shapes " + shape_str(first.shape()) + " and " + shape_str(t.shape()) +
                            " cannot be concatenated along axis " + std::to_string(axis));
    total += s[static_cast<size_t>(axis)];
  }
  out_shape[static_cast<size_t>(axis)] = total;
  Tensor out(first.dtype(), out_shape);
  const ByteAxisView ov = view_along(out, axis);
  int64_t at = 0;
  for (const Tensor& t : items) {
    const ByteAxisView v = view_along(as_part(t), axis);
    for (int64_t o = 0; o < v.outer; ++o)
      std::memcpy(out.raw() + (o * ov.n + at) * ov.inner, t.raw() + o * v.n * v.inner, static_cast<size_t>(v.n * v.inner));
    at += v.n;
  }
  return {out};
}

DType dtype_attr(const Node& node) {
  const DType d = node.has_attr("dtype") ? dtype_from_onnx(static_cast<int>(node.attr_int("dtype", 1))) : DType::f32;
  if (d == DType::undefined) throw Error("attribute 'dtype' names no type grove knows");
  return d;
}

std::vector<Value> run(const Node& node, std::span<const Value* const> in) {
  const std::string& op = node.op_type;
  if (op == "Identity") return {required(in, 0, "the input")};
  if (op == "SequenceEmpty") return {Value::sequence(dtype_attr(node), {})};
  if (op == "SequenceConstruct") {
    if (in.empty()) throw Error("needs at least one input");
    std::vector<Tensor> items;
    for (size_t i = 0; i < in.size(); ++i) items.push_back(tensor_input(in, i, "each input"));
    const DType element = items.front().dtype();
    return {Value::sequence(element, std::move(items))};
  }
  if (op == "SequenceInsert") {
    const Value& seq = required(in, 0, "the sequence input");
    std::vector<Tensor> items = sequence_input(in, 0);
    const Tensor& t = tensor_input(in, 1, "the tensor input");
    const int64_t n = static_cast<int64_t>(items.size());
    const int64_t at = in.size() > 2 && in[2] ? position(tensor_input(in, 2, "position"), n, true) : n;
    items.insert(items.begin() + at, t);
    return {Value::sequence(seq.element_dtype(), std::move(items))};
  }
  if (op == "SequenceAt") {
    const std::vector<Tensor>& items = sequence_input(in, 0);
    const int64_t n = static_cast<int64_t>(items.size());
    return {items[static_cast<size_t>(position(tensor_input(in, 1, "position"), n, false))]};
  }
  if (op == "SequenceErase") {
    const Value& seq = required(in, 0, "the sequence input");
    std::vector<Tensor> items = sequence_input(in, 0);
    const int64_t n = static_cast<int64_t>(items.size());
    if (n == 0) throw Error("cannot erase from an empty sequence");
    const int64_t at = in.size() > 1 && in[1] ? position(tensor_input(in, 1, "position"), n, false) : n - 1;
    items.erase(items.begin() + at);
    return {Value::sequence(seq.element_dtype(), std::move(items))};
  }
  if (op == "SequenceLength") return {Tensor::scalar<int64_t>(static_cast<int64_t>(sequence_input(in, 0).size()))};
  if (op == "SplitToSequence") return split_to_sequence(node, in);
  if (op == "ConcatFromSequence") return concat_from_sequence(node, in);
  if (op == "Optional") return {in.empty() || !in[0] ? Value() : *in[0]};
  // Before opset 18 these take an optional; from 18 also a plain tensor or sequence, or nothing.
  if (op == "OptionalHasElement") return {Tensor::scalar<bool>(!in.empty() && in[0] && !in[0]->is_none())};
  if (op == "OptionalGetElement") {
    const Value& v = required(in, 0, "the input");
    if (v.is_none()) throw Error("the optional input holds no value");
    return {v};
  }
  throw Error("is not a sequence op");
}

// Sizes come from the data: binding stops here and the graph runs in segments.
void infer_sequence(const Node&, std::span<const ValueInfo>, std::span<ValueInfo>) {
  throw DataDependentShape("sequences and optionals: what they hold is known only when the graph runs");
}

void reference_sequence(const Node&, std::span<const Tensor* const>, std::span<Tensor* const>) {
  throw Error("sequence ops run on values in their executor, not as plain tensor ops");
}

}  // namespace

bool is_sequence_op(const Node& node) { return node.domain.empty() && sequence_ops().count(node.op_type) != 0; }

bool runs_on_values(const Node& node, std::span<const Value* const> in) {
  if (is_sequence_op(node)) return true;
  return node.domain.empty() && node.op_type == "Identity" && !in.empty() && in[0] && !in[0]->is_tensor();
}

std::vector<Value> run_sequence_op(const Node& node, std::span<const Value* const> in) {
  try {
    std::vector<Value> out = run(node, in);
    if (out.size() < node.outputs.size())
      throw Error("has " + std::to_string(node.outputs.size()) + " outputs, the op makes " + std::to_string(out.size()));
    return out;
  } catch (const Error& e) {
    if (std::string(e.what()).find("node '") != std::string::npos) throw;
    throw e.prefixed(node.describe() + ": ");
  }
}

void register_sequence_ops(OpRegistry& r) {
  for (const auto& op : sequence_ops()) r.add(op, {infer_sequence, reference_sequence});
}

}  // namespace grove
