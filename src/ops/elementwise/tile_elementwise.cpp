// Tile rules of the elementwise family: unary math and activations, broadcasting binary
// ops, comparisons, Where, Clip, PRelu and the variadic Max/Min/Sum/Mean. Any dim may be
// cut; a tile reads the same region of each input, mapped through numpy broadcasting.
//
// The hot float32 ops run on vectorised kernels (kernels/vmath.h) or direct loops over the
// region: Relu, the four arithmetic ops, Erf, Tanh and Sigmoid. Every other op and dtype computes its region by running the op's reference on the
// sub-tensors it reads: elementwise results depend on nothing else, so that is exact and
// keeps one definition of each element function.
#include <algorithm>

#include "kernels/half.h"
#include "kernels/vmath.h"
#include "ops/elementwise/elementwise.h"
#include "ops/op_util.h"
#include "ops/tile_util.h"

namespace grove::tiling {
namespace elementwise_rule {

std::vector<int64_t> cut_anywhere(const Node&, std::span<const ValueInfo>, std::span<const ValueInfo> out) {
  return all_cuttable(out[0].shape);
}

void broadcast_needs(const Node&, std::span<const ValueInfo> in, std::span<const ValueInfo> out,
                     const Region& out_region, std::span<Region> in_regions) {
  for (size_t i = 0; i < in.size(); ++i) {
    if (!in[i].present) {
      in_regions[i] = {};
      continue;
    }
    // Clip's bounds may be [1] under a scalar output: not a broadcast, a whole scalar read.
    in_regions[i] = in[i].shape.size() <= out[0].shape.size() ? broadcast_region(in[i].shape, out_region)
                                                               : full_region(in[i].shape);
  }
}

std::vector<Region> needed_regions(const Node& node, std::span<const Tensor* const> in, std::span<Tensor* const> out,
                                   const Region& out_region) {
  std::vector<ValueInfo> in_infos = infos_of_tensors(in);
  ValueInfo out_info{out[0]->dtype(), out[0]->shape()};
  std::vector<Region> regions(in.size());
  broadcast_needs(node, in_infos, std::span<const ValueInfo>(&out_info, 1), out_region, regions);
  return regions;
}

void run_generic(const Node& node, std::span<const Tensor* const> in, std::span<Tensor* const> out, const Region& out_region, const void*, TileScratch&) {
  check_region(node, out_region, out[0]->shape());
  std::vector<Region> regions = needed_regions(node, in, out, out_region);
  reference_on_subtensors(node, in, out, out_region, regions);
}

bool all_f32(std::span<const Tensor* const> in, std::span<Tensor* const> out) {
  for (const Tensor* t : in)
    if (!t || t->dtype() != DType::f32) return false;
  return out[0]->dtype() == DType::f32;
}

// Offset of an output index in an input read with broadcast strides.
int64_t offset_at(const std::vector<int64_t>& strides, const std::vector<int64_t>& index) {
  int64_t off = 0;
  for (size_t d = 0; d < index.size(); ++d) off += index[d] * strides[d];
  return off;
}

void run_relu(const Node& node, std::span<const Tensor* const> in, std::span<Tensor* const> out, const Region& out_region, const void*, TileScratch& scratch) {
  if (!all_f32(in, out)) return run_generic(node, in, out, out_region, nullptr, scratch);
  check_region(node, out_region, out[0]->shape());
  const float* x = in[0]->data<float>();
  float* y = out[0]->data<float>();
  for_each_run(out[0]->shape(), out_region, [&](int64_t offset, int64_t run) {
    for (int64_t i = offset; i < offset + run; ++i) y[i] = x[i] < 0.0f ? 0.0f : x[i];
  });
}

template <kernels::BinaryOp op>
void run_arith(const Node& node, std::span<const Tensor* const> in, std::span<Tensor* const> out, const Region& out_region, const void*, TileScratch& scratch) {
  if (in.size() != 2 || !all_f32(in, out)) return run_generic(node, in, out, out_region, nullptr, scratch);
  check_region(node, out_region, out[0]->shape());
  const Shape& shape = out[0]->shape();
  const float* a = in[0]->data<float>();
  const float* b = in[1]->data<float>();
  float* y = out[0]->data<float>();
  const kernels::VMathKernels& k = kernels::vmath();
  // Operands shaped like the output, or one value: whole runs of consecutive rows at once.
  const bool a_same = in[0]->shape() == shape, b_same = in[1]->shape() == shape;
  if ((a_same || in[0]->numel() == 1) && (b_same || in[1]->numel() == 1)) {
    const kernels::BinaryForm form = a_same && b_same ? kernels::BinaryForm::vector_vector
                                     : a_same         ? kernels::BinaryForm::vector_scalar
                                     : b_same         ? kernels::BinaryForm::scalar_vector
                                                      : kernels::BinaryForm::vector_vector;
    for_each_run(shape, out_region, [&](int64_t offset, int64_t run) {
      k.binary(op, form, static_cast<size_t>(run), a + (a_same ? offset : 0), b + (b_same ? offset : 0), y + offset);
    });
    return;
  }
  const std::vector<int64_t> sa = broadcast_strides(in[0]->shape(), shape), sb = broadcast_strides(in[1]->shape(), shape);
  const int64_t step_a = sa.empty() ? 0 : sa.back(), step_b = sb.empty() ? 0 : sb.back();
  const int64_t run = out_region.empty() ? 1 : out_region.back().size();
  for_each_row(shape, out_region, [&](int64_t offset, const std::vector<int64_t>& index) {
    const float* pa = a + offset_at(sa, index);
    const float* pb = b + offset_at(sb, index);
    float* py = y + offset;
    const auto n = static_cast<size_t>(run);
    // The common stride patterns (same shape, a row-broadcast or scalar operand) on the
    // vector kernel; anything else (a broadcast column inside the run) element by element.
    if (step_a == 1 && step_b == 1) {
      k.binary(op, kernels::BinaryForm::vector_vector, n, pa, pb, py);
    } else if (step_a == 1 && step_b == 0) {
      k.binary(op, kernels::BinaryForm::vector_scalar, n, pa, pb, py);
    } else if (step_a == 0 && step_b == 1) {
      k.binary(op, kernels::BinaryForm::scalar_vector, n, pa, pb, py);
    } else {
      for (int64_t i = 0; i < run; ++i) k.binary(op, kernels::BinaryForm::vector_vector, 1, pa + i * step_a, pb + i * step_b, py + i);
    }
  });
}

template <kernels::UnaryOp op>
void run_vunary(const Node& node, std::span<const Tensor* const> in, std::span<Tensor* const> out, const Region& out_region, const void*, TileScratch& scratch) {
  if (in.size() != 1 || !all_f32(in, out)) return run_generic(node, in, out, out_region, nullptr, scratch);
  check_region(node, out_region, out[0]->shape());
  const float* x = in[0]->data<float>();
  float* y = out[0]->data<float>();
  const kernels::VMathKernels& k = kernels::vmath();
  for_each_run(out[0]->shape(), out_region,
               [&](int64_t offset, int64_t run) { k.unary(op, static_cast<size_t>(run), x + offset, y + offset); });
}

// One run of a Cast, From to To. Picked once per tile through a pointer, so the region walk is
// compiled once rather than once for each of the 121 dtype pairs (which made this file the
// slowest of the sanitizer build).
using CastRun = void (*)(const std::byte* x, std::byte* y, int64_t offset, int64_t n);

template <class To, class From>
void cast_run(const std::byte* x, std::byte* y, int64_t offset, int64_t n) {
  const From* px = reinterpret_cast<const From*>(x) + offset;
  To* py = reinterpret_cast<To*>(y) + offset;
  for (int64_t i = 0; i < n; ++i) py[i] = elementwise::convert<To, From>(px[i]);
}

CastRun pick_cast_run(DType from, DType to) {
  CastRun picked = nullptr;
  elementwise::dispatch<elementwise::kAny>(from, [&](auto from_tag) {
    elementwise::dispatch<elementwise::kAny>(to, [&](auto to_tag) { picked = &cast_run<decltype(to_tag), decltype(from_tag)>; });
  });
  return picked;
}

// Cast over whole runs of the region: a typed loop per run (dynamically
// quantized models cast every int32 conv output to float), float16 on the conversion
// instructions. bfloat16 and anything the kernels decline go through the reference.
void run_cast(const Node& node, std::span<const Tensor* const> in, std::span<Tensor* const> out, const Region& out_region, const void*, TileScratch& scratch) {
  check_region(node, out_region, out[0]->shape());
  const DType from = in[0]->dtype(), to = out[0]->dtype();
  const Shape& shape = out[0]->shape();
  if (in[0]->shape() != shape) return run_generic(node, in, out, out_region, nullptr, scratch);
  const std::byte* x = in[0]->raw();
  std::byte* y = out[0]->raw();
  if ((from == DType::f32 && to == DType::f16) || (from == DType::f16 && to == DType::f32)) {
    bool done = true;
    for_each_run(shape, out_region, [&](int64_t offset, int64_t run) {
      const auto n = static_cast<size_t>(run);
      done = done && (from == DType::f32
                          ? kernels::convert_f32_to_f16(reinterpret_cast<const float*>(x) + offset,
                                                        reinterpret_cast<uint16_t*>(y) + offset, n)
                          : kernels::convert_f16_to_f32(reinterpret_cast<const uint16_t*>(x) + offset,
                                                        reinterpret_cast<float*>(y) + offset, n));
    });
    if (!done) run_generic(node, in, out, out_region, nullptr, scratch);
    return;
  }
  if (!elementwise::dtype_in_set(from, elementwise::kAny) || !elementwise::dtype_in_set(to, elementwise::kAny))
    return run_generic(node, in, out, out_region, nullptr, scratch);
  const CastRun cast = pick_cast_run(from, to);
  for_each_run(shape, out_region, [&](int64_t offset, int64_t run) { cast(x, y, offset, run); });
}

constexpr const char* kUnaryOps[] = {
    "Sqrt", "Exp", "Log", "Reciprocal", "Floor", "Ceil", "Round", "Sin", "Cos", "Tan", "Asin", "Acos",
    "Atan", "Sinh", "Cosh", "Asinh", "Acosh", "Atanh", "Neg", "Abs", "Sign", "Not", "IsNaN", "IsInf",
    "LeakyRelu", "ThresholdedRelu", "Elu", "Selu", "Celu", "HardSigmoid", "HardSwish",
    "Softplus", "Softsign", "Mish", "Gelu", "Identity"};

constexpr const char* kBroadcastOps[] = {
    "Mod", "Pow", "BitShift", "Max", "Min", "Sum", "Mean", "Equal", "Less", "Greater", "LessOrEqual",
    "GreaterOrEqual", "And", "Or", "Xor", "Where", "PRelu", "Clip"};

}  // namespace elementwise_rule

void add_elementwise_rules(RuleTable& t) {
  using namespace elementwise_rule;
  for (const char* op : kUnaryOps) t[op] = {cut_anywhere, broadcast_needs, run_generic};
  t["Cast"] = {cut_anywhere, broadcast_needs, run_cast};
  for (const char* op : kBroadcastOps) t[op] = {cut_anywhere, broadcast_needs, run_generic};
  t["Relu"] = {cut_anywhere, broadcast_needs, run_relu};
  t["Add"] = {cut_anywhere, broadcast_needs, run_arith<kernels::BinaryOp::add>};
  t["Sub"] = {cut_anywhere, broadcast_needs, run_arith<kernels::BinaryOp::sub>};
  t["Mul"] = {cut_anywhere, broadcast_needs, run_arith<kernels::BinaryOp::mul>};
  t["Div"] = {cut_anywhere, broadcast_needs, run_arith<kernels::BinaryOp::div>};
  t["Erf"] = {cut_anywhere, broadcast_needs, run_vunary<kernels::UnaryOp::erf>};
  t["Tanh"] = {cut_anywhere, broadcast_needs, run_vunary<kernels::UnaryOp::tanh>};
  t["Sigmoid"] = {cut_anywhere, broadcast_needs, run_vunary<kernels::UnaryOp::sigmoid>};
}

}  // namespace grove::tiling
