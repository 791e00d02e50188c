// Comparisons and logic with bool outputs (Equal, Less, ..., And, Or, Xor) and Where.
#include "ops/elementwise/elementwise.h"

namespace grove::elementwise {
namespace {

void where_infer(const Node& node, std::span<const ValueInfo> in, std::span<ValueInfo> out) {
  require_inputs(node, in.size(), 3, 3);
  require_dtype(node, in[0].dtype, kBool, "condition");
  require_dtype(node, in[1].dtype, kAny, "X");
  if (in[2].dtype != in[1].dtype)
    throw Error(node.describe() + ": X has dtype " + std::string(dtype_name(in[1].dtype)) + " but Y has " +
                std::string(dtype_name(in[2].dtype)));
  out[0].dtype = in[1].dtype;
  out[0].shape = broadcast_shapes(node, broadcast_shapes(node, in[0].shape, in[1].shape), in[2].shape);
}

void where_reference(const Node&, std::span<const Tensor* const> in, std::span<Tensor* const> out) {
  dispatch<kAny>(in[1]->dtype(), [&](auto tag) {
    using T = decltype(tag);
    const bool* condition = in[0]->data<bool>();
    const T* x = in[1]->data<T>();
    const T* y = in[2]->data<T>();
    T* po = out[0]->data<T>();
    for_each_broadcast<3>(out[0]->shape(), {&in[0]->shape(), &in[1]->shape(), &in[2]->shape()},
                          [&](int64_t i, const std::array<int64_t, 3>& off) { po[i] = condition[off[0]] ? x[off[1]] : y[off[2]]; });
  });
}

}  // namespace

void register_compare_logic_ops(OpRegistry& r) {
  r.add("Equal", predicate_op<kAny>([](auto a, auto b) { return a == b; }));
  r.add("Less", predicate_op<kNumeric>([](auto a, auto b) { return a < b; }));
  r.add("Greater", predicate_op<kNumeric>([](auto a, auto b) { return a > b; }));
  r.add("LessOrEqual", predicate_op<kNumeric>([](auto a, auto b) { return a <= b; }));
  r.add("GreaterOrEqual", predicate_op<kNumeric>([](auto a, auto b) { return a >= b; }));
  r.add("And", predicate_op<kBool>([](bool a, bool b) { return a && b; }));
  r.add("Or", predicate_op<kBool>([](bool a, bool b) { return a || b; }));
  r.add("Xor", predicate_op<kBool>([](bool a, bool b) { return a != b; }));
  r.add("Where", OpSpec{&where_infer, &where_reference});
}

}  // namespace grove::elementwise
