// grove.internal Attention: the scaled dot-product attention subgraph that
// fuse_attention (src/graph/fuse_attention.cpp) replaces by one node, so a tile can compute
// a block of queries of one head without the whole score tensor.
//
//   inputs:  Q [B, H, S, D], KT [B, H, D, T] (K already transposed; K [B, H, T, D] with
//            attribute key_rows 1), V [B, H, T, Dv],
//            mask (optional, f32, broadcast to [B, H, S, T], added),
//            keep (optional, bool, broadcast to [B, H, S, T]: where false the score is `fill`)
//   attrs:   scale (f32), scale_op ("Mul" or "Div": how the model applied it), fill (f32)
//   output:  softmax(where(keep, (Q . KT) scale_op scale, fill) + mask, last axis) . V
// or, in the sequence-major form (ops/attention/attention.h: attributes heads, head_dim, value_dim,
// q_offset, k_offset, v_offset), Q, K and V as [B, S, C] with the heads side by side and the
// output [B, S, H, Dv]. With key_rows, inputs 5 and 6 (optional, together) are more keys and
// values [B, H, N, D|Dv] after those of inputs 1 and 2 (ops/attention/attention.h).
//
// The reference runs the builtin references of the ops it replaces (MatMul, Mul/Div, Where,
// Add, Softmax, MatMul) in that order on whole tensors: exactly the unfused math, with the
// absorbed Split, Reshape and Transposes done as copies around it.
#include <string>

#include "ops/attention/attention.h"
#include "ops/op.h"
#include "ops/op_util.h"

namespace grove {
namespace {

int64_t positive_attr(const Node& node, const char* key) {
  const int64_t v = node.attr_int(key, 0);
  if (v <= 0) throw Error(node.describe() + ": attribute " + key + " must be positive in the sequence-major form");
  return v;
}

int64_t offset_attr(const Node& node, const char* key, int64_t width, int64_t columns) {
  const int64_t v = node.attr_int(key, 0);
  if (v < 0 || v > columns || width > columns - v)
    throw Error(node.describe() + ": " + key + " " + std::to_string(v) + " leaves no room for " +
                std::to_string(width) + " columns of " + std::to_string(columns));
  return v;
}

void attention_infer(const Node& node, std::span<const ValueInfo> in, std::span<ValueInfo> out) {
  require_inputs(node, in.size(), 3, 7);
  const bool parts = has_input(in, 5) || has_input(in, 6);
  if (parts && !(has_input(in, 5) && has_input(in, 6)))
    throw Error(node.describe() + ": new keys (input 5) and new values (input 6) come together");
  for (size_t i : {0, 1, 2, 5, 6})
    if (i < in.size() && in[i].present && in[i].dtype != DType::f32)
      throw Error(node.describe() + ": Q, K and V must be float32");
  const AttentionLayout l = attention_layout(node, in[0].shape, in[1].shape, in[2].shape, parts ? &in[5].shape : nullptr,
                                             parts ? &in[6].shape : nullptr);
  const Shape scores = l.scores();
  if (in.size() > 3 && in[3].present &&
      (in[3].dtype != DType::f32 || broadcast_shapes(node, in[3].shape, scores) != scores))
    throw Error(node.describe() + ": mask must be float32 and broadcast to " + shape_str(scores));
  if (in.size() > 4 && in[4].present &&
      (in[4].dtype != DType::boolean || broadcast_shapes(node, in[4].shape, scores) != scores))
    throw Error(node.describe() + ": keep must be bool and broadcast to " + shape_str(scores));
  const std::string op = node.attr_string("scale_op", "Mul");
  if (op != "Mul" && op != "Div") throw Error(node.describe() + ": scale_op must be Mul or Div, not " + op);
  out[0].dtype = DType::f32;
  out[0].shape = l.sequence_major ? Shape{l.batch, l.queries, l.heads, l.value_dim}
                                  : Shape{l.batch, l.heads, l.queries, l.value_dim};
}

// Runs the builtin reference of `op_type` on `in` into `out` (allocated by the caller).
void run_step(const Node& fused, const std::string& op_type, std::vector<const Tensor*> in, Tensor& out, Node step = {}) {
  step.name = fused.name;
  step.op_type = op_type;
  step.opset = fused.opset;
  Tensor* outs[] = {&out};
  OpRegistry::builtin().find(step)->reference(step, in, std::span<Tensor* const>(outs));
}

// The head-major math on whole tensors: the builtin references of the replaced ops in order.
void head_major_reference(const Node& node, const Tensor& q, const Tensor& kt, const Tensor& v, const Tensor* mask,
                          const Tensor* keep, Tensor& out) {
  const Shape scores_shape{q.shape()[0], q.shape()[1], q.shape()[2], kt.shape()[3]};
  // Two score buffers, each step reading one and writing the other.
  Tensor a(DType::f32, scores_shape), b(DType::f32, scores_shape);
  run_step(node, "MatMul", {&q, &kt}, a);
  const Tensor scale = Tensor::scalar<float>(node.attr_float("scale", 1.0f));
  run_step(node, node.attr_string("scale_op", "Mul"), {&a, &scale}, b);
  std::swap(a, b);
  if (keep) {
    const Tensor fill = Tensor::scalar<float>(node.attr_float("fill", 0.0f));
    run_step(node, "Where", {keep, &a, &fill}, b);
    std::swap(a, b);
  }
  if (mask) {
    run_step(node, "Add", {&a, mask}, b);
    std::swap(a, b);
  }
  Node softmax;
  Attribute& axis = softmax.attrs["axis"];
  axis.kind = Attribute::Kind::i;
  axis.i = -1;
  run_step(node, "Softmax", {&a}, b, softmax);
  run_step(node, "MatMul", {&b, &v}, out);
}

// Copies between a head-major [B, H, rows, cols] tensor and an operand in layout `o` (the
// Split, Reshape and Transpose the sequence-major form absorbed, done explicitly).
void gather_heads(const float* src, const AttentionLayout::Operand& o, Tensor& dst) {
  const Shape& s = dst.shape();
  float* d = dst.data<float>();
  for (int64_t b = 0; b < s[0]; ++b)
    for (int64_t h = 0; h < s[1]; ++h)
      for (int64_t i = 0; i < s[2]; ++i)
        for (int64_t j = 0; j < s[3]; ++j)
          *d++ = src[o.offset + b * o.batch_stride + h * o.head_stride + i * o.row_stride + j];
}

// K [B, H, T, D] as KT [B, H, D, T] (the Transpose the key_rows and sequence-major forms absorbed).
Tensor transposed_keys(const Tensor& k) {
  const Shape& s = k.shape();
  Tensor kt(DType::f32, {s[0], s[1], s[3], s[2]});
  const int64_t keys = s[2], dim = s[3];
  for (int64_t m = 0; m < s[0] * s[1]; ++m)
    for (int64_t t = 0; t < keys; ++t)
      for (int64_t d = 0; d < dim; ++d)
        kt.data<float>()[(m * dim + d) * keys + t] = k.data<float>()[(m * keys + t) * dim + d];
  return kt;
}

// [B, H, T1, D] then [B, H, T2, D] along the keys: the Concat the parts form absorbed.
Tensor keys_after(const Tensor& first, const Tensor& second) {
  const Shape& a = first.shape();
  const int64_t heads = a[0] * a[1], n1 = a[2] * a[3], n2 = second.shape()[2] * a[3];
  Tensor both(DType::f32, {a[0], a[1], a[2] + second.shape()[2], a[3]});
  float* d = both.data<float>();
  for (int64_t m = 0; m < heads; ++m) {
    d = std::copy_n(first.data<float>() + m * n1, n1, d);
    d = std::copy_n(second.data<float>() + m * n2, n2, d);
  }
  return both;
}

// [B, G, T, D] as [B, G * n, T, D], head h a copy of head h / n: the Unsqueeze, Expand and
// Reshape the kv_group form absorbed.
Tensor repeated_heads(const Tensor& x, int64_t n) {
  const Shape& s = x.shape();
  Tensor out(DType::f32, {s[0], s[1] * n, s[2], s[3]});
  const int64_t head = s[2] * s[3];
  float* d = out.data<float>();
  for (int64_t m = 0; m < s[0] * s[1]; ++m)
    for (int64_t r = 0; r < n; ++r) d = std::copy_n(x.data<float>() + m * head, head, d);
  return out;
}

void attention_reference(const Node& node, std::span<const Tensor* const> in, std::span<Tensor* const> out) {
  const Tensor* mask = optional_input(in, 3);
  const Tensor* keep = optional_input(in, 4);
  const Tensor* k_new = optional_input(in, 5);
  const Tensor* v_new = optional_input(in, 6);
  const AttentionLayout l = attention_layout(node, in[0]->shape(), in[1]->shape(), in[2]->shape(),
                                             k_new ? &k_new->shape() : nullptr, v_new ? &v_new->shape() : nullptr);
  if (!l.sequence_major && !l.keys_as_rows)
    return head_major_reference(node, *in[0], *in[1], *in[2], mask, keep, *out[0]);
  if (!l.sequence_major) {
    Tensor k = l.parts ? keys_after(*in[1], *k_new) : *in[1], v = l.parts ? keys_after(*in[2], *v_new) : *in[2];
    if (l.kv_group > 1) k = repeated_heads(k, l.kv_group), v = repeated_heads(v, l.kv_group);
    return head_major_reference(node, *in[0], transposed_keys(k), v, mask, keep, *out[0]);
  }
  Tensor q(DType::f32, {l.batch, l.heads, l.queries, l.head_dim});
  Tensor k(DType::f32, {l.batch, l.heads, l.keys, l.head_dim});
  Tensor v(DType::f32, {l.batch, l.heads, l.keys, l.value_dim});
  gather_heads(in[0]->data<float>(), l.q, q);
  gather_heads(in[1]->data<float>(), l.k, k);
  gather_heads(in[2]->data<float>(), l.v, v);
  const Tensor kt = transposed_keys(k);
  Tensor ctx(DType::f32, {l.batch, l.heads, l.queries, l.value_dim});
  head_major_reference(node, q, kt, v, mask, keep, ctx);
  const float* c = ctx.data<float>();
  float* y = out[0]->data<float>();
  for (int64_t b = 0; b < l.batch; ++b)
    for (int64_t h = 0; h < l.heads; ++h)
      for (int64_t i = 0; i < l.queries; ++i)
        for (int64_t j = 0; j < l.value_dim; ++j)
          y[l.out.offset + b * l.out.batch_stride + h * l.out.head_stride + i * l.out.row_stride + j] = *c++;
}

}  // namespace

AttentionLayout attention_layout(const Node& node, const Shape& q, const Shape& k, const Shape& v, const Shape* k_new,
                                 const Shape* v_new) {
  AttentionLayout l;
  if ((k_new || v_new) && (!k_new || !v_new || node.attr_int("heads", 0) != 0 || node.attr_int("key_rows", 0) == 0))
    throw Error(node.describe() + ": new keys and values (inputs 5 and 6) come together, in the key_rows form only");
  if (node.attr_int("heads", 0) == 0) {
    if (q.size() != 4 || k.size() != 4 || v.size() != 4)
      throw Error(node.describe() + ": Q, KT and V must be 4-D, got Q " + shape_str(q) + ", KT " + shape_str(k) +
                  ", V " + shape_str(v));
    l.keys_as_rows = node.attr_int("key_rows", 0) != 0;
    l.kv_group = node.attr_int("kv_group", 1);
    if (l.kv_group < 1 || (l.kv_group > 1 && !l.keys_as_rows) || q[1] % l.kv_group != 0)
      throw Error(node.describe() + ": kv_group " + std::to_string(l.kv_group) + " must be positive, divide the " +
                  std::to_string(q[1]) + " query heads and come with key_rows");
    const int64_t k_dim = l.keys_as_rows ? k[3] : k[2], k_keys = l.keys_as_rows ? k[2] : k[3];
    const int64_t kv_heads = q[1] / l.kv_group;
    if (k[0] != q[0] || v[0] != q[0] || k[1] != kv_heads || v[1] != kv_heads || k_dim != q[3] || v[2] != k_keys)
      throw Error(node.describe() + ": shapes do not chain: Q " + shape_str(q) + (l.keys_as_rows ? ", K " : ", KT ") +
                  shape_str(k) + ", V " + shape_str(v));
    l.batch = q[0], l.heads = q[1], l.queries = q[2], l.keys = k_keys, l.head_dim = q[3], l.value_dim = v[3];
    const auto head_major = [](const Shape& s) {
      return AttentionLayout::Operand{0, s[1] * s[2] * s[3], s[2] * s[3], s[3]};
    };
    l.q = head_major(q);
    l.k = head_major(k);
    l.v = head_major(v);
    l.out = head_major({l.batch, l.heads, l.queries, l.value_dim});
    l.past_keys = l.keys;
    if (k_new) {
      const Shape &kn = *k_new, &vn = *v_new;
      if (kn.size() != 4 || vn.size() != 4 || kn[0] != q[0] || kn[1] != kv_heads || kn[3] != q[3] || vn[0] != q[0] ||
          vn[1] != kv_heads || vn[2] != kn[2] || vn[3] != v[3])
        throw Error(node.describe() + ": new keys " + shape_str(kn) + " and values " + shape_str(vn) +
                    " do not follow K " + shape_str(k) + " and V " + shape_str(v));
      l.parts = true;
      l.keys += kn[2];
      l.k_new = head_major(kn);
      l.v_new = head_major(vn);
    }
    return l;
  }
  if (q.size() != 3 || k.size() != 3 || v.size() != 3)
    throw Error(node.describe() + ": sequence-major Q, K and V must be 3-D, got Q " + shape_str(q) + ", K " +
                shape_str(k) + ", V " + shape_str(v));
  if (k[0] != q[0] || v[0] != q[0] || v[1] != k[1])
    throw Error(node.describe() + ": shapes do not chain: Q " + shape_str(q) + ", K " + shape_str(k) + ", V " + shape_str(v));
  l.sequence_major = true;
  l.keys_as_rows = true;
  l.batch = q[0], l.queries = q[1], l.keys = k[1];
  l.heads = positive_attr(node, "heads");
  l.head_dim = positive_attr(node, "head_dim");
  l.value_dim = positive_attr(node, "value_dim");
  const auto operand = [&](const Shape& s, const char* offset_key, int64_t width) {
    int64_t columns = 0;
    if (__builtin_mul_overflow(l.heads, width, &columns))
      throw Error(node.describe() + ": heads x head width overflows int64");
    return AttentionLayout::Operand{offset_attr(node, offset_key, columns, s[2]), s[1] * s[2], width, s[2]};
  };
  l.q = operand(q, "q_offset", l.head_dim);
  l.k = operand(k, "k_offset", l.head_dim);
  l.v = operand(v, "v_offset", l.value_dim);
  l.out = {0, l.queries * l.heads * l.value_dim, l.value_dim, l.heads * l.value_dim};
  l.past_keys = l.keys;
  return l;
}

// What the ops fuse_attention replaced counted: the two MatMuls and one operation per score
// for the scale, the Where, the mask Add and the Softmax.
static int64_t attention_flops(const Node& n, std::span<const ValueInfo> in, std::span<const ValueInfo>) {
  const Shape* q = known_shape(in, 0);
  const Shape* k = known_shape(in, 1);
  const Shape* v = known_shape(in, 2);
  if (!q || !k || !v) return 0;
  const Shape* k_new = known_shape(in, 5);
  const Shape* v_new = known_shape(in, 6);
  AttentionLayout l;
  try {
    l = attention_layout(n, *q, *k, *v, k_new, v_new);
  } catch (const Error&) {
    return 0;
  }
  const int64_t scores = numel(l.scores());
  const int64_t per_score = 2 + has_input(in, 3) + has_input(in, 4);
  return checked_add(checked_add(checked_mul(checked_mul(2, scores), l.head_dim), checked_mul(checked_mul(2, scores), l.value_dim)),
                     checked_mul(per_score, scores));
}

void register_internal_ops(OpRegistry& r) {
  r.add_internal("Attention", {.infer = &attention_infer, .reference = &attention_reference, .flops = &attention_flops});
}

}  // namespace grove
