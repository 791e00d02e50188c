// Looking up an op's TileRule: the rules live on the ops' specs (ops/op.h).
#include "ops/tiling.h"

#include "ops/op.h"
#include "ops/tile_util.h"

namespace grove {

const TileRule* find_tile_rule(const Node& node) {
  const OpSpec* spec = OpRegistry::builtin().find(node);
  if (!spec || !spec->tile_rule || (node.domain != kGroveDomain && !node.domain.empty() && node.domain != "ai.onnx"))
    return nullptr;
  const TileRule* rule = spec->tile_rule;
  if (rule->every_output) return node.outputs.empty() || node.outputs[0].empty() ? nullptr : rule;
  // A tile computes output 0 only; a second output the graph uses needs the whole-op reference.
  for (size_t i = 1; i < node.outputs.size(); ++i)
    if (!node.outputs[i].empty()) return nullptr;
  return rule;
}

std::vector<std::string> tile_rule_keys() {
  std::vector<std::string> keys;
  const OpRegistry& registry = OpRegistry::builtin();
  for (const auto& [name, spec] : registry.domain_ops(""))
    if (spec.tile_rule) keys.push_back(name);
  for (const auto& [name, spec] : registry.domain_ops(kGroveDomain))
    if (spec.tile_rule) keys.push_back(tiling::internal_rule_key(name));
  return keys;
}

}  // namespace grove
