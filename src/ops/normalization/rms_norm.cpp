// RMSNormalization (opset 23): shape rules and reference. See ops/normalization/rms_norm.h.
#include "ops/normalization/rms_norm.h"

#include "ops/op.h"
#include "ops/op_util.h"

namespace grove {
namespace {

// The normalised dims [axis, rank) hold `cols` elements of each of `rows` rows.
struct RmsPlan {
  int64_t rows = 1, cols = 1;
};

RmsPlan plan_rms(const Node& node, const Shape& x) {
  if (node.attr_int("stash_type", 1) != 1) throw Unsupported(node.describe() + ": stash_type other than 1 is not supported");
  const auto axis = static_cast<size_t>(normalize_axis(node, node.attr_int("axis", -1), static_cast<int64_t>(x.size())));
  RmsPlan p;
  for (size_t d = 0; d < x.size(); ++d) (d < axis ? p.rows : p.cols) *= x[d];
  return p;
}

void infer_rms(const Node& node, std::span<const ValueInfo> in, std::span<ValueInfo> out) {
  require_inputs(node, in.size(), 2, 2);
  if (in[0].dtype != DType::f32 || in[1].dtype != DType::f32)
    throw Unsupported(node.describe() + ": only float32 X and scale are supported");
  plan_rms(node, in[0].shape);
  // Scale must be shaped like the normalised dims (leading 1s aside), or hold one value.
  auto without_leading_ones = [](const Shape& s, size_t from) {
    while (from < s.size() && s[from] == 1) ++from;
    return Shape(s.begin() + static_cast<std::ptrdiff_t>(from), s.end());
  };
  const auto axis = static_cast<size_t>(normalize_axis(node, node.attr_int("axis", -1), static_cast<int64_t>(in[0].shape.size())));
  const bool fits = in[1].shape.size() <= in[0].shape.size() &&
                    (numel(in[1].shape) == 1 || without_leading_ones(in[1].shape, 0) == without_leading_ones(in[0].shape, axis));
  if (!fits)
    throw Unsupported(node.describe() + ": scale " + shape_str(in[1].shape) + " must hold one value per normalised element or one value");
  out[0] = ValueInfo{DType::f32, in[0].shape};
}

void reference_rms(const Node& node, std::span<const Tensor* const> in, std::span<Tensor* const> out) {
  const RmsPlan p = plan_rms(node, in[0]->shape());
  const double epsilon = node.attr_float("epsilon", 1e-5f);
  const bool per_element = in[1]->numel() == p.cols;
  for (int64_t r = 0; r < p.rows; ++r)
    rms_norm_row(in[0]->data<float>() + r * p.cols, in[1]->data<float>(), per_element, p.cols, epsilon,
                 out[0]->data<float>() + r * p.cols);
}

}  // namespace

void register_rms_norm_op(OpRegistry& registry) { registry.add("RMSNormalization", {infer_rms, reference_rms}); }

}  // namespace grove
