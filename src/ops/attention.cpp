// grove.internal Attention: the scaled dot-product attention subgraph that
// fuse_attention (src/graph/fuse_attention.cpp) replaces by one node, so a tile can compute
// a block of queries of one head without the whole score tensor.
//
//   inputs:  Q [B, H, S, D], KT [B, H, D, T] (K already transposed), V [B, H, T, Dv],
//            mask (optional, f32, broadcast to [B, H, S, T], added),
//            keep (optional, bool, broadcast to [B, H, S, T]: where false the score is `fill`)
//   attrs:   scale (f32), scale_op ("Mul" or "Div": how the model applied it), fill (f32)
//   output:  softmax(where(keep, (Q . KT) scale_op scale, fill) + mask, last axis) . V
//
// The reference runs the builtin references of the ops it replaces (MatMul, Mul/Div, Where,
// Add, Softmax, MatMul) in that order on whole tensors: exactly the unfused math.
#include <string>

#include "ops/op.h"
#include "ops/op_util.h"

namespace grove {
namespace {

void attention_infer(const Node& node, std::span<const ValueInfo> in, std::span<ValueInfo> out) {
  require_inputs(node, in.size(), 3, 5);
  for (size_t i = 0; i < 3; ++i)
    if (in[i].dtype != DType::f32 || in[i].shape.size() != 4)
      throw Error(node.describe() + ": Q, KT and V must be 4-D float32");
  const Shape &q = in[0].shape, &kt = in[1].shape, &v = in[2].shape;
  if (kt[0] != q[0] || v[0] != q[0] || kt[1] != q[1] || v[1] != q[1] || kt[2] != q[3] || v[2] != kt[3])
    throw Error(node.describe() + ": shapes do not chain: Q " + shape_str(q) + ", KT " + shape_str(kt) + ", V " + shape_str(v));
  const Shape scores{q[0], q[1], q[2], kt[3]};
  if (in.size() > 3 && in[3].present &&
      (in[3].dtype != DType::f32 || broadcast_shapes(node, in[3].shape, scores) != scores))
    throw Error(node.describe() + ": mask must be float32 and broadcast to " + shape_str(scores));
  if (in.size() > 4 && in[4].present &&
      (in[4].dtype != DType::boolean || broadcast_shapes(node, in[4].shape, scores) != scores))
    throw Error(node.describe() + ": keep must be bool and broadcast to " + shape_str(scores));
  const std::string op = node.attr_string("scale_op", "Mul");
  if (op != "Mul" && op != "Div") throw Error(node.describe() + ": scale_op must be Mul or Div, not " + op);
  out[0].dtype = DType::f32;
  out[0].shape = {q[0], q[1], q[2], v[3]};
}

// Runs the builtin reference of `op_type` on `in` into `out` (allocated by the caller).
void run_step(const Node& fused, const std::string& op_type, std::vector<const Tensor*> in, Tensor& out, Node step = {}) {
  step.name = fused.name;
  step.op_type = op_type;
  step.opset = fused.opset;
  Tensor* outs[] = {&out};
  OpRegistry::builtin().find(step)->reference(step, in, std::span<Tensor* const>(outs));
}

void attention_reference(const Node& node, std::span<const Tensor* const> in, std::span<Tensor* const> out) {
  const Shape& q = in[0]->shape();
  const Shape scores_shape{q[0], q[1], q[2], in[1]->shape()[3]};
  // Two score buffers, each step reading one and writing the other.
  Tensor a(DType::f32, scores_shape), b(DType::f32, scores_shape);
  run_step(node, "MatMul", {in[0], in[1]}, a);
  const Tensor scale = Tensor::scalar<float>(node.attr_float("scale", 1.0f));
  run_step(node, node.attr_string("scale_op", "Mul"), {&a, &scale}, b);
  std::swap(a, b);
  if (const Tensor* keep = optional_input(in, 4)) {
    const Tensor fill = Tensor::scalar<float>(node.attr_float("fill", 0.0f));
    run_step(node, "Where", {keep, &a, &fill}, b);
    std::swap(a, b);
  }
  if (const Tensor* mask = optional_input(in, 3)) {
    run_step(node, "Add", {&a, mask}, b);
    std::swap(a, b);
  }
  Node softmax;
  Attribute& axis = softmax.attrs["axis"];
  axis.kind = Attribute::Kind::i;
  axis.i = -1;
  run_step(node, "Softmax", {&a}, b, softmax);
  run_step(node, "MatMul", {&b, in[2]}, *out[0]);
}

}  // namespace

void register_internal_ops(OpRegistry& r) { r.add_internal("Attention", OpDef{&attention_infer, &attention_reference}); }

}  // namespace grove
