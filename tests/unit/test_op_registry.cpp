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

bool starts_with(const std::string& s, std::string_view prefix) { return s.rfind(prefix, 0) == 0; }
bool ends_with(const std::string& s, std::string_view suffix) {
  return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

// `grove plan --json` and the tuner's layout links read an internal op's layout from its
// traits; the layout passes name their ops by the layout they create.
TEST(OpRegistry, InternalOpsDeclareTheLayoutTheirNameSays) {
  for (const char* domain : kOpDomains)
    for (const auto& [name, spec] : OpRegistry::builtin().domain_ops(domain)) {
      const bool internal = std::string(domain) == kGroveDomain;
      const OpLayout named = !internal               ? OpLayout::nchw
                             : ends_with(name, "Nhwc")  ? OpLayout::nhwc
                             : ends_with(name, "Nchwc") ? OpLayout::nchwc
                                                        : OpLayout::nchw;
      EXPECT_EQ(spec.traits.layout, named) << domain << "::" << name;
    }
}

// The planner shares a view's buffer with its input (plan/plan_views.cpp): the reshapes that
// exporters write everywhere must be views, and a view only relabels bytes.
TEST(OpRegistry, ReshapesAreViews) {
  const OpRegistry& registry = OpRegistry::builtin();
  for (const char* op : {"Reshape", "Flatten", "Squeeze", "Unsqueeze"}) EXPECT_TRUE(registry.find("", op)->traits.view) << op;
  for (const char* domain : kOpDomains)
    for (const auto& [name, spec] : registry.domain_ops(domain))
      if (spec.traits.view) {
        EXPECT_EQ(std::string(domain), "") << name;
        EXPECT_EQ(spec.cost, OpCost::moves_data) << name;
      }
}

// The channel follower (dynamic/channel_flow.cpp) follows channels by the op's ChannelFlow, and
// only through default-domain ops.
TEST(OpRegistry, ChannelFlowsAreDeclared) {
  for (const char* domain : kOpDomains)
    for (const auto& [name, spec] : OpRegistry::builtin().domain_ops(domain)) {
      const ChannelFlow flow = spec.traits.channels;
      if (std::string(domain) != "") {
        EXPECT_EQ(flow, ChannelFlow::stops) << domain << "::" << name;
        continue;
      }
      EXPECT_EQ(flow == ChannelFlow::reduces, starts_with(name, "Reduce")) << name;
      // An activation a conv applies per output element keeps each channel to itself.
      if (spec.as_epilogue) {
        EXPECT_EQ(flow, ChannelFlow::per_channel) << name;
      }
    }
  const OpRegistry& registry = OpRegistry::builtin();
  for (const char* op : {"Add", "Sub", "Mul", "Div", "PRelu"}) EXPECT_EQ(registry.find("", op)->traits.channels, ChannelFlow::broadcast) << op;
}

// `grove bench --precision int8` quantizes a float model, and leaves one that is already
// quantized alone (cli/int8_model.cpp): every static-quantization form must say so.
TEST(OpRegistry, StaticQuantizationFormsAreMarked) {
  for (const char* domain : kOpDomains)
    for (const auto& [name, spec] : OpRegistry::builtin().domain_ops(domain)) {
      const bool form = std::string(domain) == "" && (starts_with(name, "QLinear") || ends_with(name, "Integer") ||
                                                       name == "QuantizeLinear" || name == "DequantizeLinear");
      EXPECT_EQ(spec.traits.static_quant, form) << domain << "::" << name;
    }
}

}  // namespace
}  // namespace grove
