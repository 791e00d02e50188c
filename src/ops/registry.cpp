#include "ops/op.h"

#include "ops/tile_util.h"

namespace grove {

const std::map<std::string, OpSpec>& OpRegistry::domain_ops(const std::string& domain) const {
  if (domain == kGroveDomain) return internal_;
  if (domain == kMicrosoftDomain) return microsoft_;
  if (domain == kTrainingDomain) return training_;
  if (!domain.empty() && domain != "ai.onnx") {
    static const std::map<std::string, OpSpec> kNone;
    return kNone;
  }
  return ops_;
}

const OpSpec* OpRegistry::find(const std::string& domain, const std::string& op_type) const {
  const auto& ops = domain_ops(domain);
  auto it = ops.find(op_type);
  return it == ops.end() ? nullptr : &it->second;
}

const OpSpec* OpRegistry::find(const Node& node) const { return find(node.domain, node.op_type); }

void OpRegistry::attach_tile_rules() {
  tiling::RuleTable& t = rule_tables_;
  tiling::add_elementwise_rules(t);
  tiling::add_conv_rules(t);
  tiling::add_pool_rules(t);
  tiling::add_matmul_rules(t);
  tiling::add_row_rules(t);
  tiling::add_movement_rules(t);
  tiling::add_reshape_rules(t);
  tiling::add_attention_rules(t);
  tiling::add_quant_matmul_rules(t);
  tiling::add_conv_integer_rules(t);
  tiling::add_quant_conv_nhwc_rules(t);
  tiling::add_conv_nhwc_rules(t);
  tiling::add_conv_nchwc_rules(t);
  tiling::add_dwconv_nhwc_rules(t);
  tiling::add_expand_depthwise_rules(t);
  tiling::add_conv_max_pool_rules(t);
  tiling::add_pool_nhwc_rules(t);
  tiling::add_recurrent_rules(t);
  tiling::add_quant_elementwise_rules(t);
  tiling::add_pruned_conv_rules(t);
  tiling::add_pruned_conv_nhwc_rules(t);
  tiling::add_resize_rules(t);
  const std::string internal_prefix = tiling::internal_rule_key("");
  for (const auto& [key, rule] : rule_tables_) {
    const bool internal = key.rfind(internal_prefix, 0) == 0;
    auto& ops = internal ? internal_ : ops_;
    auto it = ops.find(internal ? key.substr(internal_prefix.size()) : key);
    if (it == ops.end()) throw Error("tile rule '" + key + "' names an op no family registered");
    if (it->second.tile_rule) throw Error("op '" + key + "' has two tile rules");
    it->second.tile_rule = &rule;
  }
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
    register_group_norm_op(r);
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
    register_feature_pruning_nhwc_ops(r);
    register_conv_integer_scaled_ops(r);
    r.attach_tile_rules();
    return r;
  }();
  return registry;
}

}  // namespace grove
