// The op tables agree: everything the importer, the planner, the passes and the runtime may
// look up for a registered op is there (ops/op.h OpSpec).
#include <gtest/gtest.h>

#include "ops/op.h"
#include "ops/op_names.h"
#include "ops/tiling.h"
#include "ops/tile_util.h"

namespace grove {
namespace {

const char* const kOpDomains[] = {"", kGroveDomain, kMicrosoftDomain, kTrainingDomain};

TEST(OpRegistry, EveryOpHasShapeInferenceAndAReference) {
  for (const char* domain : kOpDomains)
    for (const auto& [name, spec] : OpRegistry::builtin().domain_ops(domain)) {
      EXPECT_NE(spec.infer, nullptr) << domain << "::" << name;
      EXPECT_NE(spec.reference, nullptr) << domain << "::" << name;
    }
}

TEST(OpRegistry, EveryTileRuleBelongsToARegisteredOp) {
  const OpRegistry& registry = OpRegistry::builtin();
  const std::string internal_prefix = tiling::internal_rule_key("");
  size_t with_rule = 0;
  for (const char* domain : kOpDomains)
    for (const auto& [name, spec] : registry.domain_ops(domain)) with_rule += spec.tile_rule != nullptr;
  const std::vector<std::string> keys = tile_rule_keys();
  EXPECT_EQ(keys.size(), with_rule);
  EXPECT_GT(keys.size(), 90u);
  for (const std::string& key : keys) {
    const bool internal = key.rfind(internal_prefix, 0) == 0;
    const OpSpec* spec = registry.find(internal ? kGroveDomain : "", internal ? key.substr(internal_prefix.size()) : key);
    ASSERT_NE(spec, nullptr) << key;
    EXPECT_NE(spec->tile_rule, nullptr) << key;
  }
}

// The planner sizes tiles by FLOPs (plan.cpp), so an op whose rule packs weights at plan
// time (a GEMM, a convolution) counted as one operation per output element would be cut too
// coarsely: such ops must give their own formula.
TEST(OpRegistry, OpsWithPackedWeightsCountTheirProducts) {
  for (const char* domain : kOpDomains)
    for (const auto& [name, spec] : OpRegistry::builtin().domain_ops(domain))
      if (spec.tile_rule && spec.tile_rule->prepare) EXPECT_NE(spec.flops, nullptr) << domain << "::" << name;
}

TEST(OpRegistry, LooksUpByDomain) {
  const OpRegistry& registry = OpRegistry::builtin();
  EXPECT_NE(registry.find("", "Conv"), nullptr);
  EXPECT_EQ(registry.find("", "Conv"), registry.find("ai.onnx", "Conv"));
  EXPECT_EQ(registry.find("", "ConvNhwc"), nullptr);  // internal ops are not ONNX's
  EXPECT_NE(registry.find(kGroveDomain, "ConvNhwc"), nullptr);
  EXPECT_EQ(registry.find("my.domain", "Conv"), nullptr);
}

// ops/op_names.h is where code outside src/ops names an op; a name there that no family
// registers (a typo, a removed op) would make its pattern never match.
TEST(OpRegistry, EveryNamedOpIsRegistered) {
  const OpRegistry& registry = OpRegistry::builtin();
  for (std::string_view name : kOnnxOpNames) EXPECT_NE(registry.find("", std::string(name)), nullptr) << name;
  for (std::string_view name : kInternalOpNames)
    EXPECT_NE(registry.find(kGroveDomain, std::string(name)), nullptr) << name;
  // The importer folds Constant nodes into initializers, so nothing may rely on a spec for one.
  EXPECT_EQ(registry.find("", std::string(kConstant)), nullptr);
}

}  // namespace
}  // namespace grove
