// The com.microsoft contrib ops that ONNX Runtime's own tools (its transformer optimizer,
// its quantizers, its fusions) write into models, and SimplifiedLayerNormalization, which
// ONNX Runtime registers in the ONNX domain. Each reference is the same computation spelled
// with standard ONNX ops and run through their references (evaluate_node), so it is as
// obviously right as those; the semantics follow ONNX Runtime's contrib op documentation.
// They run as whole-op tiles; an attribute grove does not implement is an Unsupported error.
// The attention family is in contrib_attention.cpp, DynamicQuantizeLSTM in contrib_lstm.cpp.
#include <algorithm>
#include <cstring>
#include <vector>

#include "ops/contrib_util.h"
#include "ops/evaluate.h"
#include "ops/op.h"
#include "ops/op_util.h"

namespace grove {
namespace {

using namespace contrib;

Tensor scalar_f32(float v) { return Tensor::scalar<float>(v); }

// ---- Gelu, FastGelu, BiasGelu, QuickGelu ------------------------------------------------

Tensor biased(const Node& node, std::span<const Tensor* const> in) {
  const Tensor* bias = optional_input(in, 1);
  return bias ? eval(step(node, "Add", 2, 14), {in[0], bias}) : *in[0];
}

void infer_like_x(const Node& node, std::span<const ValueInfo> in, std::span<ValueInfo> out) {
  require_inputs(node, in.size(), 1, 2);
  if (in[0].dtype != DType::f32) throw Unsupported(node.describe() + ": float32 only");
  out[0] = ValueInfo{in[0].dtype, in[0].shape, nullptr, true};
}

// Gelu (exact, with erf) and BiasGelu: Gelu(X + bias).
void reference_gelu(const Node& node, std::span<const Tensor* const> in, std::span<Tensor* const> out) {
  const Tensor x = biased(node, in);
  put(node, out[0], eval(step(node, "Gelu", 1, 20), {&x}));
}

// FastGelu: the tanh approximation of Gelu(X + bias).
void reference_fast_gelu(const Node& node, std::span<const Tensor* const> in, std::span<Tensor* const> out) {
  const Tensor x = biased(node, in);
  Node gelu = step(node, "Gelu", 1, 20);
  set_s(gelu, "approximate", "tanh");
  put(node, out[0], eval(gelu, {&x}));
}

// QuickGelu: x * sigmoid(alpha * x).
void reference_quick_gelu(const Node& node, std::span<const Tensor* const> in, std::span<Tensor* const> out) {
  const Tensor alpha = scalar_f32(node.attr_float("alpha", 1.702f));
  const Tensor scaled = eval(step(node, "Mul", 2, 14), {in[0], &alpha});
  const Tensor gate = eval(step(node, "Sigmoid", 1, 13), {&scaled});
  put(node, out[0], eval(step(node, "Mul", 2, 14), {in[0], &gate}));
}

// ---- FusedMatMul: alpha * op(A) @ op(B), op transposing the last two dims -------------------

Node last_two_swapped(const Node& node, size_t rank) {
  Node t = step(node, "Transpose", 1, 13);
  Attribute& perm = t.attrs["perm"];
  perm.kind = Attribute::Kind::ints;
  for (size_t d = 0; d < rank; ++d) perm.ints.push_back(static_cast<int64_t>(d));
  std::swap(perm.ints[rank - 1], perm.ints[rank - 2]);
  return t;
}

void check_fused_matmul(const Node& node) {
  if (node.attr_int("transBatchA", 0) != 0 || node.attr_int("transBatchB", 0) != 0)
    throw Unsupported(node.describe() + ": transBatchA and transBatchB are not supported");
}

void infer_fused_matmul(const Node& node, std::span<const ValueInfo> in, std::span<ValueInfo> out) {
  require_inputs(node, in.size(), 2, 2);
  check_fused_matmul(node);
  ValueInfo a{in[0].dtype, in[0].shape, nullptr, true}, b{in[1].dtype, in[1].shape, nullptr, true};
  if (node.attr_int("transA", 0) && a.shape.size() >= 2) std::swap(a.shape[a.shape.size() - 1], a.shape[a.shape.size() - 2]);
  if (node.attr_int("transB", 0) && b.shape.size() >= 2) std::swap(b.shape[b.shape.size() - 1], b.shape[b.shape.size() - 2]);
  out[0] = infer1(step(node, "MatMul", 2, 13), {a, b});
}

void reference_fused_matmul(const Node& node, std::span<const Tensor* const> in, std::span<Tensor* const> out) {
  check_fused_matmul(node);
  Tensor a = *in[0], b = *in[1];
  if (node.attr_int("transA", 0) && a.rank() >= 2) a = eval(last_two_swapped(node, static_cast<size_t>(a.rank())), {&a});
  if (node.attr_int("transB", 0) && b.rank() >= 2) b = eval(last_two_swapped(node, static_cast<size_t>(b.rank())), {&b});
  Tensor y = eval(step(node, "MatMul", 2, 13), {&a, &b});
  const float alpha = node.attr_float("alpha", 1.0f);
  if (alpha != 1.0f) {
    const Tensor s = scalar_f32(alpha);
    y = eval(step(node, "Mul", 2, 14), {&y, &s});
  }
  put(node, out[0], y);
}

// ---- SkipLayerNormalization, SkipSimplifiedLayerNormalization, SimplifiedLayerNormalization --
// LayerNorm (or RMSNorm) over the last dim of input + skip (+ bias). Output 3 is that sum (the
// next skip norm of a transformer reads it); the statistics outputs 1 and 2 are not computed.

constexpr float kSkipLayerNormEpsilon = 1e-12f;

void infer_skip_norm(const Node& node, std::span<const ValueInfo> in, std::span<ValueInfo> out) {
  require_inputs(node, in.size(), 3, 5);
  only_outputs(node, {3});
  if (in[0].dtype != DType::f32) throw Unsupported(node.describe() + ": float32 only");
  if (in[1].shape != in[0].shape) throw Error(node.describe() + ": skip " + shape_str(in[1].shape) + " must equal input " + shape_str(in[0].shape));
  for (ValueInfo& o : out) o = ValueInfo{DType::undefined, {}, nullptr, false};
  out[0] = ValueInfo{DType::f32, in[0].shape, nullptr, true};
  if (out.size() > 3 && !node.outputs[3].empty()) out[3] = out[0];
}

template <bool Simplified>
void reference_skip_norm(const Node& node, std::span<const Tensor* const> in, std::span<Tensor* const> out) {
  Tensor sum = eval(step(node, "Add", 2, 14), {in[0], in[1]});
  // SkipLayerNormalization: input, skip, gamma, beta, bias; the simplified form: input, skip, gamma, bias.
  const Tensor* bias = optional_input(in, Simplified ? 3 : 4);
  if (bias) sum = eval(step(node, "Add", 2, 14), {&sum, bias});
  const float epsilon = node.attr_float("epsilon", kSkipLayerNormEpsilon);
  Node norm = step(node, Simplified ? "RMSNormalization" : "LayerNormalization", Simplified ? 2 : 3, Simplified ? 23 : 17);
  set_f(norm, "epsilon", epsilon);
  std::vector<const Tensor*> args = {&sum, in[2]};
  if (!Simplified) args.push_back(optional_input(in, 3));
  if (!Simplified && !args.back()) norm.inputs.pop_back(), args.pop_back();
  put(node, out[0], eval(norm, args));
  if (out.size() > 3) put(node, out[3], sum);
}

void infer_simplified_norm(const Node& node, std::span<const ValueInfo> in, std::span<ValueInfo> out) {
  require_inputs(node, in.size(), 2, 2);
  only_outputs(node, {});
  if (node.attr_int("stash_type", 1) != 1) throw Unsupported(node.describe() + ": stash_type other than 1 is not supported");
  Node rms = step(node, "RMSNormalization", 2, 23);
  rms.attrs = node.attrs;
  out[0] = infer1(rms, {in[0], in[1]});
  for (size_t i = 1; i < out.size(); ++i) out[i] = ValueInfo{DType::undefined, {}, nullptr, false};
}

void reference_simplified_norm(const Node& node, std::span<const Tensor* const> in, std::span<Tensor* const> out) {
  Node rms = step(node, "RMSNormalization", 2, 23);
  rms.attrs = node.attrs;
  put(node, out[0], eval(rms, {in[0], in[1]}));
}

// ---- FusedConv: activation(Conv(X, W, B) + Z) -------------------------------------------------

Node conv_of(const Node& node, size_t inputs) {
  Node conv = step(node, "Conv", inputs, 11);
  conv.attrs = node.attrs;
  conv.attrs.erase("activation");
  conv.attrs.erase("activation_params");
  return conv;
}

void infer_fused_conv(const Node& node, std::span<const ValueInfo> in, std::span<ValueInfo> out) {
  require_inputs(node, in.size(), 2, 4);
  const std::string act = node.attr_string("activation", "");
  static const char* kKnown[] = {"", "Relu", "Tanh", "Sigmoid", "LeakyRelu", "Clip", "HardSigmoid"};
  if (std::find(std::begin(kKnown), std::end(kKnown), act) == std::end(kKnown))
    throw Unsupported(node.describe() + ": activation '" + act + "' is not supported");
  std::vector<ValueInfo> conv_in(in.begin(), in.begin() + std::min<size_t>(in.size(), 3));
  out[0] = infer1(conv_of(node, conv_in.size()), conv_in);
}

void reference_fused_conv(const Node& node, std::span<const Tensor* const> in, std::span<Tensor* const> out) {
  std::vector<const Tensor*> conv_in = {in[0], in[1]};
  if (optional_input(in, 2)) conv_in.push_back(in[2]);
  Node conv = conv_of(node, 3);
  if (conv_in.size() == 2) conv.inputs.pop_back();
  Tensor y = eval(conv, conv_in);
  if (const Tensor* z = optional_input(in, 3)) y = eval(step(node, "Add", 2, 14), {&y, z});
  const std::string act = node.attr_string("activation", "");
  const std::vector<float> p = node.attr_floats("activation_params", {});
  auto param = [&](size_t i, float fallback) { return i < p.size() ? p[i] : fallback; };
  if (act == "Relu" || act == "Tanh" || act == "Sigmoid") y = eval(step(node, act, 1, 13), {&y});
  if (act == "LeakyRelu") {
    Node n = step(node, act, 1, 16);
    set_f(n, "alpha", param(0, 0.01f));
    y = eval(n, {&y});
  }
  if (act == "HardSigmoid") {
    Node n = step(node, act, 1, 6);
    set_f(n, "alpha", param(0, 0.2f)), set_f(n, "beta", param(1, 0.5f));
    y = eval(n, {&y});
  }
  if (act == "Clip") {
    const Tensor lo = scalar_f32(param(0, -3.4e38f)), hi = scalar_f32(param(1, 3.4e38f));
    y = eval(step(node, "Clip", 3, 13), {&y, &lo, &hi});
  }
  put(node, out[0], y);
}

// ---- Quantized: each dequantizes, computes in float32 and quantizes, as the QDQ form would --

Tensor dequantize(const Node& node, const Tensor* x, const Tensor* scale, const Tensor* zero) {
  Node n = step(node, "DequantizeLinear", zero ? 3 : 2, 13);
  return zero ? eval(n, {x, scale, zero}) : eval(n, {x, scale});
}

// Quantizes to `like`'s dtype: the zero point when given, else zero of the input's 8-bit type.
Tensor quantize(const Node& node, const Tensor& y, const Tensor* scale, const Tensor* zero, DType like) {
  Tensor zero_of_type(like, {});
  std::memset(zero_of_type.raw(), 0, zero_of_type.bytes());
  return eval(step(node, "QuantizeLinear", 3, 13), {&y, scale, zero ? zero : &zero_of_type});
}

// MatMulIntegerToFloat(A, B, a_scale, b_scale, a_zero_point?, b_zero_point?, bias?).
Tensor integer_product_to_float(const Node& node, const Tensor* a, const Tensor* b, const Tensor* a_scale,
                                const Tensor* b_scale, const Tensor* a_zero, const Tensor* b_zero, const Tensor* bias) {
  Node mm = step(node, "MatMulInteger", 4, 10);
  std::vector<const Tensor*> args = {a, b, a_zero, b_zero};
  if (!a_zero) mm.inputs[2].clear();
  if (!b_zero) mm.inputs[3].clear();
  Node cast = step(node, "Cast", 1, 13);
  set_i(cast, "to", dtype_to_onnx(DType::f32));
  Tensor y = eval(cast, {evaluate_node(mm, args).data()});
  y = eval(step(node, "Mul", 2, 14), {&y, a_scale});
  y = eval(step(node, "Mul", 2, 14), {&y, b_scale});
  if (bias) y = eval(step(node, "Add", 2, 14), {&y, bias});
  return y;
}

void infer_matmul_integer_to_float(const Node& node, std::span<const ValueInfo> in, std::span<ValueInfo> out) {
  require_inputs(node, in.size(), 4, 7);
  out[0] = infer1(step(node, "MatMul", 2, 13), {ValueInfo{DType::f32, in[0].shape, nullptr, true},
                                                 ValueInfo{DType::f32, in[1].shape, nullptr, true}});
}

void reference_matmul_integer_to_float(const Node& node, std::span<const Tensor* const> in, std::span<Tensor* const> out) {
  put(node, out[0], integer_product_to_float(node, in[0], in[1], in[2], in[3], optional_input(in, 4),
                                             optional_input(in, 5), optional_input(in, 6)));
}

// DynamicQuantizeMatMul(A float, B, b_scale, b_zero_point?, bias?): A quantized to uint8 as
// DynamicQuantizeLinear does, then as MatMulIntegerToFloat.
void infer_dynamic_quantize_matmul(const Node& node, std::span<const ValueInfo> in, std::span<ValueInfo> out) {
  require_inputs(node, in.size(), 3, 5);
  out[0] = infer1(step(node, "MatMul", 2, 13), {ValueInfo{DType::f32, in[0].shape, nullptr, true},
                                                 ValueInfo{DType::f32, in[1].shape, nullptr, true}});
}

void reference_dynamic_quantize_matmul(const Node& node, std::span<const Tensor* const> in, std::span<Tensor* const> out) {
  Node dq = step(node, "DynamicQuantizeLinear", 1, 11);
  dq.outputs = {"y", "scale", "zero"};
  const std::vector<Tensor> q = evaluate_node(dq, std::vector<const Tensor*>{in[0]});
  put(node, out[0], integer_product_to_float(node, &q[0], in[1], &q[1], in[2], &q[2], optional_input(in, 3),
                                             optional_input(in, 4)));
}

// QLinearAdd / QLinearMul(A, A_scale, A_zero, B, B_scale, B_zero, C_scale, C_zero?).
void infer_qlinear_binary(const Node& node, std::span<const ValueInfo> in, std::span<ValueInfo> out) {
  require_inputs(node, in.size(), 7, 8);
  out[0] = ValueInfo{in[0].dtype, broadcast_shapes(node, in[0].shape, in[3].shape), nullptr, true};
}

template <const char* Op>
void reference_qlinear_binary(const Node& node, std::span<const Tensor* const> in, std::span<Tensor* const> out) {
  const Tensor a = dequantize(node, in[0], in[1], in[2]), b = dequantize(node, in[3], in[4], in[5]);
  const Tensor y = eval(step(node, Op, 2, 14), {&a, &b});
  put(node, out[0], quantize(node, y, in[6], optional_input(in, 7), in[0]->dtype()));
}
constexpr char kAdd[] = "Add";
constexpr char kMul[] = "Mul";

// QLinearSigmoid / QLinearLeakyRelu(X, X_scale, X_zero?, Y_scale, Y_zero?).
void infer_qlinear_unary(const Node& node, std::span<const ValueInfo> in, std::span<ValueInfo> out) {
  require_inputs(node, in.size(), 4, 5);
  out[0] = ValueInfo{in[0].dtype, in[0].shape, nullptr, true};
}

template <bool Leaky>
void reference_qlinear_unary(const Node& node, std::span<const Tensor* const> in, std::span<Tensor* const> out) {
  const Tensor x = dequantize(node, in[0], in[1], optional_input(in, 2));
  Node op = step(node, Leaky ? "LeakyRelu" : "Sigmoid", 1, Leaky ? 16 : 13);
  if (Leaky) set_f(op, "alpha", node.attr_float("alpha", 0.01f));
  put(node, out[0], quantize(node, eval(op, {&x}), in[3], optional_input(in, 4), in[0]->dtype()));
}

// QLinearGlobalAveragePool(X, x_scale, x_zero, y_scale, y_zero), NCHW (channels_last 0).
void check_nchw(const Node& node) {
  if (node.attr_int("channels_last", 0) != 0) throw Unsupported(node.describe() + ": channels_last=1 is not supported");
}

void infer_qlinear_global_average_pool(const Node& node, std::span<const ValueInfo> in, std::span<ValueInfo> out) {
  require_inputs(node, in.size(), 5, 5);
  check_nchw(node);
  ValueInfo y = infer1(step(node, "GlobalAveragePool", 1, 1), {ValueInfo{DType::f32, in[0].shape, nullptr, true}});
  out[0] = ValueInfo{in[0].dtype, y.shape, nullptr, true};
}

void reference_qlinear_global_average_pool(const Node& node, std::span<const Tensor* const> in, std::span<Tensor* const> out) {
  check_nchw(node);
  const Tensor x = dequantize(node, in[0], in[1], in[2]);
  put(node, out[0], quantize(node, eval(step(node, "GlobalAveragePool", 1, 1), {&x}), in[3], in[4], in[0]->dtype()));
}

// QLinearAveragePool(X, x_scale, x_zero?, y_scale, y_zero?) with AveragePool's attributes.
Node average_pool_of(const Node& node) {
  Node pool = step(node, "AveragePool", 1, 19);
  pool.attrs = node.attrs;
  pool.attrs.erase("channels_last");
  return pool;
}

void infer_qlinear_average_pool(const Node& node, std::span<const ValueInfo> in, std::span<ValueInfo> out) {
  require_inputs(node, in.size(), 4, 5);
  check_nchw(node);
  ValueInfo y = infer1(average_pool_of(node), {ValueInfo{DType::f32, in[0].shape, nullptr, true}});
  out[0] = ValueInfo{in[0].dtype, y.shape, nullptr, true};
}

void reference_qlinear_average_pool(const Node& node, std::span<const Tensor* const> in, std::span<Tensor* const> out) {
  check_nchw(node);
  const Tensor x = dequantize(node, in[0], in[1], optional_input(in, 2));
  put(node, out[0], quantize(node, eval(average_pool_of(node), {&x}), in[3], optional_input(in, 4), in[0]->dtype()));
}

// QLinearConcat(Y_scale, Y_zero, then (X, X_scale, X_zero) per input; axis).
void infer_qlinear_concat(const Node& node, std::span<const ValueInfo> in, std::span<ValueInfo> out) {
  if (in.size() < 5 || (in.size() - 2) % 3 != 0)
    throw Error(node.describe() + ": takes Y_scale, Y_zero_point, then (X, X_scale, X_zero_point) per input");
  Node cat = step(node, "Concat", (in.size() - 2) / 3, 13);
  cat.attrs = node.attrs;
  std::vector<ValueInfo> xs;
  for (size_t i = 2; i < in.size(); i += 3) xs.push_back(ValueInfo{DType::f32, in[i].shape, nullptr, true});
  out[0] = ValueInfo{in[2].dtype, infer1(cat, xs).shape, nullptr, true};
}

void reference_qlinear_concat(const Node& node, std::span<const Tensor* const> in, std::span<Tensor* const> out) {
  Node cat = step(node, "Concat", (in.size() - 2) / 3, 13);
  cat.attrs = node.attrs;
  std::vector<Tensor> xs;
  for (size_t i = 2; i < in.size(); i += 3) xs.push_back(dequantize(node, in[i], in[i + 1], in[i + 2]));
  std::vector<const Tensor*> args;
  for (const Tensor& x : xs) args.push_back(&x);
  put(node, out[0], quantize(node, eval(cat, args), in[0], in[1], in[2]->dtype()));
}

// ---- EmbedLayerNormalization -------------------------------------------------------------
// (input_ids, segment_ids?, word_embedding, position_embedding, segment_embedding?, gamma,
// beta, mask?, position_ids?) -> output, mask_index?, embedding_sum?: LayerNorm over the sum
// of the three embeddings (positions 0..S-1 unless position_ids [B or 1, S] gives them);
// mask_index counts each row's mask entries equal to 1 (zeros without a mask).

constexpr float kEmbedLayerNormEpsilon = 1e-12f;

void check_ids(const Node& node, const ValueInfo& ids, const Shape& expected, const char* what) {
  if (ids.dtype != DType::i32) throw Unsupported(node.describe() + ": " + what + " must be int32");
  if (ids.shape != expected) throw Error(node.describe() + ": " + what + " has shape " + shape_str(ids.shape) + ", expected " + shape_str(expected));
}

void infer_embed_layer_norm(const Node& node, std::span<const ValueInfo> in, std::span<ValueInfo> out) {
  require_inputs(node, in.size(), 7, 9);
  only_outputs(node, {1, 2});
  const Shape& ids = in[0].shape;
  if (ids.size() != 2) throw Error(node.describe() + ": input_ids must be [batch, sequence], got " + shape_str(ids));
  check_ids(node, in[0], ids, "input_ids");
  if (has_input(in, 1)) check_ids(node, in[1], ids, "segment_ids");
  if (has_input(in, 1) != has_input(in, 4)) throw Error(node.describe() + ": segment_ids and segment_embedding go together");
  if (has_input(in, 7)) check_ids(node, in[7], ids, "mask");
  if (has_input(in, 8) && !(in[8].shape == Shape{1, ids[1]}))
    check_ids(node, in[8], ids, "position_ids");
  if (has_input(in, 8) && in[8].dtype != DType::i32) throw Unsupported(node.describe() + ": position_ids must be int32");
  const Shape& word = in[2].shape;
  if (in[2].dtype != DType::f32 || word.size() != 2) throw Error(node.describe() + ": word_embedding must be float32 [vocabulary, hidden]");
  const int64_t hidden = word[1];
  for (size_t i : {size_t{3}, size_t{4}})
    if (has_input(in, i) && (in[i].dtype != DType::f32 || in[i].shape.size() != 2 || in[i].shape[1] != hidden))
      throw Error(node.describe() + ": input " + std::to_string(i) + " must be float32 [rows, " + std::to_string(hidden) + "]");
  for (size_t i : {size_t{5}, size_t{6}})
    if (!has_input(in, i) || in[i].dtype != DType::f32 || in[i].shape != Shape{hidden})
      throw Error(node.describe() + ": gamma and beta must be float32 [" + std::to_string(hidden) + "]");
  for (ValueInfo& o : out) o = ValueInfo{DType::undefined, {}, nullptr, false};
  out[0] = ValueInfo{DType::f32, {ids[0], ids[1], hidden}, nullptr, true};
  if (out.size() > 1 && !node.outputs[1].empty()) out[1] = ValueInfo{DType::i32, {ids[0]}, nullptr, true};
  if (out.size() > 2 && !node.outputs[2].empty()) out[2] = out[0];
}

// Rows of `table` at `ids`, after checking each id (Gather would wrap a negative one).
Tensor embedding_rows(const Node& node, const Tensor* table, const Tensor& ids, const char* what) {
  const int64_t rows = table->dim(0);
  for (const int32_t id : ids.span<int32_t>())
    if (id < 0 || id >= rows)
      throw Error(node.describe() + ": " + what + " " + std::to_string(id) + " is outside [0, " + std::to_string(rows) + ")");
  return eval(step(node, "Gather", 2, 13), {table, &ids});
}

void reference_embed_layer_norm(const Node& node, std::span<const Tensor* const> in, std::span<Tensor* const> out) {
  const Tensor& ids = *in[0];
  const int64_t B = ids.dim(0), S = ids.dim(1);
  Tensor positions(DType::i32, {B, S});
  const Tensor* given = optional_input(in, 8);
  for (int64_t b = 0; b < B; ++b)
    for (int64_t s = 0; s < S; ++s)
      positions.data<int32_t>()[b * S + s] = given ? given->data<int32_t>()[(given->dim(0) == 1 ? 0 : b) * S + s] : static_cast<int32_t>(s);
  Tensor sum = embedding_rows(node, in[2], ids, "input id");
  const Tensor pos = embedding_rows(node, in[3], positions, "position");
  sum = eval(step(node, "Add", 2, 14), {&sum, &pos});
  if (const Tensor* segments = optional_input(in, 1)) {
    const Tensor seg = embedding_rows(node, in[4], *segments, "segment id");
    sum = eval(step(node, "Add", 2, 14), {&sum, &seg});
  }
  Node norm = step(node, "LayerNormalization", 3, 17);
  set_f(norm, "epsilon", node.attr_float("epsilon", kEmbedLayerNormEpsilon));
  put(node, out[0], eval(norm, {&sum, in[5], in[6]}));
  if (out.size() > 1 && out[1]) {
    Tensor counts(DType::i32, {B});
    const Tensor* mask = optional_input(in, 7);
    for (int64_t b = 0; b < B && mask; ++b)
      counts.data<int32_t>()[b] = static_cast<int32_t>(std::count(mask->data<int32_t>() + b * S, mask->data<int32_t>() + (b + 1) * S, 1));
    put(node, out[1], counts);
  }
  if (out.size() > 2) put(node, out[2], sum);
}

}  // namespace

void register_microsoft_ops(OpRegistry& r) {
  r.add_microsoft("Gelu", {infer_like_x, reference_gelu});
  r.add_microsoft("BiasGelu", {infer_like_x, reference_gelu});
  r.add_microsoft("FastGelu", {infer_like_x, reference_fast_gelu});
  r.add_microsoft("QuickGelu", {infer_like_x, reference_quick_gelu});
  r.add_microsoft("FusedMatMul", {infer_fused_matmul, reference_fused_matmul});
  r.add_microsoft("SkipLayerNormalization", {infer_skip_norm, reference_skip_norm<false>});
  r.add_microsoft("SkipSimplifiedLayerNormalization", {infer_skip_norm, reference_skip_norm<true>});
  r.add_microsoft("FusedConv", {infer_fused_conv, reference_fused_conv});
  r.add_microsoft("MatMulIntegerToFloat", {infer_matmul_integer_to_float, reference_matmul_integer_to_float});
  r.add_microsoft("DynamicQuantizeMatMul", {infer_dynamic_quantize_matmul, reference_dynamic_quantize_matmul});
  r.add_microsoft("QLinearAdd", {infer_qlinear_binary, reference_qlinear_binary<kAdd>});
  r.add_microsoft("QLinearMul", {infer_qlinear_binary, reference_qlinear_binary<kMul>});
  r.add_microsoft("QLinearSigmoid", {infer_qlinear_unary, reference_qlinear_unary<false>});
  r.add_microsoft("QLinearLeakyRelu", {infer_qlinear_unary, reference_qlinear_unary<true>});
  r.add_microsoft("QLinearGlobalAveragePool", {infer_qlinear_global_average_pool, reference_qlinear_global_average_pool});
  r.add_microsoft("QLinearAveragePool", {infer_qlinear_average_pool, reference_qlinear_average_pool});
  r.add_microsoft("QLinearConcat", {infer_qlinear_concat, reference_qlinear_concat});
  r.add_microsoft("EmbedLayerNormalization", {infer_embed_layer_norm, reference_embed_layer_norm});
  register_microsoft_attention_ops(r);
  register_microsoft_lstm_op(r);
  // ONNX Runtime registers this one in the ONNX domain (its transformer optimizer writes it for
  // T5 and LLaMA-style RMSNorm).
  r.add("SimplifiedLayerNormalization", {infer_simplified_norm, reference_simplified_norm});
}

}  // namespace grove
