// DynamicQuantizeLSTM (com.microsoft), which ONNX Runtime's dynamic quantizer writes for an
// LSTM: W [dirs, input, 4H] and R [dirs, H, 4H] (transposed against ONNX LSTM, gates i, o, f,
// c along the columns) are 8-bit with per-direction or per-column scales and one zero point
// per direction; the activations are quantized on the fly. What ONNX Runtime's CPU kernel
// computes, and so this reference:
//  - X W: all of X (every step and batch row) quantized to uint8 as DynamicQuantizeLinear
//    does, one scale for the whole tensor, then an integer product scaled by
//    x_scale * w_scale (per column when W_scale is [dirs, 4H]);
//  - H R, every step: the hidden state of the whole batch [batch, H] quantized the same way
//    (ONNX Runtime run with more than one thread quantizes groups of batch rows apart, which
//    changes the numbers within the quantization error; one thread matches this exactly);
//  - the gates from X W + H R as ONNX LSTM (bias, peepholes, clip, activations,
//    input_forget): one step of the standard LSTM reference, fed the products as its input
//    through one-hot weights, so that the gate math is the LSTM reference's own.
// Not supported: sequence_lens shorter than the sequence, and zero points that vary along the
// columns (ONNX Runtime uses the first of each direction).
#include <string>
#include <vector>

#include "ops/contrib_util.h"
#include "ops/op_util.h"

namespace grove {
namespace {

using namespace contrib;

struct Dims {
  int64_t seq = 0, batch = 0, input = 0, hidden = 0, dirs = 1;
  bool per_column_w = false, per_column_r = false;
};

Shape quant_param_shape(const Node& node, const ValueInfo& v, const Dims& d, const char* what, bool& per_column) {
  per_column = v.shape == Shape{d.dirs, 4 * d.hidden};
  if (!per_column && v.shape != Shape{d.dirs})
    throw Error(node.describe() + ": " + what + " must be [" + std::to_string(d.dirs) + "] or [" + std::to_string(d.dirs) + ", " +
                std::to_string(4 * d.hidden) + "], got " + shape_str(v.shape));
  return v.shape;
}

// The standard LSTM one step of this node runs: its attributes, for X [1, batch, dirs * 4H].
Node lstm_step(const Node& node, const Dims& d) {
  Node lstm = step(node, "LSTM", 8, 14);
  for (const char* key : {"direction", "activations", "activation_alpha", "activation_beta", "clip", "input_forget"})
    if (node.has_attr(key)) lstm.attrs[key] = node.attrs.at(key);
  set_i(lstm, "hidden_size", d.hidden);
  lstm.outputs = {"", "y_h", "y_c"};
  return lstm;
}

Dims dims_of(const Node& node, std::span<const ValueInfo> in) {
  require_inputs(node, in.size(), 12, 12);
  if (node.has_attr("layout") && node.attr_int("layout", 0) != 0) throw Unsupported(node.describe() + ": layout=1 is not supported");
  if (in[0].dtype != DType::f32) throw Unsupported(node.describe() + ": X must be float32");
  const DType q = in[1].dtype;
  if ((q != DType::u8 && q != DType::i8) || in[2].dtype != q || in[9].dtype != q || in[11].dtype != q)
    throw Error(node.describe() + ": W, R and their zero points must all be uint8 or all int8");
  if (in[8].dtype != DType::f32 || in[10].dtype != DType::f32) throw Error(node.describe() + ": W_scale and R_scale must be float32");
  const Shape& x = in[0].shape;
  const Shape& w = in[1].shape;
  const Shape& r = in[2].shape;
  if (x.size() != 3 || w.size() != 3 || r.size() != 3)
    throw Error(node.describe() + ": X, W and R must have rank 3, got " + shape_str(x) + ", " + shape_str(w) + ", " + shape_str(r));
  Dims d;
  d.seq = x[0], d.batch = x[1], d.input = x[2];
  d.hidden = node.attr_int("hidden_size", r[1]);
  const std::string direction = node.attr_string("direction", "forward");
  d.dirs = direction == "bidirectional" ? 2 : 1;
  if (w != Shape{d.dirs, d.input, 4 * d.hidden} || r != Shape{d.dirs, d.hidden, 4 * d.hidden})
    throw Error(node.describe() + ": W must be " + shape_str({d.dirs, d.input, 4 * d.hidden}) + " and R " +
                shape_str({d.dirs, d.hidden, 4 * d.hidden}) + ", got " + shape_str(w) + " and " + shape_str(r));
  bool zero_per_column = false;
  quant_param_shape(node, in[8], d, "W_scale", d.per_column_w);
  quant_param_shape(node, in[9], d, "W_zero_point", zero_per_column);
  quant_param_shape(node, in[10], d, "R_scale", d.per_column_r);
  quant_param_shape(node, in[11], d, "R_zero_point", zero_per_column);
  if (has_input(in, 4) && (in[4].dtype != DType::i32 || in[4].shape != Shape{d.batch}))
    throw Error(node.describe() + ": sequence_lens must be int32 [" + std::to_string(d.batch) + "]");
  return d;
}

// The float LSTM inputs standing in for this node's, for the standard LSTM's infer.
std::vector<ValueInfo> lstm_infos(std::span<const ValueInfo> in, const Dims& d) {
  std::vector<ValueInfo> infos = {ValueInfo{DType::f32, {1, d.batch, d.dirs * 4 * d.hidden}, nullptr, true},
                                  ValueInfo{DType::f32, {d.dirs, 4 * d.hidden, d.dirs * 4 * d.hidden}, nullptr, true},
                                  ValueInfo{DType::f32, {d.dirs, 4 * d.hidden, d.hidden}, nullptr, true}};
  for (size_t i = 3; i < 8; ++i) infos.push_back(i == 4 || !has_input(in, i) ? ValueInfo{DType::undefined, {}, nullptr, false} : in[i]);
  return infos;
}

void infer_dynamic_quantize_lstm(const Node& node, std::span<const ValueInfo> in, std::span<ValueInfo> out) {
  const Dims d = dims_of(node, in);
  // The standard LSTM's infer checks B, initial_h, initial_c and P and its activations.
  infer_node(lstm_step(node, d), lstm_infos(in, d));
  if (out.size() > 3) throw Error(node.describe() + ": has at most 3 outputs");
  const Shape shapes[] = {{d.seq, d.dirs, d.batch, d.hidden}, {d.dirs, d.batch, d.hidden}, {d.dirs, d.batch, d.hidden}};
  for (size_t i = 0; i < out.size(); ++i)
    out[i] = node.outputs[i].empty() ? ValueInfo{DType::undefined, {}, nullptr, false} : ValueInfo{DType::f32, shapes[i], nullptr, true};
}

// Rows [first, first + count) of a tensor's leading axis, as a tensor of the given shape.
Tensor rows(const Tensor& t, int64_t first, int64_t count, Shape shape) {
  const int64_t row = t.numel() / t.dim(0);
  Tensor out(t.dtype(), std::move(shape));
  const size_t bytes = dtype_size(t.dtype());
  std::memcpy(out.raw(), t.raw() + static_cast<size_t>(first * row) * bytes, static_cast<size_t>(count * row) * bytes);
  return out;
}

// The scale and zero point of direction `dir`: the scale [4H] or a scalar, the zero point a
// scalar (checked constant along the columns).
struct DirQuant {
  Tensor scale, zero;
};

DirQuant dir_quant(const Node& node, const Tensor& scale, const Tensor& zero, int64_t dir, int64_t columns, const char* what) {
  const bool per_column = scale.rank() == 2;
  DirQuant q;
  q.scale = per_column ? rows(scale, dir, 1, {columns}) : rows(scale, dir, 1, {});
  const int64_t n = zero.rank() == 2 ? columns : 1;
  const Tensor z = rows(zero, dir, 1, {n});
  const std::vector<int64_t> values = z.to_i64();
  for (int64_t v : values)
    if (v != values[0])
      throw Unsupported(node.describe() + ": " + what + " zero points that differ along the columns are not supported");
  q.zero = rows(z, 0, 1, {});
  return q;
}

// a (float [M, K]) quantized to uint8 as DynamicQuantizeLinear does, times b (8-bit [K, N])
// as integers, scaled by a_scale * b_scale: ONNX Runtime's quantized GEMM of the LSTM.
Tensor dynamic_product(const Node& node, const Tensor& a, const Tensor& b, const DirQuant& bq) {
  Node dq = step(node, "DynamicQuantizeLinear", 1, 11);
  dq.outputs = {"y", "scale", "zero"};
  const std::vector<Tensor> q = evaluate_node(dq, std::vector<const Tensor*>{&a});
  const Tensor product = eval(step(node, "MatMulInteger", 4, 10), {&q[0], &b, &q[2], &bq.zero});
  Node cast = step(node, "Cast", 1, 13);
  set_i(cast, "to", dtype_to_onnx(DType::f32));
  const Tensor y = eval(cast, {&product});
  const Tensor scale = eval(step(node, "Mul", 2, 14), {&q[1], &bq.scale});
  return eval(step(node, "Mul", 2, 14), {&y, &scale});
}

void reference_dynamic_quantize_lstm(const Node& node, std::span<const Tensor* const> in, std::span<Tensor* const> out) {
  std::vector<ValueInfo> infos;
  for (const Tensor* t : in) infos.push_back(t ? ValueInfo{t->dtype(), t->shape(), nullptr, true} : ValueInfo{DType::undefined, {}, nullptr, false});
  const Dims d = dims_of(node, infos);
  if (const Tensor* lens = optional_input(in, 4))
    for (const int32_t len : lens->span<int32_t>())
      if (len != d.seq)
        throw Unsupported(node.describe() + ": sequence_lens other than the sequence length " + std::to_string(d.seq) + " are not supported");
  const int64_t G = 4 * d.hidden, S = d.seq, Bt = d.batch, H = d.hidden;
  const bool reverse_only = node.attr_string("direction", "forward") == "reverse";

  // X W for every direction over all of X at once, as ONNX Runtime quantizes it: [S * batch, 4H].
  const Tensor x2 = in[0]->reshaped({S * Bt, d.input});
  std::vector<Tensor> xw, r;
  std::vector<DirQuant> rq;
  for (int64_t dir = 0; dir < d.dirs; ++dir) {
    const DirQuant wq = dir_quant(node, *in[8], *in[9], dir, G, "W");
    xw.push_back(dynamic_product(node, x2, rows(*in[1], dir, 1, {d.input, G}), wq));
    r.push_back(rows(*in[2], dir, 1, {H, G}));
    rq.push_back(dir_quant(node, *in[10], *in[11], dir, G, "R"));
  }

  // The one-step LSTM reads X' [1, batch, dirs * 4H] (each direction's pre-activations side by
  // side) through one-hot W' that picks its own block, and R' = 0: its gates are exactly X W +
  // H R plus the biases and peepholes, which it applies as ONNX LSTM does.
  const Node lstm = lstm_step(node, d);
  Tensor w_pick(DType::f32, {d.dirs, G, d.dirs * G});
  for (int64_t dir = 0; dir < d.dirs; ++dir)
    for (int64_t g = 0; g < G; ++g) w_pick.data<float>()[(dir * G + g) * d.dirs * G + dir * G + g] = 1.0f;
  const Tensor r_zero(DType::f32, {d.dirs, G, H});
  Tensor h = in[5] ? in[5]->clone() : Tensor(DType::f32, {d.dirs, Bt, H});
  Tensor c = in[6] ? in[6]->clone() : Tensor(DType::f32, {d.dirs, Bt, H});
  Tensor* y = out.size() > 0 ? out[0] : nullptr;

  for (int64_t k = 0; k < S; ++k) {
    Tensor gates(DType::f32, {1, Bt, d.dirs * G});
    std::vector<int64_t> t_of(static_cast<size_t>(d.dirs));
    for (int64_t dir = 0; dir < d.dirs; ++dir) {
      const int64_t t = reverse_only || dir == 1 ? S - 1 - k : k;
      t_of[static_cast<size_t>(dir)] = t;
      const Tensor h_dir = rows(h, dir, 1, {Bt, H});
      const Tensor hr = dynamic_product(node, h_dir, r[static_cast<size_t>(dir)], rq[static_cast<size_t>(dir)]);
      const Tensor xw_t = rows(xw[static_cast<size_t>(dir)], t * Bt, Bt, {Bt, G});
      const Tensor sum = eval(step(node, "Add", 2, 14), {&xw_t, &hr});
      for (int64_t b = 0; b < Bt; ++b)
        std::memcpy(gates.data<float>() + b * d.dirs * G + dir * G, sum.data<float>() + b * G, static_cast<size_t>(G) * sizeof(float));
    }
    const std::vector<Tensor> next =
        evaluate_node(lstm, std::vector<const Tensor*>{&gates, &w_pick, &r_zero, optional_input(in, 3), nullptr, &h, &c, optional_input(in, 7)});
    h = next[1].clone(), c = next[2].clone();
    if (y)
      for (int64_t dir = 0; dir < d.dirs; ++dir)
        std::memcpy(y->data<float>() + ((t_of[static_cast<size_t>(dir)] * d.dirs + dir) * Bt) * H,
                    h.data<float>() + dir * Bt * H, static_cast<size_t>(Bt * H) * sizeof(float));
  }
  if (out.size() > 1) put(node, out[1], h);
  if (out.size() > 2) put(node, out[2], c);
}

}  // namespace

void register_microsoft_lstm_op(OpRegistry& r) {
  r.add_microsoft("DynamicQuantizeLSTM", {infer_dynamic_quantize_lstm, reference_dynamic_quantize_lstm});
}

}  // namespace grove
