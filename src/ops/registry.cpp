#include "ops/op.h"

namespace grove {

const OpDef* OpRegistry::find(const Node& node) const {
  if (node.domain == kGroveDomain) {
    auto it = internal_.find(node.op_type);
    return it == internal_.end() ? nullptr : &it->second;
  }
  if (node.domain == kMicrosoftDomain) {
    auto it = microsoft_.find(node.op_type);
    return it == microsoft_.end() ? nullptr : &it->second;
  }
  if (node.domain == kTrainingDomain) {
    auto it = training_.find(node.op_type);
    return it == training_.end() ? nullptr : &it->second;
  }
  if (!node.domain.empty() && node.domain != "ai.onnx") return nullptr;
  auto it = ops_.find(node.op_type);
  return it == ops_.end() ? nullptr : &it->second;
}

const OpRegistry& OpRegistry::builtin() {
  static const OpRegistry registry = [] {
    OpRegistry r;
    register_elementwise_ops(r);
    register_activation_ops(r);
    register_conv_ops(r);
    register_pool_ops(r);
    register_normalization_ops(r);
    register_rms_norm_op(r);
    register_linalg_ops(r);
    register_reduce_ops(r);
    register_shape_ops(r);
    register_movement_ops(r);
    register_resize_ops(r);
    register_index_ops(r);
    register_einsum_ops(r);
    register_recurrent_ops(r);
    register_quantize_ops(r);
    register_quant_matmul_ops(r);
    register_control_flow_ops(r);
    register_sequence_ops(r);
    register_loss_ops(r);
    register_signal_ops(r);
    register_vision_ops(r);
    register_select_ops(r);
    register_text_ops(r);
    register_training_ops(r);
    register_microsoft_ops(r);
    register_internal_ops(r);
    register_quant_add_ops(r);
    register_channels_last_ops(r);
    register_channels_blocked_ops(r);
    register_expand_depthwise_op(r);
    register_conv_max_pool_op(r);
    register_feature_pruning_ops(r);
    register_conv_integer_scaled_ops(r);
    return r;
  }();
  return registry;
}

}  // namespace grove
