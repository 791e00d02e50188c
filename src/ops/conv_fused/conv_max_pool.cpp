#include "ops/conv_fused/conv_max_pool.h"

#include <cstring>
#include <vector>

#include "ops/evaluate.h"
#include "ops/op.h"
#include "ops/op_util.h"

namespace grove {

namespace {
bool pooled(const std::string& key) { return key.compare(0, std::strlen(kPoolPrefix), kPoolPrefix) == 0; }
}  // namespace

Node conv_part(const Node& fused, const std::string& mid) {
  Node c;
  c.op_type = "ConvNhwc";
  c.domain = kGroveDomain;
  c.opset = fused.opset;
  c.name = fused.name;
  c.inputs = fused.inputs;
  c.outputs = {mid};
  for (const auto& [key, value] : fused.attrs)
    if (!pooled(key)) c.attrs[key] = value;
  static_cast<Decisions&>(c.decisions) = fused.decisions;  // the node's own are the conv's
  return c;
}

Node pool_part(const Node& fused, const std::string& mid) {
  Node p;
  p.op_type = "MaxPoolNhwc";
  p.domain = kGroveDomain;
  p.opset = fused.opset;
  p.name = fused.name + "/pool";
  p.inputs = {mid};
  p.outputs = fused.outputs;
  const size_t prefix = std::strlen(kPoolPrefix);
  for (const auto& [key, value] : fused.attrs)
    if (pooled(key)) p.attrs[key.substr(prefix)] = value;
  if (fused.decisions.pool) static_cast<Decisions&>(p.decisions) = *fused.decisions.pool;
  return p;
}

namespace {

void conv_max_pool_check_inputs(const Node& node, size_t count) {
  if (count < 2 || count > 3) throw Error(node.describe() + ": takes x, W and B");
  if (node.outputs.size() != 1) throw Error(node.describe() + ": has one output");
}

void conv_max_pool_infer(const Node& node, std::span<const ValueInfo> in, std::span<ValueInfo> out) {
  conv_max_pool_check_inputs(node, in.size());
  std::vector<ValueInfo> mid = infer_node(conv_part(node), in);
  if (mid.at(0).dtype != DType::f32) throw Unsupported(node.describe() + ": only a float32 conv fuses its max pool");
  mid[0].data = nullptr;
  out[0] = infer_node(pool_part(node), mid).at(0);
}

void conv_max_pool_reference(const Node& node, std::span<const Tensor* const> in, std::span<Tensor* const> out) {
  conv_max_pool_check_inputs(node, in.size());
  const std::vector<Tensor> mid = evaluate_node(conv_part(node), in);
  const std::vector<const Tensor*> pool_in = {&mid.at(0)};
  const std::vector<Tensor> y = evaluate_node(pool_part(node), pool_in);
  if (y.at(0).shape() != out[0]->shape() || y[0].dtype() != out[0]->dtype())
    throw Error(node.describe() + ": output shape does not match");
  std::memcpy(out[0]->raw(), y[0].raw(), y[0].bytes());
}

}  // namespace

void register_conv_max_pool_op(OpRegistry& r) {
  // The pool's compares; the conv's FLOPs are the fused epilogue's.
  r.add_internal("ConvMaxPoolNhwc", {.infer = &conv_max_pool_infer,
                                     .reference = &conv_max_pool_reference,
                                     .flops = [](const Node& node, std::span<const ValueInfo>, std::span<const ValueInfo> out) {
                                       const Shape* y = known_shape(out, 0);
                                       return y ? checked_mul(numel(*y), window_size(node, "pool.kernel_shape")) : int64_t{0};
                                     },
                                     .traits = kChannelsLast});
}

}  // namespace grove
