#pragma once
// An operator is two plain functions: `infer` gives output dtypes and shapes from input
// infos (with input data when it is constant, which Reshape, Slice and friends need), and
// `reference` computes outputs naively. The reference is the oracle every fast path is
// tested against, so it stays obviously correct rather than fast.
//
// Callers guarantee: `in` has one entry per node input ("" inputs are present=false /
// nullptr), `out` one per node output; `reference` outputs are already allocated with the
// dtypes and shapes `infer` returned (nullptr for an optional output the node leaves
// unnamed and infer left undefined). Both throw grove::Error on bad input; the caller
// prefixes the message with the node and op.
#include <map>
#include <optional>
#include <span>
#include <string>

#include "graph/graph.h"
#include "graph/node_decisions.h"
#include "ops/tiling.h"

namespace grove {

using InferFn = void (*)(const Node&, std::span<const ValueInfo> in, std::span<ValueInfo> out);
using ReferenceFn = void (*)(const Node&, std::span<const Tensor* const> in, std::span<Tensor* const> out);
// The op's arithmetic at bound shapes (`in`/`out` as infer saw them; present=false where a
// shape is unknown), not counting a fused epilogue: graph_flops adds what that counted.
using FlopsFn = int64_t (*)(const Node&, std::span<const ValueInfo> in, std::span<const ValueInfo> out);

// How graph_flops counts an op that has no `flops` formula.
enum class OpCost : uint8_t {
  per_output_element,  // one operation per element of output 0: elementwise maths, the default
  moves_data,          // none: the op only moves, copies or reinterprets data
  per_input_element,   // one per element of input 0: reductions and global pools
};

// Everything grove knows of one operator, registered once by the op's family file. Lookups
// by the importer, the planner, the passes and the runtime all go through it, so a new op
// is one registration; OpRegistryTest checks that the tables agree.
// An activation's form as the fused epilogue of the Conv, MatMul or Gemm before it
// (passes/fuse_epilogue.cpp).
struct EpilogueActivation {
  FusedActivation kind = FusedActivation::none;
  float alpha = 0, beta = 0;
};
// nullopt when this node cannot be fused (a Gelu of another approximation, a Clip whose bounds
// are computed at run time). `in` as infer sees it: a constant input carries its data.
using AsEpilogueFn = std::optional<EpilogueActivation> (*)(const Node&, std::span<const ValueInfo> in);

// How a change of a layer's channels (sub-net slicing, `grove tail --apply`;
// dynamic/channel_flow.cpp) is carried through this op. Ops it has its own code for (Conv,
// Gemm, MatMul, Concat, BatchNormalization, Flatten, Reshape, Transpose) leave this at
// `stops`: the follower names them.
enum class ChannelFlow : uint8_t {
  stops,        // slicing cannot follow the channels through the op and asks for the layer's exemption
  per_channel,  // output 0 has input 0's channels, each computed from its own: the kept set passes on
  broadcast,    // elementwise over inputs whose channels line up with the output's (Add, Mul, PRelu)
  reduces,      // a Reduce*: the kept channels pass on unless `axes` reduces the channel axis
};

// The layout an op's image tensors are in. ONNX writes every op channels-first; the other
// layouts belong to grove.internal ops that the layout passes create.
enum class OpLayout : uint8_t {
  nchw,   // channels first, as ONNX has it
  nhwc,   // channels last (the *Nhwc ops)
  nchwc,  // channel blocks innermost (ConvNchwc)
};

// What passes and the planner ask about an op beyond its maths. A pass that needs a new fact
// about ops adds it here and each family sets it where it registers the op, so the pass never
// keeps its own list of op names that a new op would miss.
struct OpTraits {
  ChannelFlow channels = ChannelFlow::stops;
  // Output 0 is input 0's bytes under a shape the op computes (Reshape, Flatten, Squeeze,
  // Unsqueeze): the planner lets it share input 0's buffer (plan/plan_views.cpp).
  bool view = false;
  // One of the forms a statically quantized model is written in (QDQ pairs, QLinear*, *Integer):
  // grove does not quantize a model holding one again (cli/int8_model.cpp). DynamicQuantizeLinear
  // is not one: it quantizes at run time.
  bool static_quant = false;
  // Read by the tuner's layout links (tune/perf_select.cpp) and `grove plan --json`.
  OpLayout layout = OpLayout::nchw;
};

struct OpSpec {
  InferFn infer = nullptr;
  ReferenceFn reference = nullptr;
  FlopsFn flops = nullptr;  // nullptr: counted by `cost`
  OpCost cost = OpCost::per_output_element;
  // How the op's output is cut into tiles (ops/tiling.h); nullptr: one whole-op tile computed
  // by `reference`. Points at a rule that lives as long as the program. The older families
  // add their rules to a table (tile_util.h) which the registry attaches here.
  const TileRule* tile_rule = nullptr;
  // An activation a GEMM or conv can apply to its output in registers; nullptr: not one.
  AsEpilogueFn as_epilogue = nullptr;
  OpTraits traits{};
};

// For a spec a family's helper builds: r.add("Tanh", with_traits(unary_op<...>(...), kPerChannel)).
inline OpSpec with_traits(OpSpec spec, OpTraits traits) {
  spec.traits = traits;
  return spec;
}
inline constexpr OpTraits kPerChannel{.channels = ChannelFlow::per_channel};
inline constexpr OpTraits kBroadcast{.channels = ChannelFlow::broadcast};
inline constexpr OpTraits kView{.view = true};
inline constexpr OpTraits kStaticQuant{.static_quant = true};
inline constexpr OpTraits kChannelsLast{.layout = OpLayout::nhwc};
inline constexpr OpTraits kChannelsBlocked{.layout = OpLayout::nchwc};

// The domain of grove's internal ops, which only graph passes create (e.g. Attention from
// fuse_attention): a name no ONNX model uses for an operator set.
inline constexpr const char* kGroveDomain = "grove.internal";
// ONNX Runtime's contrib ops, which its own tools write into models (contrib_microsoft.cpp).
inline constexpr const char* kMicrosoftDomain = "com.microsoft";
// ONNX's optimizer ops (Adagrad, Adam, Momentum) live in their own domain.
inline constexpr const char* kTrainingDomain = "ai.onnx.preview.training";

class OpRegistry {
 public:
  void add(const std::string& op_type, OpSpec spec) { ops_[op_type] = spec; }
  void add_internal(const std::string& op_type, OpSpec spec) { internal_[op_type] = spec; }
  void add_training(const std::string& op_type, OpSpec spec) { training_[op_type] = spec; }
  void add_microsoft(const std::string& op_type, OpSpec spec) { microsoft_[op_type] = spec; }
  // Default-domain ops, the training-preview optimizers and grove's internal ops; nullptr when
  // grove does not support the op.
  const OpSpec* find(const Node& node) const;
  const OpSpec* find(const std::string& domain, const std::string& op_type) const;
  const std::map<std::string, OpSpec>& all() const { return ops_; }
  // Every op of one domain ("" for ONNX's), for the consistency tests.
  const std::map<std::string, OpSpec>& domain_ops(const std::string& domain) const;

  // Every operator grove ships, built once on first use and never changed after.
  static const OpRegistry& builtin();

 private:
  // Attaches the rules of the tile_util.h tables to their specs; throws when a rule names an
  // op no family registered.
  void attach_tile_rules();

  std::map<std::string, OpSpec> ops_;
  std::map<std::string, TileRule> rule_tables_;  // what attach_tile_rules read, by its keys
  std::map<std::string, OpSpec> internal_;  // domain kGroveDomain
  std::map<std::string, OpSpec> training_;  // domain kTrainingDomain
  std::map<std::string, OpSpec> microsoft_;  // domain kMicrosoftDomain
};

// Each family file in src/ops adds its operators through one of these.
void register_elementwise_ops(OpRegistry&);   // elementwise/elementwise.cpp: arithmetic, math, compare, logic, Where, Cast
void register_activation_ops(OpRegistry&);    // elementwise/activation.cpp: Relu, Sigmoid, Clip, HardSwish, ...
void register_conv_ops(OpRegistry&);          // conv/conv.cpp: Conv, ConvTranspose
void register_pool_ops(OpRegistry&);          // pool/pool.cpp: MaxPool, AveragePool, Global*Pool
void register_normalization_ops(OpRegistry&); // normalization/normalization.cpp: BatchNormalization, LayerNormalization, Softmax
void register_rms_norm_op(OpRegistry&);       // normalization/rms_norm.cpp: RMSNormalization
void register_group_norm_op(OpRegistry&);     // group_norm/: GroupNormalization
void register_linalg_ops(OpRegistry&);        // matmul/linalg.cpp: MatMul, Gemm, Det
void register_reduce_ops(OpRegistry&);        // reduce/reduce.cpp: ReduceMean/Sum/Max/...
void register_shape_ops(OpRegistry&);         // movement/shape.cpp: Reshape, Flatten, Squeeze, Unsqueeze, Shape, Expand, ...
void register_movement_ops(OpRegistry&);      // movement/movement.cpp: Transpose, Concat, Split, Slice, Gather, Pad
void register_resize_ops(OpRegistry&);        // resize/resize.cpp: Resize, Upsample
void register_index_ops(OpRegistry&);         // reduce/index.cpp: TopK, CumSum, GatherND, ScatterND, OneHot, ...
void register_recurrent_ops(OpRegistry&);     // recurrent/recurrent.cpp: LSTM, GRU, RNN (references)
void register_einsum_ops(OpRegistry&);        // matmul/einsum.cpp: Einsum
void register_quantize_ops(OpRegistry&);      // quant/quantize.cpp: QuantizeLinear, DequantizeLinear, DynamicQuantizeLinear
void register_quant_matmul_ops(OpRegistry&);  // matmul/quant_matmul.cpp: MatMulInteger, QLinearMatMul
void register_control_flow_ops(OpRegistry&);  // control_flow/control_flow.cpp: If, Loop, Scan, SequenceMap (run by the executors)
void register_sequence_ops(OpRegistry&);      // control_flow/sequence.cpp: Sequence*, SplitToSequence, ConcatFromSequence, Optional* (run by the executors)
void register_loss_ops(OpRegistry&);          // training/loss.cpp: NegativeLogLikelihoodLoss, SoftmaxCrossEntropyLoss
void register_signal_ops(OpRegistry&);        // signal/signal.cpp: DFT, STFT, the window ops, MelWeightMatrix
void register_vision_ops(OpRegistry&);        // vision/vision.cpp: NonMaxSuppression, RoiAlign, GridSample
void register_select_ops(OpRegistry&);        // movement/select.cpp: Compress, Unique, ReverseSequence
void register_text_ops(OpRegistry&);          // text/text.cpp: TfIdfVectorizer
void register_microsoft_ops(OpRegistry&);     // contrib/contrib_microsoft.cpp: com.microsoft Gelu, SkipLayerNormalization, QLinearAdd, ...
void register_training_ops(OpRegistry&);      // training/training.cpp: Adagrad, Adam, Momentum (ai.onnx.preview.training)
void register_internal_ops(OpRegistry&);      // attention/attention.cpp: grove.internal Attention
void register_quant_add_ops(OpRegistry&);     // quant/quant_add.cpp: grove.internal QLinearAdd
void register_channels_last_ops(OpRegistry&);  // conv/channels_last.cpp: grove.internal QLinearConvNhwc, MaxPoolNhwc
void register_channels_blocked_ops(OpRegistry&);  // conv/channels_blocked.cpp: grove.internal ConvNchwc
void register_expand_depthwise_op(OpRegistry&);  // conv_fused/expand_depthwise.cpp: grove.internal ExpandDepthwiseNhwc, InvertedResidualNhwc
void register_conv_max_pool_op(OpRegistry&);  // conv_fused/conv_max_pool.cpp: grove.internal ConvMaxPoolNhwc
void register_feature_pruning_ops(OpRegistry&);  // pruning/feature_pruning.cpp: grove.internal AttentionKeep, ApplyKeep, PrunedConv
void register_feature_pruning_nhwc_ops(OpRegistry&);  // pruning/feature_pruning_nhwc.cpp: their channels-last forms
void register_conv_integer_scaled_ops(OpRegistry&);  // conv/conv_integer_scaled.cpp: grove.internal ConvIntegerScaled

}  // namespace grove
