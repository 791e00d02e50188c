// The channels-last forms of the feature-pruning ops, made by plan/feature_pruning.cpp where
// the pruned map is channels-last (passes/layout_f32.cpp put its conv there). Each computes its
// NCHW twin (feature_pruning.cpp) with the image tensors as [N, H, W, C]:
//  - AttentionKeepNhwc(x) -> keep: the same int64 [N, channels + positions] keep row, position
//    h * W + w; x is channels-last;
//  - ApplyKeepNhwc(x, keep): x and y channels-last;
//  - PrunedConvNhwc(x, w, [bias], [residual], keep): x, the residual and y channels-last; w
//    stays [M, C, kh, kw].
// The references are the twins' on rotated tensors, so both layouts give the same bytes.
#include <cstring>
#include <string_view>

#include "ops/conv/channels_last.h"
#include "ops/evaluate.h"
#include "ops/fused_epilogue.h"
#include "ops/op.h"
#include "ops/op_util.h"
#include "ops/pruning/feature_pruning.h"

namespace grove {

Node nchw_pruning_twin(const Node& node) {
  constexpr std::string_view suffix = "Nhwc";
  Node twin = node;
  if (twin.op_type.ends_with(suffix)) twin.op_type.resize(twin.op_type.size() - suffix.size());
  return twin;
}

namespace {

// The inputs that are images: x, and a PrunedConv's residual.
bool is_image_input(const Node& node, size_t i) {
  return i == 0 || (node.op_type == "PrunedConvNhwc" && i == kEpilogueResidualInput);
}

Shape nchw_of(const Shape& s) { return s.size() == 4 ? Shape{s[0], s[3], s[1], s[2]} : s; }
Shape nhwc_of(const Shape& s) { return s.size() == 4 ? Shape{s[0], s[2], s[3], s[1]} : s; }

std::vector<ValueInfo> rotated_infos(const Node& node, std::span<const ValueInfo> in) {
  std::vector<ValueInfo> nchw(in.begin(), in.end());
  for (size_t i = 0; i < nchw.size(); ++i)
    if (nchw[i].present && is_image_input(node, i)) nchw[i].shape = nchw_of(nchw[i].shape);
  return nchw;
}

void infer_nhwc(const Node& node, std::span<const ValueInfo> in, std::span<ValueInfo> out) {
  for (size_t i = 0; i < in.size(); ++i)
    if (in[i].present && is_image_input(node, i) && in[i].shape.size() != 4)
      throw Error(node.describe() + ": input " + std::to_string(i) + " must be a 4-D [N, H, W, C] map, not " +
                  shape_str(in[i].shape));
  std::vector<ValueInfo> y = infer_node(nchw_pruning_twin(node), rotated_infos(node, in));
  out[0] = y.at(0);
  if (node.op_type != "AttentionKeepNhwc") out[0].shape = nhwc_of(out[0].shape);  // keep rows are not images
}

void reference_nhwc(const Node& node, std::span<const Tensor* const> in, std::span<Tensor* const> out) {
  std::vector<Tensor> rotated;
  rotated.reserve(2);
  std::vector<const Tensor*> nchw(in.begin(), in.end());
  for (size_t i = 0; i < nchw.size(); ++i)
    if (nchw[i] && !nchw[i]->empty() && is_image_input(node, i))
      nchw[i] = &rotated.emplace_back(nhwc_to_nchw(*nchw[i]));
  std::vector<Tensor> y = evaluate_node(nchw_pruning_twin(node), nchw);
  const Tensor back = node.op_type == "AttentionKeepNhwc" ? y.at(0) : nchw_to_nhwc(y.at(0));
  if (back.shape() != out[0]->shape() || back.dtype() != out[0]->dtype())
    throw Error(node.describe() + ": output does not match");
  std::memcpy(out[0]->raw(), back.raw(), back.bytes());
}

// What the NCHW twin counts on the rotated shapes.
int64_t flops_nhwc(const Node& node, std::span<const ValueInfo> in, std::span<const ValueInfo> out) {
  const Node twin = nchw_pruning_twin(node);
  const OpSpec* spec = OpRegistry::builtin().find(twin);
  if (!spec || !spec->flops) return 0;
  std::vector<ValueInfo> y(out.begin(), out.end());
  if (node.op_type != "AttentionKeepNhwc" && !y.empty()) y[0].shape = nchw_of(y[0].shape);
  return spec->flops(twin, rotated_infos(node, in), y);
}

}  // namespace

void register_feature_pruning_nhwc_ops(OpRegistry& r) {
  r.add_internal("AttentionKeepNhwc", {.infer = &infer_nhwc, .reference = &reference_nhwc, .flops = &flops_nhwc, .traits = kChannelsLast});
  r.add_internal("PrunedConvNhwc", {.infer = &infer_nhwc, .reference = &reference_nhwc, .flops = &flops_nhwc, .traits = kChannelsLast});
  r.add_internal("ApplyKeepNhwc", {.infer = &infer_nhwc, .reference = &reference_nhwc, .traits = kChannelsLast});
}

}  // namespace grove
