#include "graph/node_decisions.h"

#include "graph/graph.h"

namespace grove {

namespace {

struct PrimitiveName {
  ConvPrimitive primitive;
  const char* name;
};

constexpr PrimitiveName kPrimitiveNames[] = {
    {ConvPrimitive::unset, ""},
    {ConvPrimitive::gemm, "gemm"},
    {ConvPrimitive::winograd, "winograd"},
    {ConvPrimitive::direct, "direct"},
    {ConvPrimitive::nhwc, "nhwc"},
    {ConvPrimitive::nchwc, "nchwc"},
    {ConvPrimitive::winograd_nhwc, "winograd_nhwc"},
    {ConvPrimitive::winograd_f2x3_nhwc, "winograd_f2x3_nhwc"},
};

}  // namespace

const char* conv_primitive_name(ConvPrimitive p) {
  for (const PrimitiveName& n : kPrimitiveNames)
    if (n.primitive == p) return n.name;
  return "";
}

std::optional<ConvPrimitive> parse_conv_primitive(const std::string& name) {
  for (const PrimitiveName& n : kPrimitiveNames)
    if (name == n.name) return n.primitive;
  return std::nullopt;
}

const char* node_precision_name(NodePrecision p) {
  switch (p) {
    case NodePrecision::f32: return "fp32";
    case NodePrecision::bf16: return "bf16";
    case NodePrecision::bf16_amx: return "bf16_amx";
    case NodePrecision::int8_weights: return "int8w";
  }
  return "fp32";
}

const char* fused_activation_name(FusedActivation a) {
  switch (a) {
    case FusedActivation::none: return "";
    case FusedActivation::relu: return "relu";
    case FusedActivation::clip: return "clip";
    case FusedActivation::leaky_relu: return "leaky_relu";
    case FusedActivation::sigmoid: return "sigmoid";
    case FusedActivation::hard_sigmoid: return "hard_sigmoid";
    case FusedActivation::hard_swish: return "hard_swish";
    case FusedActivation::gelu_erf: return "gelu_erf";
    case FusedActivation::gelu_tanh: return "gelu_tanh";
    case FusedActivation::swish: return "swish";
  }
  return "";
}

std::optional<FusedActivation> parse_fused_activation(const std::string& name) {
  for (FusedActivation a : {FusedActivation::none, FusedActivation::relu, FusedActivation::clip, FusedActivation::leaky_relu,
                            FusedActivation::sigmoid, FusedActivation::hard_sigmoid, FusedActivation::hard_swish,
                            FusedActivation::gelu_erf, FusedActivation::gelu_tanh, FusedActivation::swish})
    if (name == fused_activation_name(a)) return a;
  return std::nullopt;
}

const char* decision_source_name(DecisionSource s) {
  switch (s) {
    case DecisionSource::rule: return "rule";
    case DecisionSource::model: return "model";
    case DecisionSource::record: return "record";
    case DecisionSource::probe: return "probe";
  }
  return "rule";
}

ConvPrimitive conv_primitive_choice(const Node& node) { return node.decisions.conv; }
bool runs_in_bf16(const Node& node) {
  return node.decisions.precision == NodePrecision::bf16 || node.decisions.precision == NodePrecision::bf16_amx;
}
bool runs_on_amx(const Node& node) { return node.decisions.precision == NodePrecision::bf16_amx; }
bool stores_bf16(const Node& node) { return node.decisions.output_bf16; }
bool reads_x_nchw(const Node& node) { return node.decisions.x_nchw; }
int64_t y_channel_offset(const Node& node) { return node.decisions.y_channel_offset.value_or(0); }
const FusedEpilogue& fused_epilogue(const Node& node) { return node.decisions.epilogue; }
bool has_fused_epilogue(const Node& node) { return !node.decisions.epilogue.fused.empty(); }

std::string op_label(const Node& node) {
  return has_fused_epilogue(node) ? node.op_type + "+" + node.decisions.epilogue.fused : node.op_type;
}

}  // namespace grove
