// The table from op type to TileRule, built once on first use and never changed after.
#include "ops/tiling.h"

#include "ops/op.h"
#include "ops/tile_util.h"

namespace grove {
namespace {

const tiling::RuleTable& rule_table() {
  static const tiling::RuleTable table = [] {
    tiling::RuleTable t;
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
    tiling::add_resize_rules(t);
    return t;
  }();
  return table;
}

}  // namespace

const TileRule* find_tile_rule(const Node& node) {
  const bool internal = node.domain == kGroveDomain;
  if (!internal && !node.domain.empty() && node.domain != "ai.onnx") return nullptr;
  const auto& table = rule_table();
  auto it = table.find(internal ? tiling::internal_rule_key(node.op_type) : node.op_type);
  if (it == table.end()) return nullptr;
  if (it->second.every_output) return node.outputs.empty() || node.outputs[0].empty() ? nullptr : &it->second;
  // A tile computes output 0 only; a second output the graph uses needs the whole-op reference.
  for (size_t i = 1; i < node.outputs.size(); ++i)
    if (!node.outputs[i].empty()) return nullptr;
  return &it->second;
}

std::vector<std::string> tile_rule_keys() {
  std::vector<std::string> keys;
  for (const auto& [key, rule] : rule_table()) keys.push_back(key);
  return keys;
}

}  // namespace grove
