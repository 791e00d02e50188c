// Tile rule of LSTM, GRU and RNN (float32): one tile computes every output, since each time
// step needs the state of the step before. Per direction, the input projection of every
// step is one GEMM, X . W^T + biases (all steps at once); then each step is one GEMM of the
// batch's state, h . R^T, and the gate math on vectors (kernels/vmath). W and R are packed
// once at plan time when they are constants (per run otherwise).
//
// Forms the fast path leaves to the reference: activations other than the defaults, a
// sequence_lens that cuts any row short, and empty dims. Results match the reference (which
// sums in double) to float rounding; they do not depend on the schedule.
#include <algorithm>
#include <cstring>
#include <memory>

#include "kernels/gemm.h"
#include "kernels/vmath.h"
#include "ops/op.h"
#include "ops/op_util.h"
#include "ops/recurrent/recurrent.h"
#include "ops/tile_util.h"

namespace grove::tiling {
namespace recurrent_rule {

bool has_default_activations(const Node& node, Cell cell, int64_t dirs) {
  if (!node.has_attr("activations")) return true;
  const std::vector<std::string>& names = node.attrs.at("activations").strings;
  const std::vector<std::string> one = default_activations(cell);
  if (names.size() != one.size() * static_cast<size_t>(dirs)) return false;
  for (size_t i = 0; i < names.size(); ++i)
    if (names[i] != one[i % one.size()]) return false;
  return true;
}

// Whether the fast path computes this node with these inputs (else the reference does).
bool fast_path_applies(const Node& node, std::span<const ValueInfo> in, const RecurrentDims& d) {
  for (const ValueInfo& v : in)
    if (v.present && v.dtype != DType::f32 && v.dtype != DType::i32) return false;
  if (d.seq <= 0 || d.batch <= 0 || d.input <= 0 || d.hidden <= 0) return false;
  return has_default_activations(node, cell_of(node), d.dirs);
}

// The weights of one direction, packed for the GEMM as B (n = gate rows, k = I or H), and the
// biases split by where they are added: into the input projection, or after h . R^T (the GRU
// candidate's R bias with linear_before_reset, which the reset gate multiplies).
struct DirectionWeights {
  kernels::PackedB w;      // W^T: k = I, n = G*H
  kernels::PackedB r;      // R^T: k = H, n = G*H
  kernels::PackedB r_h;    // GRU without linear_before_reset: the candidate rows of R^T, n = H
  std::vector<float> input_bias;  // G*H: Wb (+ Rb where it is added outside the product)
  std::vector<float> state_bias;  // G*H or empty: added to h . R^T
};

struct PreparedRecurrent {
  std::vector<DirectionWeights> dirs;
};

// W [dirs, G*H, I], R [dirs, G*H, H], B [dirs, 2*G*H] or null.
void pack_weights(const Node& node, const RecurrentDims& d, const float* w, const float* r, const float* b,
                  PreparedRecurrent& out) {
  const Cell cell = cell_of(node);
  const size_t H = size_t(d.hidden), I = size_t(d.input), rows = size_t(gate_count(cell)) * H;
  const bool linear_before_reset = node.attr_int("linear_before_reset", 0) != 0;
  out.dirs.resize(size_t(d.dirs));
  for (size_t dir = 0; dir < size_t(d.dirs); ++dir) {
    DirectionWeights& dw = out.dirs[dir];
    const float* wd = w + dir * rows * I;
    const float* rd = r + dir * rows * H;
    kernels::pack_b_into(dw.w, wd, I, rows, I, kernels::BLayout::n_by_k);
    kernels::pack_b_into(dw.r, rd, H, rows, H, kernels::BLayout::n_by_k);
    if (cell == Cell::gru && !linear_before_reset)
      kernels::pack_b_into(dw.r_h, rd + 2 * H * H, H, H, H, kernels::BLayout::n_by_k);
    dw.input_bias.assign(rows, 0.0f);
    dw.state_bias.clear();
    if (!b) continue;
    const float* wb = b + dir * 2 * rows;
    const float* rb = wb + rows;
    for (size_t j = 0; j < rows; ++j) dw.input_bias[j] = wb[j] + rb[j];
    if (cell == Cell::gru && linear_before_reset) {
      dw.state_bias.assign(rows, 0.0f);
      for (size_t j = 2 * H; j < rows; ++j) dw.input_bias[j] = wb[j], dw.state_bias[j] = rb[j];
    }
  }
}

std::shared_ptr<const void> recurrent_prepare(const Node& node, std::span<const ValueInfo> in,
                                              std::span<const Tensor* const> constants) {
  if (constants.size() < 3 || !constants[1] || !constants[2]) return nullptr;
  const bool bias = has_input(in, 3);
  if (bias && (constants.size() < 4 || !constants[3])) return nullptr;
  const RecurrentDims d = recurrent_dims(node, in[0].shape, in[1].shape, in[2].shape);
  if (!fast_path_applies(node, in, d)) return nullptr;
  auto prepared = std::make_shared<PreparedRecurrent>();
  pack_weights(node, d, constants[1]->data<float>(), constants[2]->data<float>(),
               bias ? constants[3]->data<float>() : nullptr, *prepared);
  return prepared;
}

int64_t recurrent_prepared_bytes(const Node&, std::span<const ValueInfo>, const void* prepared) {
  int64_t bytes = 0;
  for (const DirectionWeights& dw : static_cast<const PreparedRecurrent*>(prepared)->dirs)
    bytes += int64_t(dw.w.bytes() + dw.r.bytes() + dw.r_h.bytes() + (dw.input_bias.size() + dw.state_bias.size()) * sizeof(float));
  return bytes;
}

std::vector<int64_t> recurrent_cuttable(const Node&, std::span<const ValueInfo>, std::span<const ValueInfo> out) {
  return none_cuttable(out[0].shape);
}

void recurrent_needs(const Node&, std::span<const ValueInfo> in, std::span<const ValueInfo>, const Region&,
                     std::span<Region> in_regions) {
  for (size_t i = 0; i < in.size(); ++i) in_regions[i] = in[i].present ? full_region(in[i].shape) : Region{};
}

// Per-worker buffers, grown to the largest node and reused.
struct RecurrentWorkspace {
  PreparedRecurrent packed;                  // weights packed per run when not constant
  std::vector<float> xw, gates, h, c, a, b;  // projections, step gates, state, temporaries
  kernels::GemmScratch scratch;
};

// One direction over all steps. xw: the input projection of every (t, b), row x_row(t, b).
// h, c: [batch, H] state, updated in place. y_row(t, b): where h of step t goes, or null.
struct Direction {
  const Node* node;
  Cell cell;
  const RecurrentDims* d;
  const DirectionWeights* weights;
  const float* peepholes;  // LSTM [3H]: i, o, f; or null
  bool backward, has_clip, input_forget, linear_before_reset;
  float clip;
};

void clip_block(float* v, size_t n, float limit) {
  for (size_t i = 0; i < n; ++i) v[i] = std::clamp(v[i], -limit, limit);
}

// v += p * s, elementwise over n.
void add_product(float* v, const float* p, const float* s, size_t n) {
  for (size_t i = 0; i < n; ++i) v[i] += p[i] * s[i];
}

void run_direction(const Direction& dir, RecurrentWorkspace& ws, Tensor* y, int64_t dir_index) {
  const RecurrentDims& d = *dir.d;
  const size_t H = size_t(d.hidden), B = size_t(d.batch), G = size_t(gate_count(dir.cell));
  const kernels::VMathKernels& vm = kernels::vmath();
  auto xw_row = [&](int64_t t, size_t b) {
    return ws.xw.data() + (d.batch_first ? b * size_t(d.seq) + size_t(t) : size_t(t) * B + b) * G * H;
  };
  auto y_row = [&](int64_t t, size_t b) {
    const size_t at = d.batch_first ? (b * size_t(d.seq) + size_t(t)) * size_t(d.dirs) + size_t(dir_index)
                                    : (size_t(t) * size_t(d.dirs) + size_t(dir_index)) * B + b;
    return y->data<float>() + at * H;
  };
  ws.gates.resize(B * G * H);
  ws.a.resize(B * H);
  ws.b.resize(B * H);
  const DirectionWeights& wt = *dir.weights;
  for (int64_t step = 0; step < d.seq; ++step) {
    const int64_t t = dir.backward ? d.seq - 1 - step : step;
    // gates = h . R^T (+ the state bias), every gate row of every batch row.
    kernels::GemmCall call;
    call.m = B;
    call.a = ws.h.data();
    call.a_stride = H;
    call.n = dir.cell == Cell::gru && !dir.linear_before_reset ? 2 * H : G * H;
    call.c = ws.gates.data();
    call.c_stride = G * H;
    call.epilogue.bias = wt.state_bias.empty() ? nullptr : wt.state_bias.data();
    kernels::gemm(call, wt.r, ws.scratch);
    for (size_t b = 0; b < B; ++b) {
      float* g = ws.gates.data() + b * G * H;
      const float* x = xw_row(t, b);
      float* h = ws.h.data() + b * H;
      float* c = ws.c.data() + b * H;
      if (dir.cell == Cell::lstm) {
        // Rows i, o, f, c; peepholes i, o, f. o sees the new c, so it comes last.
        float *gi = g, *go = g + H, *gf = g + 2 * H, *gc = g + 3 * H;
        for (size_t j = 0; j < G * H; ++j) g[j] += x[j];
        if (dir.peepholes) add_product(gi, dir.peepholes, c, H), add_product(gf, dir.peepholes + 2 * H, c, H);
        if (dir.has_clip) clip_block(gi, H, dir.clip), clip_block(gf, H, dir.clip), clip_block(gc, H, dir.clip);
        vm.unary(kernels::UnaryOp::sigmoid, H, gi, gi);
        if (dir.input_forget) {
          for (size_t j = 0; j < H; ++j) gf[j] = 1.0f - gi[j];
        } else {
          vm.unary(kernels::UnaryOp::sigmoid, H, gf, gf);
        }
        vm.unary(kernels::UnaryOp::tanh, H, gc, gc);
        for (size_t j = 0; j < H; ++j) c[j] = gf[j] * c[j] + gi[j] * gc[j];
        if (dir.peepholes) add_product(go, dir.peepholes + H, c, H);
        if (dir.has_clip) clip_block(go, H, dir.clip);
        vm.unary(kernels::UnaryOp::sigmoid, H, go, go);
        float* tc = ws.a.data() + b * H;
        vm.unary(kernels::UnaryOp::tanh, H, c, tc);
        for (size_t j = 0; j < H; ++j) h[j] = go[j] * tc[j];
      } else if (dir.cell == Cell::gru) {
        // Rows z, r, h.
        float *gz = g, *gr = g + H, *gh = g + 2 * H;
        for (size_t j = 0; j < 2 * H; ++j) g[j] += x[j];
        if (dir.has_clip) clip_block(g, 2 * H, dir.clip);
        vm.unary(kernels::UnaryOp::sigmoid, 2 * H, g, g);
        if (dir.linear_before_reset) {
          for (size_t j = 0; j < H; ++j) gh[j] = x[2 * H + j] + gr[j] * gh[j];
        } else {
          // The candidate's product needs r * h of this row first: one more GEMM per row.
          float* rh = ws.a.data() + b * H;
          for (size_t j = 0; j < H; ++j) rh[j] = gr[j] * h[j];
          kernels::GemmCall cand;
          cand.m = 1;
          cand.a = rh;
          cand.a_stride = H;
          cand.n = H;
          cand.c = gh;
          cand.c_stride = H;
          kernels::gemm(cand, wt.r_h, ws.scratch);
          for (size_t j = 0; j < H; ++j) gh[j] += x[2 * H + j];
        }
        if (dir.has_clip) clip_block(gh, H, dir.clip);
        vm.unary(kernels::UnaryOp::tanh, H, gh, gh);
        for (size_t j = 0; j < H; ++j) h[j] = (1.0f - gz[j]) * gh[j] + gz[j] * h[j];
      } else {
        for (size_t j = 0; j < H; ++j) g[j] += x[j];
        if (dir.has_clip) clip_block(g, H, dir.clip);
        vm.unary(kernels::UnaryOp::tanh, H, g, h);
      }
      if (y) std::memcpy(y_row(t, b), h, H * sizeof(float));
    }
  }
}

void recurrent_run(const Node& node, std::span<const Tensor* const> in, std::span<Tensor* const> out, const Region&,
                   const void* prepared, TileScratch& scratch) {
  const std::vector<ValueInfo> infos = infos_of_tensors(in);
  const RecurrentDims d = recurrent_dims(node, in[0]->shape(), in[1]->shape(), in[2]->shape());
  const Tensor* lens = optional_input(in, 4);
  bool full_lengths = true;
  if (lens)
    for (int64_t b = 0; b < d.batch; ++b) full_lengths = full_lengths && lens->data<int32_t>()[b] == d.seq;
  if (!fast_path_applies(node, infos, d) || !full_lengths) {
    OpRegistry::builtin().find(node)->reference(node, in, out);
    return;
  }
  const Cell cell = cell_of(node);
  RecurrentWorkspace& ws = scratch.get<RecurrentWorkspace>();
  const auto* packed = static_cast<const PreparedRecurrent*>(prepared);
  if (!packed) {
    const Tensor* bias = optional_input(in, 3);
    pack_weights(node, d, in[1]->data<float>(), in[2]->data<float>(), bias ? bias->data<float>() : nullptr, ws.packed);
    packed = &ws.packed;
  }
  const size_t H = size_t(d.hidden), B = size_t(d.batch), G = size_t(gate_count(cell));
  const Tensor* h0 = optional_input(in, 5);
  const Tensor* c0 = cell == Cell::lstm ? optional_input(in, 6) : nullptr;
  const Tensor* peep = cell == Cell::lstm ? optional_input(in, 7) : nullptr;
  Tensor* y = out.size() > 0 ? out[0] : nullptr;
  Tensor* y_h = out.size() > 1 ? out[1] : nullptr;
  Tensor* y_c = out.size() > 2 ? out[2] : nullptr;
  const bool reverse_only = node.attr_string("direction", "forward") == "reverse";
  // Offset of the state row (dir, b) in a [dirs, batch, H] or [batch, dirs, H] tensor.
  auto state_at = [&](int64_t dir, size_t b) {
    return (d.batch_first ? b * size_t(d.dirs) + size_t(dir) : size_t(dir) * B + b) * H;
  };
  for (int64_t dir = 0; dir < d.dirs; ++dir) {
    const DirectionWeights& wt = packed->dirs[size_t(dir)];
    // The input projection of every step at once: rows of X in memory order.
    const size_t rows = size_t(d.seq) * B;
    ws.xw.resize(rows * G * H);
    kernels::GemmCall call;
    call.m = rows;
    call.a = in[0]->data<float>();
    call.a_stride = size_t(d.input);
    call.n = G * H;
    call.c = ws.xw.data();
    call.c_stride = G * H;
    call.epilogue.bias = wt.input_bias.data();
    kernels::gemm(call, wt.w, ws.scratch);
    ws.h.assign(B * H, 0.0f);
    ws.c.assign(B * H, 0.0f);
    for (size_t b = 0; b < B; ++b) {
      if (h0) std::memcpy(ws.h.data() + b * H, h0->data<float>() + state_at(dir, b), H * sizeof(float));
      if (c0) std::memcpy(ws.c.data() + b * H, c0->data<float>() + state_at(dir, b), H * sizeof(float));
    }
    const Direction direction{&node, cell, &d, &wt,
                              peep ? peep->data<float>() + size_t(dir) * 3 * H : nullptr,
                              reverse_only || dir == 1, node.has_attr("clip"),
                              node.attr_int("input_forget", 0) != 0, node.attr_int("linear_before_reset", 0) != 0,
                              node.attr_float("clip", 0)};
    run_direction(direction, ws, y, dir);
    for (size_t b = 0; b < B; ++b) {
      if (y_h) std::memcpy(y_h->data<float>() + state_at(dir, b), ws.h.data() + b * H, H * sizeof(float));
      if (y_c) std::memcpy(y_c->data<float>() + state_at(dir, b), ws.c.data() + b * H, H * sizeof(float));
    }
  }
}

}  // namespace recurrent_rule

void add_recurrent_rules(RuleTable& t) {
  using namespace recurrent_rule;
  const TileRule rule{recurrent_cuttable, recurrent_needs, recurrent_run, recurrent_prepare, recurrent_prepared_bytes,
                      /*every_output=*/true};
  t["LSTM"] = rule;
  t["GRU"] = rule;
  t["RNN"] = rule;
}

}  // namespace grove::tiling
