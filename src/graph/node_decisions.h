#pragma once
// What the planner decided for one node, as typed fields the compiler checks: the Conv
// primitive, the precision its products run in, where its x and y lie (layout), and the
// epilogue a fusion pass joined to it. Node holds one by value (graph.h), so every copy of a
// node (passes, split parts of a fused node, subgraphs) carries its decisions, and a model
// cannot set any: ONNX attributes never reach this record, and onnx/import.cpp refuses
// attribute names starting with "grove_", which are reserved for grove.
//
// Writers: plan/node_choice.cpp (the primitive), plan/precision.cpp (precision, bf16 storage),
// passes/fuse_epilogue.cpp, fuse_qdq.cpp, layout_int8.cpp (the epilogue), passes/layout_f32.cpp
// (a stem's NCHW x, the Winograd layers), plan/plan_views.cpp (a y written into a Concat).
// Readers: the ops' references and tile rules, the passes that must leave a decided node
// alone, and `grove plan` (--json prints every node's record, cli/cmd_plan.cpp).
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>

namespace grove {

struct Node;

// A Conv's primitive, chosen by a rule, a tuning record or the performance model. `unset`:
// the tile rule's own choice.
enum class ConvPrimitive : uint8_t {
  unset,
  gemm,
  winograd,
  direct,
  nhwc,                // the channels-last row GEMM (passes/layout_f32.cpp)
  nchwc,               // channel-blocked (passes/layout_nchwc.cpp)
  winograd_nhwc,       // channels-last Winograd F(4x4, 3x3)
  winograd_f2x3_nhwc,  // channels-last Winograd F(2x2, 3x3)
};
// "gemm", "winograd", ... as tuning records and `grove plan` write them; "" for unset.
const char* conv_primitive_name(ConvPrimitive p);
// The primitive a name means; nullopt for an unknown name ("" is unset).
std::optional<ConvPrimitive> parse_conv_primitive(const std::string& name);
// The choices that run a conv channels-last: the row GEMM and the two Winograd forms.
inline bool channels_last_choice(ConvPrimitive p) {
  return p == ConvPrimitive::nhwc || p == ConvPrimitive::winograd_nhwc || p == ConvPrimitive::winograd_f2x3_nhwc;
}

// The unit a Conv, MatMul or Gemm node runs its products on (plan/precision.cpp). Both bf16
// units round the same way.
enum class NodePrecision : uint8_t {
  f32,
  bf16,      // AVX512-BF16 dot products
  bf16_amx,  // the AMX tile unit
  int8_weights,  // int8 weights with a scale per column, float activations and sums
};
const char* node_precision_name(NodePrecision p);  // "fp32", "bf16", "bf16_amx", "int8w"

// The activation of a fused epilogue (kernels/epilogue.h runs them); alpha and beta are its
// parameters as the unfused op had them.
enum class FusedActivation : uint8_t {
  none,
  relu,
  clip,
  leaky_relu,
  sigmoid,
  hard_sigmoid,
  hard_swish,
  gelu_erf,
  gelu_tanh,
  swish,
};
const char* fused_activation_name(FusedActivation a);  // "" for none
// The activation a name means; nullopt for an unknown name ("" is none).
std::optional<FusedActivation> parse_fused_activation(const std::string& name);

// A fused epilogue's inputs on a Conv, MatMul or Gemm node (passes/fuse_epilogue.cpp): input 2
// the per-output-column bias of a MatMul (Conv and Gemm already have one there), input 3 a
// residual shaped like the output, added before the activation. The node keeps its op type,
// so every consumer of op types (tile rules, FLOP counts, importers' checks) keeps working.
inline constexpr size_t kEpilogueBiasInput = 2;
inline constexpr size_t kEpilogueResidualInput = 3;

// Where a decision came from: the planner's hand rules (priced with this machine's probes where
// they take them), the performance model's prediction, a stored tuning record, or candidates
// measured on this machine (`grove tune`, which hands its choices to the plan explicitly).
enum class DecisionSource : uint8_t { rule, model, record, probe };
const char* decision_source_name(DecisionSource s);

// The epilogue a fusion pass joined to a node (the inputs it adds are above).
// An empty `fused` means none: the node is plain ONNX.
struct FusedEpilogue {
  FusedActivation activation = FusedActivation::none;
  float alpha = 0;
  float beta = 0;
  // What was fused, for people: "Add+Relu" makes the op read "Conv+Add+Relu".
  std::string fused;
  // What the fused nodes counted in graph_flops, so fusion keeps a model's FLOPs.
  int64_t fused_flops = 0;
  // A QLinearConvNhwc with a residual QLinearAdd fused (passes/layout_int8.cpp): relu when the
  // add's Relu came along.
  FusedActivation residual_activation = FusedActivation::none;

  bool operator==(const FusedEpilogue&) const = default;
};

// The decisions for one computation: a node, or one part of a fused node.
struct Decisions {
  ConvPrimitive conv = ConvPrimitive::unset;
  DecisionSource conv_source = DecisionSource::rule;
  NodePrecision precision = NodePrecision::f32;
  // A channels-last conv on AMX whose y the plan stores as bfloat16, because every reader is
  // such a conv too (plan/precision.cpp): ConvNhwc's shape rule reads it for y's dtype.
  bool output_bf16 = false;
  // A ConvNhwc whose x is NCHW [N, C, H, W]: a stem on an image, whose row copies gather the
  // few channels themselves, so the image needs no Transpose before it (passes/layout_f32.cpp).
  bool x_nchw = false;
  // Where a ConvNhwc writes into a channels-last Concat's buffer (TileRule::writes_channel_slice):
  // the first channel of its y there; nullopt: y is its own tensor (plan/plan_views.cpp).
  std::optional<int64_t> y_channel_offset;
  FusedEpilogue epilogue;

  bool operator==(const Decisions&) const = default;
};

// A node's decisions, and those of the nodes a fused node joined (each part keeps what was
// decided for it): the expand conv and project conv of ExpandDepthwiseNhwc and
// InvertedResidualNhwc (ops/conv_fused/expand_depthwise.h) and the max pool of ConvMaxPoolNhwc
// (ops/conv_fused/conv_max_pool.h). The node's own decisions are its main part's.
struct NodeDecisions : Decisions {
  std::optional<Decisions> expand;
  std::optional<Decisions> project;
  std::optional<Decisions> pool;

  bool operator==(const NodeDecisions&) const = default;
  // Nothing decided: a node as the model wrote it.
  bool empty() const { return *this == NodeDecisions{}; }
};

// Readers for the rules and passes.
ConvPrimitive conv_primitive_choice(const Node& node);
bool runs_in_bf16(const Node& node);
bool runs_on_amx(const Node& node);
bool stores_bf16(const Node& node);
bool reads_x_nchw(const Node& node);
int64_t y_channel_offset(const Node& node);
const FusedEpilogue& fused_epilogue(const Node& node);
bool has_fused_epilogue(const Node& node);
// "Conv+Add+Relu" for a fused node, the op type otherwise.
std::string op_label(const Node& node);

}  // namespace grove
