// LSTM, GRU and RNN: naive references of the ONNX recurrent ops, one batch row and one time
// step at a time, accumulating in double. Shared: the layouts (layout 0: [seq, batch, ...],
// layout 1: batch first), directions, sequence_lens (steps past a row's length give zeros
// and leave its state alone; a reverse pass starts at the row's last valid step), the
// activation list with its alphas and betas, and clip.
#include <algorithm>
#include <cmath>
#include <functional>
#include <string>
#include <vector>

#include "ops/op.h"
#include "ops/op_util.h"
#include "ops/recurrent/recurrent.h"

namespace grove {

int gate_count(Cell c) { return c == Cell::lstm ? 4 : c == Cell::gru ? 3 : 1; }
size_t activation_count(Cell c) { return c == Cell::lstm ? 3 : c == Cell::gru ? 2 : 1; }

std::vector<std::string> default_activations(Cell c) {
  if (c == Cell::lstm) return {"Sigmoid", "Tanh", "Tanh"};
  if (c == Cell::gru) return {"Sigmoid", "Tanh"};
  return {"Tanh"};
}

Cell cell_of(const Node& node) {
  return node.op_type == "LSTM" ? Cell::lstm : node.op_type == "GRU" ? Cell::gru : Cell::rnn;
}

RecurrentDims recurrent_dims(const Node& node, const Shape& x, const Shape& w, const Shape& r) {
  Cell cell = cell_of(node);
  if (x.size() != 3) throw Error("X must have rank 3, got " + shape_str(x));
  if (w.size() != 3 || r.size() != 3) throw Error("W and R must have rank 3, got " + shape_str(w) + " and " + shape_str(r));
  RecurrentDims d;
  d.batch_first = node.attr_int("layout", 0) == 1;
  d.seq = d.batch_first ? x[1] : x[0];
  d.batch = d.batch_first ? x[0] : x[1];
  d.input = x[2];
  d.hidden = node.attr_int("hidden_size", r[2]);
  const std::string direction = node.attr_string("direction", "forward");
  if (direction != "forward" && direction != "reverse" && direction != "bidirectional")
    throw Error("direction must be forward, reverse or bidirectional, got '" + direction + "'");
  d.dirs = direction == "bidirectional" ? 2 : 1;
  const int64_t rows = gate_count(cell) * d.hidden;
  if (w != Shape{d.dirs, rows, d.input})
    throw Error("W has shape " + shape_str(w) + ", expected " + shape_str({d.dirs, rows, d.input}));
  if (r != Shape{d.dirs, rows, d.hidden})
    throw Error("R has shape " + shape_str(r) + ", expected " + shape_str({d.dirs, rows, d.hidden}));
  return d;
}

Shape recurrent_y_shape(const RecurrentDims& d) {
  return d.batch_first ? Shape{d.batch, d.seq, d.dirs, d.hidden} : Shape{d.seq, d.dirs, d.batch, d.hidden};
}
Shape recurrent_state_shape(const RecurrentDims& d) {
  return d.batch_first ? Shape{d.batch, d.dirs, d.hidden} : Shape{d.dirs, d.batch, d.hidden};
}

namespace {


void check_optional(std::span<const ValueInfo> in, size_t i, const Shape& expected, const char* what) {
  if (has_input(in, i) && in[i].shape != expected)
    throw Error(std::string(what) + " has shape " + shape_str(in[i].shape) + ", expected " + shape_str(expected));
}

void recurrent_infer(const Node& node, std::span<const ValueInfo> in, std::span<ValueInfo> out) {
  const Cell cell = cell_of(node);
  require_inputs(node, in.size(), 3, cell == Cell::lstm ? 8 : 6);
  if (in[0].dtype != DType::f32 || in[1].dtype != DType::f32 || in[2].dtype != DType::f32)
    throw Unsupported("grove runs " + node.op_type + " on float32 only");
  const RecurrentDims d = recurrent_dims(node, in[0].shape, in[1].shape, in[2].shape);
  const int64_t rows = gate_count(cell) * d.hidden;
  check_optional(in, 3, {d.dirs, 2 * rows}, "B");
  check_optional(in, 4, {d.batch}, "sequence_lens");
  if (has_input(in, 4) && in[4].dtype != DType::i32) throw Error("sequence_lens must be int32");
  check_optional(in, 5, recurrent_state_shape(d), "initial_h");
  check_optional(in, 6, recurrent_state_shape(d), "initial_c");
  check_optional(in, 7, {d.dirs, 3 * d.hidden}, "P");
  const Shape shapes[] = {recurrent_y_shape(d), recurrent_state_shape(d), recurrent_state_shape(d)};
  if (out.size() > (cell == Cell::lstm ? 3u : 2u)) throw Error("too many outputs");
  for (size_t i = 0; i < out.size(); ++i)
    if (!node.outputs[i].empty()) out[i] = ValueInfo{DType::f32, shapes[i]};
}

// One activation with its alpha and beta (ONNX's defaults when the lists leave them out).
struct Activation {
  std::string name;
  double alpha = 0, beta = 0;
  double operator()(double x) const {
    if (name == "Sigmoid") return 1 / (1 + std::exp(-x));
    if (name == "Tanh") return std::tanh(x);
    if (name == "Relu") return std::max(x, 0.0);
    if (name == "Affine") return alpha * x + beta;
    if (name == "LeakyRelu") return x >= 0 ? x : alpha * x;
    if (name == "ThresholdedRelu") return x > alpha ? x : 0;
    if (name == "ScaledTanh") return alpha * std::tanh(beta * x);
    if (name == "HardSigmoid") return std::clamp(alpha * x + beta, 0.0, 1.0);
    if (name == "Elu") return x >= 0 ? x : alpha * (std::exp(x) - 1);
    if (name == "Softsign") return x / (1 + std::fabs(x));
    return std::log1p(std::exp(x));  // Softplus
  }
};

// The activations of every direction, in order; only the functions that take an alpha (or a
// beta) consume one from the lists, as ONNX Runtime reads them.
std::vector<Activation> activations_of(const Node& node, Cell cell, int64_t dirs) {
  std::vector<std::string> names;
  if (node.has_attr("activations")) {
    names = node.attrs.at("activations").strings;
  } else {
    for (int64_t d = 0; d < dirs; ++d)
      for (const auto& n : default_activations(cell)) names.push_back(n);
  }
  if (names.size() != activation_count(cell) * static_cast<size_t>(dirs))
    throw Error("activations lists " + std::to_string(names.size()) + " functions, expected " +
                std::to_string(activation_count(cell) * static_cast<size_t>(dirs)));
  const std::vector<float> alphas = node.attr_floats("activation_alpha");
  const std::vector<float> betas = node.attr_floats("activation_beta");
  size_t ai = 0, bi = 0;
  std::vector<Activation> acts;
  for (const auto& name : names) {
    struct Defaults { const char* name; bool alpha; double a; bool beta; double b; };
    static const Defaults kKnown[] = {
        {"Sigmoid", false, 0, false, 0}, {"Tanh", false, 0, false, 0}, {"Relu", false, 0, false, 0},
        {"Affine", true, 1, true, 0}, {"LeakyRelu", true, 0.01, false, 0}, {"ThresholdedRelu", true, 1, false, 0},
        {"ScaledTanh", true, 1, true, 1}, {"HardSigmoid", true, 0.2, true, 0.5}, {"Elu", true, 1, false, 0},
        {"Softsign", false, 0, false, 0}, {"Softplus", false, 0, false, 0}};
    const Defaults* k = nullptr;
    for (const auto& known : kKnown)
      if (name == known.name) k = &known;
    if (!k) throw Unsupported("activation '" + name + "' is not supported");
    Activation a{name, k->a, k->b};
    if (k->alpha && ai < alphas.size()) a.alpha = alphas[ai++];
    if (k->beta && bi < betas.size()) a.beta = betas[bi++];
    acts.push_back(a);
  }
  return acts;
}

// Everything one direction of one batch row needs, as flat float pointers.
struct Weights {
  const float* w;  // [G*H, I]
  const float* r;  // [G*H, H]
  const float* wb; // [G*H] or null
  const float* rb; // [G*H] or null
  const float* p;  // LSTM peepholes [3*H]: i, o, f; or null
};

void recurrent_reference(const Node& node, std::span<const Tensor* const> in, std::span<Tensor* const> out) {
  const Cell cell = cell_of(node);
  const Tensor& x = *in[0];
  const RecurrentDims d = recurrent_dims(node, x.shape(), in[1]->shape(), in[2]->shape());
  const int64_t H = d.hidden, G = gate_count(cell), I = d.input;
  const Tensor* bias = optional_input(in, 3);
  const Tensor* lens = optional_input(in, 4);
  const Tensor* h0 = optional_input(in, 5);
  const Tensor* c0 = cell == Cell::lstm ? optional_input(in, 6) : nullptr;
  const Tensor* peep = cell == Cell::lstm ? optional_input(in, 7) : nullptr;
  const std::vector<Activation> acts = activations_of(node, cell, d.dirs);
  const bool has_clip = node.has_attr("clip");
  const double clip = node.attr_float("clip", 0);
  const bool input_forget = node.attr_int("input_forget", 0) != 0;
  const bool linear_before_reset = node.attr_int("linear_before_reset", 0) != 0;
  const bool reverse_only = node.attr_string("direction", "forward") == "reverse";

  Tensor* y = out.size() > 0 ? out[0] : nullptr;
  Tensor* y_h = out.size() > 1 ? out[1] : nullptr;
  Tensor* y_c = out.size() > 2 ? out[2] : nullptr;
  if (y) std::fill_n(y->data<float>(), y->numel(), 0.0f);

  auto x_at = [&](int64_t t, int64_t b) { return x.data<float>() + (d.batch_first ? b * d.seq + t : t * d.batch + b) * I; };
  auto y_at = [&](int64_t t, int64_t dir, int64_t b) {
    return y->data<float>() + (d.batch_first ? (b * d.seq + t) * d.dirs + dir : (t * d.dirs + dir) * d.batch + b) * H;
  };
  auto state_at = [&](int64_t dir, int64_t b) { return (d.batch_first ? b * d.dirs + dir : dir * d.batch + b) * H; };
  auto clipped = [&](double v) { return has_clip ? std::clamp(v, -clip, clip) : v; };

  for (int64_t dir = 0; dir < d.dirs; ++dir) {
    const Weights wt{in[1]->data<float>() + dir * G * H * I, in[2]->data<float>() + dir * G * H * H,
                     bias ? bias->data<float>() + dir * 2 * G * H : nullptr,
                     bias ? bias->data<float>() + dir * 2 * G * H + G * H : nullptr,
                     peep ? peep->data<float>() + dir * 3 * H : nullptr};
    const Activation* f = &acts[static_cast<size_t>(dir) * activation_count(cell)];
    const bool backward = reverse_only || dir == 1;
    for (int64_t b = 0; b < d.batch; ++b) {
      const int64_t len = lens ? lens->data<int32_t>()[b] : d.seq;
      if (len < 0 || len > d.seq) throw Error("sequence_lens[" + std::to_string(b) + "] = " + std::to_string(len) + " is outside [0, " + std::to_string(d.seq) + "]");
      std::vector<double> h(static_cast<size_t>(H), 0.0), c(static_cast<size_t>(H), 0.0);
      if (h0) for (int64_t j = 0; j < H; ++j) h[j] = h0->data<float>()[state_at(dir, b) + j];
      if (c0) for (int64_t j = 0; j < H; ++j) c[j] = c0->data<float>()[state_at(dir, b) + j];
      std::vector<double> xw(static_cast<size_t>(G * H)), hr(static_cast<size_t>(G * H));
      for (int64_t step = 0; step < len; ++step) {
        const int64_t t = backward ? len - 1 - step : step;
        const float* xt = x_at(t, b);
        // xw = W x + Wb and hr = R h + Rb, every gate row.
        for (int64_t row = 0; row < G * H; ++row) {
          double sx = wt.wb ? wt.wb[row] : 0.0, sh = wt.rb ? wt.rb[row] : 0.0;
          for (int64_t i = 0; i < I; ++i) sx += static_cast<double>(wt.w[row * I + i]) * xt[i];
          for (int64_t j = 0; j < H; ++j) sh += static_cast<double>(wt.r[row * H + j]) * h[j];
          xw[row] = sx;
          hr[row] = sh;
        }
        std::vector<double> next(static_cast<size_t>(H));
        if (cell == Cell::rnn) {
          for (int64_t j = 0; j < H; ++j) next[j] = f[0](clipped(xw[j] + hr[j]));
        } else if (cell == Cell::gru) {
          // Gate rows: z, r, h.
          std::vector<double> z(static_cast<size_t>(H)), r(static_cast<size_t>(H));
          for (int64_t j = 0; j < H; ++j) {
            z[j] = f[0](clipped(xw[j] + hr[j]));
            r[j] = f[0](clipped(xw[H + j] + hr[H + j]));
          }
          for (int64_t j = 0; j < H; ++j) {
            double rec;
            if (linear_before_reset) {
              rec = r[j] * hr[2 * H + j];
            } else {
              rec = wt.rb ? wt.rb[2 * H + j] : 0.0;
              for (int64_t k = 0; k < H; ++k) rec += static_cast<double>(wt.r[(2 * H + j) * H + k]) * r[k] * h[k];
            }
            const double cand = f[1](clipped(xw[2 * H + j] + rec));
            next[j] = (1 - z[j]) * cand + z[j] * h[j];
          }
        } else {
          // Gate rows: i, o, f, c; peepholes: i, o, f.
          for (int64_t j = 0; j < H; ++j) {
            auto pre = [&](int gate) { return xw[gate * H + j] + hr[gate * H + j]; };
            const double pi = wt.p ? wt.p[j] : 0.0, po = wt.p ? wt.p[H + j] : 0.0, pf = wt.p ? wt.p[2 * H + j] : 0.0;
            const double ig = f[0](clipped(pre(0) + pi * c[j]));
            const double fg = input_forget ? 1 - ig : f[0](clipped(pre(2) + pf * c[j]));
            const double cand = f[1](clipped(pre(3)));
            c[j] = fg * c[j] + ig * cand;
            const double og = f[0](clipped(pre(1) + po * c[j]));
            next[j] = og * f[2](c[j]);
          }
        }
        h = next;
        if (y) {
          float* yt = y_at(t, dir, b);
          for (int64_t j = 0; j < H; ++j) yt[j] = static_cast<float>(h[j]);
        }
      }
      if (y_h) for (int64_t j = 0; j < H; ++j) y_h->data<float>()[state_at(dir, b) + j] = static_cast<float>(h[j]);
      if (y_c) for (int64_t j = 0; j < H; ++j) y_c->data<float>()[state_at(dir, b) + j] = static_cast<float>(c[j]);
    }
  }
}

}  // namespace

void register_recurrent_ops(OpRegistry& registry) {
  // Every step of every sequence multiplies X's row by W and the state by R: two FLOPs per
  // weight. The gates' elementwise maths is small beside that and left out.
  constexpr FlopsFn products = [](const Node&, std::span<const ValueInfo> in, std::span<const ValueInfo>) {
    const Shape* x = known_shape(in, 0);
    const Shape* w = known_shape(in, 1);
    const Shape* r = known_shape(in, 2);
    if (!x || !w || !r || x->size() < 2) return int64_t{0};
    const int64_t steps = checked_mul((*x)[0], (*x)[1]);  // sequence x batch, in either layout
    return checked_mul(checked_mul(2, steps), checked_add(numel(*w), numel(*r)));
  };
  registry.add("LSTM", {.infer = recurrent_infer, .reference = recurrent_reference, .flops = products});
  registry.add("GRU", {.infer = recurrent_infer, .reference = recurrent_reference, .flops = products});
  registry.add("RNN", {.infer = recurrent_infer, .reference = recurrent_reference, .flops = products});
}

}  // namespace grove
