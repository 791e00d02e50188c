// Reductions: ReduceMean/Sum/Max/Min/Prod/L1/L2/LogSum/LogSumExp/SumSquare, ArgMax, ArgMin.
//
// The reference gathers, for each output element, the input offsets it reduces over (the
// kept dims walk the output, the reduced dims walk one reduction) and folds them. That is
// slow but leaves no room for stride bugs, which is what an oracle needs.
#include <algorithm>
#include <cmath>
#include <limits>
#include <type_traits>

#include "ops/op.h"
#include "ops/elementwise/elementwise.h"
#include "ops/op_util.h"

namespace grove {
namespace {

enum class ReduceKind { mean, sum, max, min, prod, l1, l2, log_sum, log_sum_exp, sum_square };

// Every offset of a strided walk over `dims`, in row-major order.
std::vector<int64_t> walk_offsets(const Shape& dims, const std::vector<int64_t>& strides) {
  std::vector<int64_t> offsets{0};
  for (size_t d = 0; d < dims.size(); ++d) {
    std::vector<int64_t> next;
    next.reserve(offsets.size() * static_cast<size_t>(dims[d]));
    for (int64_t base : offsets)
      for (int64_t i = 0; i < dims[d]; ++i) next.push_back(base + i * strides[d]);
    offsets = std::move(next);
  }
  return offsets;
}

// Which dims a reduction folds, and the output shape that follows.
struct ReducePlan {
  std::vector<bool> reduced;  // per input dim
  Shape out_shape;
};

ReducePlan plan_reduce(const Node& node, const Shape& in_shape, const std::vector<int64_t>& axes, bool keepdims,
                       bool noop_when_empty) {
  const int64_t rank = static_cast<int64_t>(in_shape.size());
  ReducePlan plan;
  plan.reduced.assign(in_shape.size(), axes.empty() && !noop_when_empty);
  for (int64_t axis : axes) {
    int64_t a = normalize_axis(node, axis, rank);
    if (plan.reduced[static_cast<size_t>(a)]) throw Error("axis " + std::to_string(axis) + " is listed twice");
    plan.reduced[static_cast<size_t>(a)] = true;
  }
  for (size_t d = 0; d < in_shape.size(); ++d) {
    if (!plan.reduced[d]) plan.out_shape.push_back(in_shape[d]);
    else if (keepdims) plan.out_shape.push_back(1);
  }
  return plan;
}

// Offsets of the first element of each reduction (in output order) and of each element
// within one reduction, relative to that first element.
std::pair<std::vector<int64_t>, std::vector<int64_t>> split_offsets(const Shape& in_shape, const std::vector<bool>& reduced) {
  std::vector<int64_t> strides = strides_of(in_shape), kept_strides, red_strides;
  Shape kept_dims, red_dims;
  for (size_t d = 0; d < in_shape.size(); ++d) {
    (reduced[d] ? red_dims : kept_dims).push_back(in_shape[d]);
    (reduced[d] ? red_strides : kept_strides).push_back(strides[d]);
  }
  return {walk_offsets(kept_dims, kept_strides), walk_offsets(red_dims, red_strides)};
}

// The axes list: from the optional second input when the node has one (ReduceSum-13 and
// every reduction from opset 18), else from the attribute (earlier opsets).
std::vector<int64_t> axes_of(const Node& node, const Tensor* axes_input) {
  if (axes_input) {
    if (node.has_attr("axes")) throw Error("axes is given both as attribute and as input");
    if (axes_input->rank() > 1) throw Error("axes input must be 1-D, got " + shape_str(axes_input->shape()));
    if (axes_input->dtype() != DType::i64 && axes_input->dtype() != DType::i32)
      throw Error("axes input must be int64, got " + std::string(dtype_name(axes_input->dtype())));
    return axes_input->to_i64();
  }
  return node.attr_ints("axes");
}

ReduceKind reduce_kind(const std::string& op_type) {
  static const std::pair<const char*, ReduceKind> kinds[] = {
      {"ReduceMean", ReduceKind::mean},     {"ReduceSum", ReduceKind::sum},
      {"ReduceMax", ReduceKind::max},       {"ReduceMin", ReduceKind::min},
      {"ReduceProd", ReduceKind::prod},     {"ReduceL1", ReduceKind::l1},
      {"ReduceL2", ReduceKind::l2},         {"ReduceLogSum", ReduceKind::log_sum},
      {"ReduceLogSumExp", ReduceKind::log_sum_exp}, {"ReduceSumSquare", ReduceKind::sum_square}};
  for (const auto& [name, kind] : kinds)
    if (op_type == name) return kind;
  throw Error("not a reduction: " + op_type);
}

void check_reduce_dtype(DType dtype) {
  if (dtype == DType::boolean || dtype == DType::string || dtype == DType::undefined || dtype == DType::f16)
    throw Unsupported("reduction over " + std::string(dtype_name(dtype)) + " is not supported");
}

void infer_reduce(const Node& node, std::span<const ValueInfo> in, std::span<ValueInfo> out) {
  require_inputs(node, in.size(), 1, 2);
  check_reduce_dtype(in[0].dtype);
  const Tensor* axes_input = has_input(in, 1) ? &constant_input(node, in, 1, "axes") : nullptr;
  std::vector<int64_t> axes = axes_of(node, axes_input);
  ReducePlan plan = plan_reduce(node, in[0].shape, axes, node.attr_int("keepdims", 1) != 0,
                                node.attr_int("noop_with_empty_axes", 0) != 0);
  out[0] = ValueInfo{in[0].dtype, plan.out_shape};
}

// Floats fold in double. Integers fold in uint64, which wraps as two's complement the way
// numpy's int64 does, where a signed accumulator's overflow would be undefined behaviour.
template <class T>
using Accumulator = std::conditional_t<std::is_floating_point_v<T>, double, uint64_t>;

// An integer accumulator read back as the signed or unsigned value it stands for.
template <class T, class Acc>
auto value_of(Acc acc) {
  if constexpr (std::is_integral_v<T> && std::is_signed_v<T>) return static_cast<int64_t>(acc);
  else return acc;
}

template <class T>
T fold(ReduceKind kind, const T* base, const std::vector<int64_t>& offsets) {
  using Acc = Accumulator<T>;
  const auto count = static_cast<int64_t>(offsets.size());
  auto magnitude = [](T x) -> Acc {
    if constexpr (std::is_signed_v<T>) return x < 0 ? Acc(0) - static_cast<Acc>(x) : static_cast<Acc>(x);
    else return static_cast<Acc>(x);
  };
  switch (kind) {
    case ReduceKind::max: {
      T best = std::is_floating_point_v<T> ? -std::numeric_limits<T>::infinity() : std::numeric_limits<T>::lowest();
      // NaN propagates, as numpy's maximum.reduce (ONNX's reference) does.
      for (int64_t o : offsets) best = base[o] > best || base[o] != base[o] ? base[o] : best;
      return best;
    }
    case ReduceKind::min: {
      T best = std::is_floating_point_v<T> ? std::numeric_limits<T>::infinity() : std::numeric_limits<T>::max();
      for (int64_t o : offsets) best = base[o] < best || base[o] != base[o] ? base[o] : best;
      return best;
    }
    case ReduceKind::prod: {
      Acc acc = 1;
      for (int64_t o : offsets) acc *= static_cast<Acc>(base[o]);
      return static_cast<T>(value_of<T>(acc));
    }
    case ReduceKind::log_sum_exp: {
      // Shift by the max so large inputs do not overflow exp.
      double peak = -std::numeric_limits<double>::infinity();
      for (int64_t o : offsets) peak = std::max(peak, static_cast<double>(base[o]));
      if (!std::isfinite(peak)) return elementwise::convert<T>(peak);
      double sum = 0;
      for (int64_t o : offsets) sum += std::exp(static_cast<double>(base[o]) - peak);
      return elementwise::convert<T>(peak + std::log(sum));
    }
    default: break;
  }
  Acc acc = 0;
  for (int64_t o : offsets) {
    T x = base[o];
    if (kind == ReduceKind::l1) acc += magnitude(x);
    else if (kind == ReduceKind::l2 || kind == ReduceKind::sum_square) acc += static_cast<Acc>(x) * static_cast<Acc>(x);
    else acc += static_cast<Acc>(x);
  }
  const auto value = value_of<T>(acc);
  switch (kind) {
    case ReduceKind::mean:
      if constexpr (!std::is_floating_point_v<T>) {
        if (count == 0) return T{0};  // integer 0/0 has no value; floats give NaN like numpy
        return static_cast<T>(value / static_cast<decltype(value)>(count));
      } else {
        return static_cast<T>(acc / static_cast<Acc>(count));
      }
    // A log or sqrt of a wrapped integer sum may be NaN or out of T's range: convert() saturates.
    case ReduceKind::l2: return elementwise::convert<T>(std::sqrt(static_cast<double>(value)));
    case ReduceKind::log_sum: return elementwise::convert<T>(std::log(static_cast<double>(value)));
    default: return static_cast<T>(value);
  }
}

void reference_reduce(const Node& node, std::span<const Tensor* const> in, std::span<Tensor* const> out) {
  const Tensor& x = *in[0];
  std::vector<int64_t> axes = axes_of(node, optional_input(in, 1));
  ReducePlan plan = plan_reduce(node, x.shape(), axes, true, node.attr_int("noop_with_empty_axes", 0) != 0);
  // Plain variables, not a structured binding: the lambdas below capture them (C++20 allows
  // capturing bindings, clang 14 does not).
  const auto offsets = split_offsets(x.shape(), plan.reduced);
  const std::vector<int64_t>& starts = offsets.first;
  const std::vector<int64_t>& members = offsets.second;
  ReduceKind kind = reduce_kind(node.op_type);
  visit_dtype(x.dtype(), [&](auto tag) {
    using T = decltype(tag);
    if constexpr (std::is_same_v<T, bool>) {
      throw Unsupported("reduction over bool is not supported");
    } else {
      const T* src = x.data<T>();
      T* dst = out[0]->data<T>();
      for (size_t i = 0; i < starts.size(); ++i) dst[i] = fold<T>(kind, src + starts[i], members);
    }
  });
}

// ArgMax / ArgMin: int64 indices along one axis; ties go to the first index unless
// select_last_index asks for the last.
struct ArgPlan {
  int64_t axis;
  Shape out_shape;
};

ArgPlan plan_arg(const Node& node, const Shape& in_shape) {
  int64_t axis = normalize_axis(node, node.attr_int("axis", 0), static_cast<int64_t>(in_shape.size()));
  if (in_shape[static_cast<size_t>(axis)] == 0) throw Error("cannot take " + node.op_type + " over an empty axis");
  ReducePlan plan = plan_reduce(node, in_shape, {axis}, node.attr_int("keepdims", 1) != 0, false);
  return {axis, plan.out_shape};
}

void infer_arg(const Node& node, std::span<const ValueInfo> in, std::span<ValueInfo> out) {
  require_inputs(node, in.size(), 1, 1);
  check_reduce_dtype(in[0].dtype);
  out[0] = ValueInfo{DType::i64, plan_arg(node, in[0].shape).out_shape};
}

void reference_arg(const Node& node, std::span<const Tensor* const> in, std::span<Tensor* const> out) {
  const Tensor& x = *in[0];
  ArgPlan plan = plan_arg(node, x.shape());
  std::vector<bool> reduced(x.shape().size(), false);
  reduced[static_cast<size_t>(plan.axis)] = true;
  const auto offsets = split_offsets(x.shape(), reduced);  // not a binding: captured below
  const std::vector<int64_t>& starts = offsets.first;
  const std::vector<int64_t>& members = offsets.second;
  const bool want_max = node.op_type == "ArgMax";
  const bool last = node.attr_int("select_last_index", 0) != 0;
  int64_t* dst = out[0]->data<int64_t>();
  visit_dtype(x.dtype(), [&](auto tag) {
    using T = decltype(tag);
    const T* src = x.data<T>();
    for (size_t i = 0; i < starts.size(); ++i) {
      const T* base = src + starts[i];
      int64_t best = 0;
      for (int64_t k = 1; k < static_cast<int64_t>(members.size()); ++k) {
        T candidate = base[members[static_cast<size_t>(k)]], current = base[members[static_cast<size_t>(best)]];
        // NaN wins both ways, as in numpy's argmax/argmin: the first NaN (the last with
        // select_last_index), matching ReduceMax/ReduceMin returning NaN.
        const bool candidate_nan = candidate != candidate, current_nan = current != current;
        const bool better = !current_nan && (candidate_nan || (want_max ? candidate > current : candidate < current));
        const bool tie = current_nan ? candidate_nan : candidate == current;
        if (better || (last && tie)) best = k;
      }
      dst[i] = best;
    }
  });
}

}  // namespace

void register_reduce_ops(OpRegistry& registry) {
  for (const char* name : {"ReduceMean", "ReduceSum", "ReduceMax", "ReduceMin", "ReduceProd", "ReduceL1", "ReduceL2",
                           "ReduceLogSum", "ReduceLogSumExp", "ReduceSumSquare"})
    registry.add(name, {.infer = infer_reduce,
                        .reference = reference_reduce,
                        .cost = OpCost::per_input_element,
                        .traits = {.channels = ChannelFlow::reduces}});
  registry.add("ArgMax", {.infer = infer_arg, .reference = reference_arg, .cost = OpCost::per_input_element});
  registry.add("ArgMin", {.infer = infer_arg, .reference = reference_arg, .cost = OpCost::per_input_element});
}

}  // namespace grove
