#pragma once
// The op types that code outside src/ops names: a pass that recognises one pattern of ops
// (ReduceMean -> Sub -> Mul -> ReduceMean for LayerNormalization), creates a node, or chooses
// a kernel for one op. Each name is written once, here, so a misspelt name is a compile error
// rather than a pattern that silently never matches, and `git grep kLayerNormalization` finds
// every user. A question about what kind of op a node is (works per channel, is a view, is
// quantized) is a field of OpTraits (ops/op.h) instead, which each family sets.
//
// The lists are X-macros so that OpRegistryTest can check every name against the registry.
#include <string_view>

// Default-domain (ONNX) ops.
#define GROVE_ONNX_OP_NAMES(X)                                                                        \
  X(Add) X(BatchNormalization) X(Cast) X(Concat) X(Conv) X(ConvInteger) X(DequantizeLinear) X(Div)    \
  X(Dropout) X(Erf) X(Expand) X(Flatten) X(Gemm) X(GlobalAveragePool) X(Identity) X(If) X(LayerNormalization)  \
  X(Log) X(LogSoftmax) X(Loop) X(MatMul) X(MatMulInteger) X(MaxPool) X(Mul) X(Pow) X(QLinearConv)     \
  X(QLinearMatMul) X(QuantizeLinear) X(RMSNormalization) X(Reciprocal) X(ReduceMean) X(Relu)          \
  X(Reshape)                                                                                          \
  X(SequenceMap) X(Shape) X(Sigmoid) X(Size) X(Slice) X(Softmax) X(Split) X(Sqrt) X(Sub) X(Tanh)      \
  X(Transpose) X(Unsqueeze) X(Where)

// grove.internal ops (kGroveDomain), which only passes create.
#define GROVE_INTERNAL_OP_NAMES(X)                                                                 \
  X(ApplyKeep) X(ApplyKeepNhwc) X(Attention) X(AttentionKeep) X(AttentionKeepNhwc)               \
  X(ConvIntegerScaled) X(ConvMaxPoolNhwc) X(ConvNchwc) X(ConvNhwc) X(DepthwiseConvNhwc)           \
  X(ExpandDepthwiseNhwc) X(GlobalAveragePoolNhwc) X(InvertedResidualNhwc) X(MaxPoolNhwc)          \
  X(PrunedConv) X(PrunedConvNhwc) X(QLinearAdd) X(QLinearConvNhwc)

namespace grove {

#define GROVE_OP_NAME_CONSTANT(name) inline constexpr std::string_view k##name = #name;
GROVE_ONNX_OP_NAMES(GROVE_OP_NAME_CONSTANT)
GROVE_INTERNAL_OP_NAMES(GROVE_OP_NAME_CONSTANT)
#undef GROVE_OP_NAME_CONSTANT

// The importer turns every Constant node into an initializer, so no op spec ever sees one and
// none is registered.
inline constexpr std::string_view kConstant = "Constant";

#define GROVE_OP_NAME_ITEM(name) k##name,
inline constexpr std::string_view kOnnxOpNames[] = {GROVE_ONNX_OP_NAMES(GROVE_OP_NAME_ITEM)};
inline constexpr std::string_view kInternalOpNames[] = {GROVE_INTERNAL_OP_NAMES(GROVE_OP_NAME_ITEM)};
#undef GROVE_OP_NAME_ITEM

}  // namespace grove
