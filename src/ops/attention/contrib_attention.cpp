// The attention family of ONNX Runtime's contrib ops (com.microsoft), as its transformer
// optimizer writes them: Attention (the input projection and the heads in one node),
// MultiHeadAttention (projected query, key and value, separate or packed) and
// RotaryEmbedding. The attention references lay the heads out as [B, N, S, H] with plain
// copies and then run the builtin references of MatMul, Mul, Add, Softmax and MatMul, so the
// math is exactly the unfused graph's. The masks follow ONNX Runtime's CPU kernels: a
// padding position adds mask_filter_value (default -10000) to its score, a causal
// (unidirectional) one adds the lowest float; both are added before the softmax.
#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "ops/contrib_util.h"
#include "ops/op_util.h"

namespace grove {
namespace {

using namespace contrib;

constexpr float kMaskFilterValue = -10000.0f;

int64_t heads_attr(const Node& node) {
  const int64_t n = node.attr_int("num_heads", 0);
  if (n <= 0) throw Error(node.describe() + ": attribute num_heads must be positive");
  return n;
}

int64_t divided(const Node& node, int64_t width, int64_t heads, const char* what) {
  if (width % heads != 0)
    throw Error(node.describe() + ": " + what + " " + std::to_string(width) + " is not divisible by num_heads " +
                std::to_string(heads));
  return width / heads;
}

void require_f32(const Node& node, const ValueInfo& v, const char* what) {
  if (v.dtype != DType::f32) throw Unsupported(node.describe() + ": " + what + " must be float32 (grove runs this op in float32 only)");
}

// The heads of x [B, S, C], columns [offset, offset + N * H), as [B, N, S, H].
Tensor split_heads(const Tensor& x, int64_t offset, int64_t heads, int64_t head) {
  const int64_t B = x.dim(0), S = x.dim(1), C = x.dim(2);
  Tensor out(DType::f32, {B, heads, S, head});
  const float* src = x.data<float>();
  float* dst = out.data<float>();
  for (int64_t b = 0; b < B; ++b)
    for (int64_t n = 0; n < heads; ++n)
      for (int64_t s = 0; s < S; ++s)
        for (int64_t h = 0; h < head; ++h)
          dst[((b * heads + n) * S + s) * head + h] = src[(b * S + s) * C + offset + n * head + h];
  return out;
}

// Part `part` of a packed tensor [B, S, N, P, H] (P = 3 for QKV, 2 for KV) as [B, N, S, H].
Tensor unpack_heads(const Tensor& x, int64_t part) {
  const int64_t B = x.dim(0), S = x.dim(1), N = x.dim(2), P = x.dim(3), H = x.dim(4);
  Tensor out(DType::f32, {B, N, S, H});
  const float* src = x.data<float>();
  float* dst = out.data<float>();
  for (int64_t b = 0; b < B; ++b)
    for (int64_t n = 0; n < N; ++n)
      for (int64_t s = 0; s < S; ++s)
        for (int64_t h = 0; h < H; ++h) dst[((b * N + n) * S + s) * H + h] = src[(((b * S + s) * N + n) * P + part) * H + h];
  return out;
}

// [B, N, S, H] -> [B, S, N * H], the layout of both ops' output.
Tensor merge_heads(const Node& node, const Tensor& x) {
  Node t = step(node, "Transpose", 1, 13);
  set_ints(t, "perm", {0, 2, 1, 3});
  const Tensor y = eval(t, {&x});
  return y.reshaped({x.dim(0), x.dim(2), x.dim(1) * x.dim(3)});
}

// Adds one segment [offset, offset + width) of a bias vector to every row of x [B, S, width].
Tensor add_bias_segment(const Node& node, const Tensor& x, const Tensor* bias, int64_t offset) {
  if (!bias) return x;
  const int64_t width = x.dim(x.rank() - 1);
  const Tensor segment = Tensor::from<float>({width}, bias->span<float>().subspan(static_cast<size_t>(offset), static_cast<size_t>(width)));
  return eval(step(node, "Add", 2, 14), {&x, &segment});
}

// softmax(scale * Q K^T + bias) V for Q [B, N, S, H], K [B, N, T, H], V [B, N, T, Hv] and an
// additive bias broadcasting to [B, N, S, T] (or none): [B, N, S, Hv].
Tensor attend(const Node& node, const Tensor& q, const Tensor& k, const Tensor& v, const Tensor* bias, float scale) {
  Node t = step(node, "Transpose", 1, 13);
  set_ints(t, "perm", {0, 1, 3, 2});
  const Tensor kt = eval(t, {&k});
  Tensor scores = eval(step(node, "MatMul", 2, 13), {&q, &kt});
  const Tensor s = Tensor::scalar<float>(scale);
  scores = eval(step(node, "Mul", 2, 14), {&scores, &s});
  if (bias) scores = eval(step(node, "Add", 2, 14), {&scores, bias});
  Node softmax = step(node, "Softmax", 1, 13);
  set_i(softmax, "axis", -1);
  const Tensor probs = eval(softmax, {&scores});
  return eval(step(node, "MatMul", 2, 13), {&probs, &v});
}

float scale_of(const Node& node, int64_t head) {
  const float scale = node.attr_float("scale", 0.0f);
  return scale == 0.0f ? 1.0f / std::sqrt(static_cast<float>(head)) : scale;
}

// The mask forms both ops accept, checked against B, S and T (P: past length).
enum class MaskForm { none, end, end_start, raw_2d, raw_3d };

MaskForm mask_form(const Node& node, const ValueInfo* mask, int64_t B, int64_t S, int64_t L, int64_t P, bool mha) {
  if (!mask || !mask->present) return MaskForm::none;
  if (mask->dtype != DType::i32) throw Unsupported(node.describe() + ": the mask must be int32");
  const Shape& m = mask->shape;
  const int64_t T = P + L;
  if (m.size() == 1 && m[0] == B) return MaskForm::end;
  if (!mha && m.size() == 1 && m[0] == 2 * B) return MaskForm::end_start;
  if (m.size() == 2 && m[0] == B && m[1] == T) return MaskForm::raw_2d;
  // Attention's broadcast leftover [B or 1, 1]: the same value everywhere, no mask.
  if (!mha && m.size() == 2 && (m[0] == B || m[0] == 1) && m[1] == 1) return MaskForm::none;
  if (m.size() == 3 && m[0] == B && m[1] == S && m[2] == T) return MaskForm::raw_3d;
  if (mha && m.size() == 1 && m[0] == 3 * B + 2)
    throw Unsupported(node.describe() + ": key_padding_mask of shape [3 * batch + 2] is not supported");
  if (mha && m.size() == 2 && m[0] == B && m[1] == L)
    throw Unsupported(node.describe() + ": key_padding_mask [batch, kv_sequence_length] with past_key is not supported; give [batch, past + kv_sequence_length]");
  if (m.size() == 4) throw Unsupported(node.describe() + ": 4-D mask is not supported");
  throw Error(node.describe() + ": mask of shape " + shape_str(m) + " fits none of [" + std::to_string(B) + "], " +
              (mha ? "" : "[" + std::to_string(2 * B) + "], ") + "[" + std::to_string(B) + ", " + std::to_string(T) + "], [" +
              std::to_string(B) + ", " + std::to_string(S) + ", " + std::to_string(T) + "]");
}

// The additive mask [B, 1, S, T] of the padding mask and the causal mask, or an empty tensor
// when neither applies. ONNX Runtime applies the causal mask only when S > 1: a query at s
// sees keys up to P + s.
Tensor additive_mask(const Node& node, MaskForm form, const Tensor* mask, int64_t B, int64_t S, int64_t T, int64_t P,
                     bool unidirectional) {
  const bool causal = unidirectional && S > 1;
  if (form == MaskForm::none && !causal) return Tensor();
  const float filter = node.attr_float("mask_filter_value", kMaskFilterValue);
  Tensor out(DType::f32, {B, 1, S, T});
  float* o = out.data<float>();
  const int32_t* m = mask ? mask->data<int32_t>() : nullptr;
  for (int64_t b = 0; b < B; ++b)
    for (int64_t s = 0; s < S; ++s)
      for (int64_t t = 0; t < T; ++t) {
        bool padded = false;
        if (form == MaskForm::end || form == MaskForm::end_start) padded = t >= m[b];
        if (form == MaskForm::end_start) padded = padded || t < m[B + b];
        if (form == MaskForm::raw_2d) padded = m[b * T + t] <= 0;
        if (form == MaskForm::raw_3d) padded = m[(b * S + s) * T + t] <= 0;
        float v = padded ? filter : 0.0f;
        if (causal && t > P + s) v = std::numeric_limits<float>::lowest();
        o[(b * S + s) * T + t] = v;
      }
  return out;
}

// The mask and the attention bias [B or 1, N or 1, S, T] as one additive bias.
Tensor combined_bias(const Node& node, const Tensor& mask, const Tensor* attention_bias) {
  if (!attention_bias) return mask;
  if (mask.empty()) return *attention_bias;
  return eval(step(node, "Add", 2, 14), {attention_bias, &mask});
}

void check_attention_bias(const Node& node, const ValueInfo* bias, int64_t B, int64_t N, int64_t S, int64_t T) {
  if (!bias || !bias->present) return;
  require_f32(node, *bias, "attention_bias");
  const Shape& s = bias->shape;
  if (s.size() != 4 || (s[0] != B && s[0] != 1) || (s[1] != N && s[1] != 1) || s[2] != S || s[3] != T)
    throw Error(node.describe() + ": attention_bias has shape " + shape_str(s) + ", expected [" + std::to_string(B) +
                " or 1, " + std::to_string(N) + " or 1, " + std::to_string(S) + ", " + std::to_string(T) + "]");
}

const ValueInfo* info_at(std::span<const ValueInfo> in, size_t i) { return has_input(in, i) ? &in[i] : nullptr; }

// ---- Attention(input, weights, bias, mask_index?, past?, attention_bias?, past_sequence_length?) --

struct AttentionDims {
  int64_t B = 0, S = 0, N = 0, Dq = 0, Dk = 0, Dv = 0;
  MaskForm mask = MaskForm::none;
};

AttentionDims attention_dims(const Node& node, std::span<const ValueInfo> in) {
  require_inputs(node, in.size(), 3, 7);
  if (has_input(in, 4)) throw Unsupported(node.describe() + ": past state (input 4) is not supported");
  if (has_input(in, 6)) throw Unsupported(node.describe() + ": past_sequence_length (input 6) is not supported");
  if (node.attr_int("do_rotary", 0) != 0) throw Unsupported(node.describe() + ": do_rotary=1 is not supported");
  if (node.attr_int("past_present_share_buffer", 0) != 0)
    throw Unsupported(node.describe() + ": past_present_share_buffer=1 is not supported");
  only_outputs(node, {});
  require_f32(node, in[0], "input");
  require_f32(node, in[1], "weights");
  const Shape& x = in[0].shape;
  const Shape& w = in[1].shape;
  if (x.size() != 3) throw Error(node.describe() + ": input must be [batch, sequence, input_hidden], got " + shape_str(x));
  if (w.size() != 2 || w[0] != x[2])
    throw Error(node.describe() + ": weights must be [" + std::to_string(x[2]) + ", q + k + v hidden], got " + shape_str(w));
  AttentionDims d;
  d.B = x[0], d.S = x[1], d.N = heads_attr(node);
  const std::vector<int64_t> sizes = node.attr_ints("qkv_hidden_sizes", {});
  if (sizes.empty()) {
    if (w[1] % 3 != 0) throw Error(node.describe() + ": weights' " + std::to_string(w[1]) + " columns do not split in 3");
    d.Dq = d.Dk = d.Dv = w[1] / 3;
  } else {
    if (sizes.size() != 3 || sizes[0] != sizes[1] || sizes[0] + sizes[1] + sizes[2] != w[1])
      throw Error(node.describe() + ": qkv_hidden_sizes must be [d, d, dv] with 2 d + dv = " + std::to_string(w[1]));
    d.Dq = sizes[0], d.Dk = sizes[1], d.Dv = sizes[2];
  }
  divided(node, d.Dq, d.N, "q hidden size");
  divided(node, d.Dv, d.N, "v hidden size");
  if (has_input(in, 2)) {
    require_f32(node, in[2], "bias");
    if (in[2].shape != Shape{w[1]}) throw Error(node.describe() + ": bias must be [" + std::to_string(w[1]) + "], got " + shape_str(in[2].shape));
  }
  d.mask = mask_form(node, info_at(in, 3), d.B, d.S, d.S, 0, false);
  check_attention_bias(node, info_at(in, 5), d.B, d.N, d.S, d.S);
  return d;
}

void infer_attention(const Node& node, std::span<const ValueInfo> in, std::span<ValueInfo> out) {
  const AttentionDims d = attention_dims(node, in);
  for (ValueInfo& o : out) o = ValueInfo{DType::undefined, {}, nullptr, false};
  out[0] = ValueInfo{DType::f32, {d.B, d.S, d.Dv}, nullptr, true};
}

void reference_attention(const Node& node, std::span<const Tensor* const> in, std::span<Tensor* const> out) {
  std::vector<ValueInfo> infos;
  for (const Tensor* t : in) infos.push_back(t ? ValueInfo{t->dtype(), t->shape(), nullptr, true} : ValueInfo{DType::undefined, {}, nullptr, false});
  const AttentionDims d = attention_dims(node, infos);
  Tensor qkv = eval(step(node, "MatMul", 2, 13), {in[0], in[1]});
  if (const Tensor* bias = optional_input(in, 2)) qkv = eval(step(node, "Add", 2, 14), {&qkv, bias});
  const int64_t hq = d.Dq / d.N, hv = d.Dv / d.N;
  const Tensor q = split_heads(qkv, 0, d.N, hq), k = split_heads(qkv, d.Dq, d.N, hq), v = split_heads(qkv, 2 * d.Dq, d.N, hv);
  const Tensor mask = additive_mask(node, d.mask, optional_input(in, 3), d.B, d.S, d.S, 0, node.attr_int("unidirectional", 0) != 0);
  const Tensor bias = combined_bias(node, mask, optional_input(in, 5));
  put(node, out[0], merge_heads(node, attend(node, q, k, v, bias.empty() ? nullptr : &bias, scale_of(node, hq))));
}

// ---- MultiHeadAttention(query, key?, value?, bias?, key_padding_mask?, attention_bias?,
//      past_key?, past_value?) -> output, present_key?, present_value? ------------------------
// Forms: query [B, S, D] with key [B, L, D] and value [B, L, Dv] (bias [D + D + Dv] added to
// each); query [B, S, D] with key and value already in heads [B, N, L, H] (no bias, no past);
// query [B, S, D] with packed key [B, L, N, 2, H]; packed query [B, S, N, 3, H] alone.

enum class MhaForm { separate, heads_kv, packed_kv, packed_qkv };

struct MhaDims {
  MhaForm form = MhaForm::separate;
  int64_t B = 0, S = 0, L = 0, P = 0, N = 0, H = 0, Hv = 0;
  MaskForm mask = MaskForm::none;
};

MhaDims mha_dims(const Node& node, std::span<const ValueInfo> in) {
  require_inputs(node, in.size(), 1, 8);
  only_outputs(node, {1, 2});
  MhaDims d;
  d.N = heads_attr(node);
  const ValueInfo* key = info_at(in, 1);
  const ValueInfo* value = info_at(in, 2);
  const ValueInfo* bias = info_at(in, 3);
  require_f32(node, in[0], "query");
  const Shape& q = in[0].shape;
  if (key) require_f32(node, *key, "key");
  if (value) require_f32(node, *value, "value");
  if (q.size() == 5) {
    if (key || value) throw Error(node.describe() + ": a packed query [batch, sequence, heads, 3, head] takes no key or value");
    if (q[2] != d.N || q[3] != 3) throw Error(node.describe() + ": packed query must be [batch, sequence, " + std::to_string(d.N) + ", 3, head], got " + shape_str(q));
    d.form = MhaForm::packed_qkv, d.B = q[0], d.S = d.L = q[1], d.H = d.Hv = q[4];
  } else if (q.size() == 3) {
    d.B = q[0], d.S = q[1], d.H = divided(node, q[2], d.N, "query hidden size");
    if (!key) throw Unsupported(node.describe() + ": query [batch, sequence, 3 * hidden] without key is not supported; pack it as [batch, sequence, heads, 3, head]");
    const Shape& k = key->shape;
    if (k.size() == 5) {
      if (value) throw Error(node.describe() + ": a packed key [batch, kv_sequence, heads, 2, head] takes no value");
      if (k[0] != d.B || k[2] != d.N || k[3] != 2 || k[4] != d.H)
        throw Error(node.describe() + ": packed key must be [" + std::to_string(d.B) + ", kv_sequence, " + std::to_string(d.N) + ", 2, " + std::to_string(d.H) + "], got " + shape_str(k));
      if (bias) throw Unsupported(node.describe() + ": bias with a packed key is not supported");
      d.form = MhaForm::packed_kv, d.L = k[1], d.Hv = d.H;
    } else if (k.size() == 3) {
      if (!value || value->shape.size() != 3 || k[0] != d.B || k[2] != q[2] || value->shape[0] != d.B || value->shape[1] != k[1])
        throw Error(node.describe() + ": key must be [" + std::to_string(d.B) + ", kv_sequence, " + std::to_string(q[2]) + "] and value [" + std::to_string(d.B) + ", kv_sequence, v_hidden]");
      d.form = MhaForm::separate, d.L = k[1], d.Hv = divided(node, value->shape[2], d.N, "value hidden size");
    } else if (k.size() == 4) {
      if (!value || value->shape.size() != 4 || k[0] != d.B || k[1] != d.N || k[3] != d.H || value->shape[0] != d.B ||
          value->shape[1] != d.N || value->shape[2] != k[2])
        throw Error(node.describe() + ": key and value in heads must be [" + std::to_string(d.B) + ", " + std::to_string(d.N) + ", kv_sequence, " + std::to_string(d.H) + "] and [.., .., kv_sequence, v_head]");
      if (bias) throw Error(node.describe() + ": bias must be empty when key is 4-D");
      d.form = MhaForm::heads_kv, d.L = k[2], d.Hv = value->shape[3];
    } else {
      throw Error(node.describe() + ": key must have rank 3, 4 or 5, got " + shape_str(k));
    }
  } else {
    throw Error(node.describe() + ": query must have rank 3 or 5, got " + shape_str(q));
  }
  if (bias) {
    require_f32(node, *bias, "bias");
    if (bias->shape != Shape{d.N * (2 * d.H + d.Hv)})
      throw Error(node.describe() + ": bias must be [" + std::to_string(d.N * (2 * d.H + d.Hv)) + "], got " + shape_str(bias->shape));
  }
  const ValueInfo* past_key = info_at(in, 6);
  const ValueInfo* past_value = info_at(in, 7);
  if (!past_key != !past_value) throw Error(node.describe() + ": past_key and past_value go together");
  if (past_key) {
    if (d.form == MhaForm::heads_kv) throw Error(node.describe() + ": past_key must be empty when key is 4-D");
    require_f32(node, *past_key, "past_key");
    require_f32(node, *past_value, "past_value");
    const Shape& pk = past_key->shape;
    if (pk.size() != 4 || pk[0] != d.B || pk[1] != d.N || pk[3] != d.H || past_value->shape != Shape{d.B, d.N, pk[2], d.Hv})
      throw Error(node.describe() + ": past_key and past_value must be [" + std::to_string(d.B) + ", " + std::to_string(d.N) + ", past, " + std::to_string(d.H) + "]");
    d.P = pk[2];
  }
  d.mask = mask_form(node, info_at(in, 4), d.B, d.S, d.L, d.P, true);
  check_attention_bias(node, info_at(in, 5), d.B, d.N, d.S, d.P + d.L);
  return d;
}

void infer_mha(const Node& node, std::span<const ValueInfo> in, std::span<ValueInfo> out) {
  const MhaDims d = mha_dims(node, in);
  for (ValueInfo& o : out) o = ValueInfo{DType::undefined, {}, nullptr, false};
  out[0] = ValueInfo{DType::f32, {d.B, d.S, d.N * d.Hv}, nullptr, true};
  const int64_t T = d.P + d.L;
  if (output_named(node, 1)) out[1] = ValueInfo{DType::f32, {d.B, d.N, T, d.H}, nullptr, true};
  if (output_named(node, 2)) out[2] = ValueInfo{DType::f32, {d.B, d.N, T, d.Hv}, nullptr, true};
}

void reference_mha(const Node& node, std::span<const Tensor* const> in, std::span<Tensor* const> out) {
  std::vector<ValueInfo> infos;
  for (const Tensor* t : in) infos.push_back(t ? ValueInfo{t->dtype(), t->shape(), nullptr, true} : ValueInfo{DType::undefined, {}, nullptr, false});
  const MhaDims d = mha_dims(node, infos);
  const Tensor* bias = optional_input(in, 3);
  const int64_t D = d.N * d.H;
  Tensor q, k, v;
  if (d.form == MhaForm::packed_qkv) {
    q = unpack_heads(*in[0], 0), k = unpack_heads(*in[0], 1), v = unpack_heads(*in[0], 2);
    if (bias) {
      // The bias segments [D | D | Dv] as [1, N, 1, H] per part, to add to heads-first tensors.
      auto part_bias = [&](int64_t offset, int64_t head) {
        return Tensor::from<float>({1, d.N, 1, head}, bias->span<float>().subspan(static_cast<size_t>(offset), static_cast<size_t>(d.N * head)));
      };
      const Tensor bq = part_bias(0, d.H), bk = part_bias(D, d.H), bv = part_bias(2 * D, d.Hv);
      q = eval(step(node, "Add", 2, 14), {&q, &bq});
      k = eval(step(node, "Add", 2, 14), {&k, &bk});
      v = eval(step(node, "Add", 2, 14), {&v, &bv});
    }
  } else {
    q = split_heads(add_bias_segment(node, *in[0], bias, 0), 0, d.N, d.H);
    if (d.form == MhaForm::separate) {
      k = split_heads(add_bias_segment(node, *in[1], bias, D), 0, d.N, d.H);
      v = split_heads(add_bias_segment(node, *in[2], bias, 2 * D), 0, d.N, d.Hv);
    } else if (d.form == MhaForm::packed_kv) {
      k = unpack_heads(*in[1], 0), v = unpack_heads(*in[1], 1);
    } else {
      k = *in[1], v = *in[2];
    }
  }
  if (const Tensor* past_key = optional_input(in, 6)) {
    Node cat = step(node, "Concat", 2, 13);
    set_i(cat, "axis", 2);
    k = eval(cat, {past_key, &k});
    v = eval(cat, {optional_input(in, 7), &v});
  }
  const int64_t T = d.P + d.L;
  const Tensor mask = additive_mask(node, d.mask, optional_input(in, 4), d.B, d.S, T, d.P, node.attr_int("unidirectional", 0) != 0);
  const Tensor all_bias = combined_bias(node, mask, optional_input(in, 5));
  put(node, out[0], merge_heads(node, attend(node, q, k, v, all_bias.empty() ? nullptr : &all_bias, scale_of(node, d.H))));
  if (out.size() > 1) put(node, out[1], k);
  if (out.size() > 2) put(node, out[2], v);
}

// ---- RotaryEmbedding(input, position_ids, cos_cache, sin_cache) -----------------------------
// input [B, S, N * H] or [B, N, S, H]; position_ids [B, S], or one value p (positions p + s);
// caches [max_positions, R / 2]. The first R dims of each head rotate (pairs (i, i + R/2), or
// (2i, 2i + 1) when interleaved); the rest pass through.

struct RotaryDims {
  int64_t B = 0, S = 0, N = 0, H = 0, R = 0, M = 0;
  bool heads_first = false, one_position = false;
};

RotaryDims rotary_dims(const Node& node, std::span<const ValueInfo> in) {
  require_inputs(node, in.size(), 4, 4);
  only_outputs(node, {});
  if (node.attr_int("is_packed_batching", 0) != 0) throw Unsupported(node.describe() + ": is_packed_batching=1 is not supported");
  require_f32(node, in[0], "input");
  require_f32(node, in[2], "cos_cache");
  require_f32(node, in[3], "sin_cache");
  if (in[1].dtype != DType::i64) throw Error(node.describe() + ": position_ids must be int64");
  const Shape& x = in[0].shape;
  const Shape& c = in[2].shape;
  if (x.size() != 3 && x.size() != 4) throw Error(node.describe() + ": input must have rank 3 or 4, got " + shape_str(x));
  if (c.size() != 2 || in[3].shape != c) throw Error(node.describe() + ": cos_cache and sin_cache must be the same [max_positions, rotary_dim / 2]");
  RotaryDims d;
  d.heads_first = x.size() == 4;
  d.B = x[0], d.S = d.heads_first ? x[2] : x[1], d.M = c[0];
  const int64_t hidden = d.heads_first ? x[1] * x[3] : x[2];
  const int64_t rotary = node.attr_int("rotary_embedding_dim", 0);
  int64_t heads = node.attr_int("num_heads", 0);
  if (rotary > 0 && heads <= 0) throw Error(node.describe() + ": num_heads must be given with rotary_embedding_dim");
  if (d.heads_first && heads > 0 && heads != x[1])
    throw Error(node.describe() + ": num_heads " + std::to_string(heads) + " does not match input " + shape_str(x));
  // Without rotary_embedding_dim the whole head rotates and the cache width gives its size.
  d.H = rotary > 0 ? divided(node, hidden, heads, "hidden size") : 2 * c[1];
  if (d.H <= 0 || hidden % d.H != 0) throw Error(node.describe() + ": head size " + std::to_string(d.H) + " does not divide hidden size " + std::to_string(hidden));
  d.N = hidden / d.H;
  if (heads > 0 && heads != d.N)
    throw Error(node.describe() + ": num_heads " + std::to_string(heads) + " with head size " + std::to_string(d.H) + " does not fit hidden size " + std::to_string(hidden));
  if (d.heads_first && d.N != x[1]) throw Error(node.describe() + ": cache width " + std::to_string(c[1]) + " does not fit input " + shape_str(x));
  d.R = rotary > 0 ? rotary : d.H;
  if (d.R > d.H || d.R % 2 != 0 || c[1] != d.R / 2)
    throw Error(node.describe() + ": rotary dim " + std::to_string(d.R) + " needs an even size up to head size " + std::to_string(d.H) + " and caches [.., " + std::to_string(d.R / 2) + "], got " + shape_str(c));
  const Shape& p = in[1].shape;
  d.one_position = numel(p) == 1 && p.size() <= 1;
  if (!d.one_position && p != Shape{d.B, d.S})
    throw Error(node.describe() + ": position_ids must hold one value or be [" + std::to_string(d.B) + ", " + std::to_string(d.S) + "], got " + shape_str(p));
  return d;
}

void infer_rotary(const Node& node, std::span<const ValueInfo> in, std::span<ValueInfo> out) {
  rotary_dims(node, in);
  out[0] = ValueInfo{DType::f32, in[0].shape, nullptr, true};
}

void reference_rotary(const Node& node, std::span<const Tensor* const> in, std::span<Tensor* const> out) {
  std::vector<ValueInfo> infos;
  for (const Tensor* t : in) infos.push_back(ValueInfo{t->dtype(), t->shape(), nullptr, true});
  const RotaryDims d = rotary_dims(node, infos);
  const bool interleaved = node.attr_int("interleaved", 0) != 0;
  const float* x = in[0]->data<float>();
  const int64_t* pos = in[1]->data<int64_t>();
  const float* cos_cache = in[2]->data<float>();
  const float* sin_cache = in[3]->data<float>();
  Tensor y(DType::f32, in[0]->shape());
  float* o = y.data<float>();
  const int64_t half = d.R / 2;
  for (int64_t b = 0; b < d.B; ++b)
    for (int64_t s = 0; s < d.S; ++s) {
      const int64_t p = d.one_position ? pos[0] + s : pos[b * d.S + s];
      if (p < 0 || p >= d.M)
        throw Error(node.describe() + ": position " + std::to_string(p) + " is outside the caches' " + std::to_string(d.M) + " positions");
      const float* cos_p = cos_cache + p * half;
      const float* sin_p = sin_cache + p * half;
      for (int64_t n = 0; n < d.N; ++n) {
        const int64_t base = d.heads_first ? ((b * d.N + n) * d.S + s) * d.H : ((b * d.S + s) * d.N + n) * d.H;
        const float* xi = x + base;
        float* yi = o + base;
        for (int64_t i = 0; i < half; ++i) {
          // The pair (a, c) rotates by the angle whose cosine and sine the caches hold.
          const int64_t ia = interleaved ? 2 * i : i, ic = interleaved ? 2 * i + 1 : i + half;
          const double a = xi[ia], c = xi[ic], cs = cos_p[i], sn = sin_p[i];
          yi[ia] = static_cast<float>(a * cs - c * sn);
          yi[ic] = static_cast<float>(c * cs + a * sn);
        }
        for (int64_t i = d.R; i < d.H; ++i) yi[i] = xi[i];
      }
    }
  put(node, out[0], y);
}

}  // namespace

void register_microsoft_attention_ops(OpRegistry& r) {
  r.add_microsoft("Attention", {infer_attention, reference_attention});
  r.add_microsoft("MultiHeadAttention", {infer_mha, reference_mha});
  r.add_microsoft("RotaryEmbedding", {infer_rotary, reference_rotary});
}

}  // namespace grove
