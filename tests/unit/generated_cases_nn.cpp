// Generators of the compute ops: MatMul with broadcasting, Gemm with every transpose and
// scale and each shape of C, Conv of 1 to 3 spatial dims with groups, strides, dilations,
// pads or auto_pad, the pools, and the recurrent ops in every direction and layout.
#include <algorithm>

#include "generated_cases.h"

namespace grove::gen {
namespace {

Case matmul(Draw& d, const std::string& op) {
  const int64_t m = d.dim(), k = d.dim(), n = d.dim();
  const size_t batch_rank = static_cast<size_t>(d.between(0, 2));
  const Shape batch = d.shape(batch_rank, 12, 5);
  Shape a = batch, b = batch;
  a.push_back(m), a.push_back(k);
  b.push_back(k), b.push_back(n);
  // Broadcast batches: one side may drop leading dims or hold 1s; 1-D operands are vectors.
  if (d.chance(0.3)) b = Shape(b.end() - 2, b.end());
  for (size_t i = 0; i + 2 < a.size(); ++i)
    if (d.chance(0.2)) a[i] = 1;
  if (d.chance(0.1)) a = {k};
  if (d.chance(0.1)) b = {k};
  return Case{node(op, 13, 2), {d.f32(a), d.f32(b)}, {false, d.chance(0.6)}, 1e-5};
}

Case gemm(Draw& d, const std::string& op) {
  const int64_t m = d.dim(), k = d.dim(), n = d.dim();
  const bool trans_a = d.chance(0.4), trans_b = d.chance(0.5);
  Case c{node(op, d.chance(0.2) ? 9 : 13, 3), {}, {}, 1e-5};
  if (trans_a || d.chance(0.2)) set_attr(c.node, "transA", int64_t{trans_a});
  if (trans_b || d.chance(0.2)) set_attr(c.node, "transB", int64_t{trans_b});
  if (d.chance(0.4)) set_attr(c.node, "alpha", static_cast<float>(d.pick(std::vector<double>{0.5, 1, 2, -1})));
  if (d.chance(0.4)) set_attr(c.node, "beta", static_cast<float>(d.pick(std::vector<double>{0, 0.5, 1, 2})));
  c.inputs = {d.f32(trans_a ? Shape{k, m} : Shape{m, k}), d.f32(trans_b ? Shape{n, k} : Shape{k, n})};
  c.constant = {false, d.chance(0.7)};
  const int pick = static_cast<int>(d.between(0, 5));
  if (pick == 0 && c.node.opset >= 11) {
    c.node.inputs.pop_back();  // C is optional from opset 11
  } else {
    const std::vector<Shape> shapes = {{n}, {n}, {1, n}, {m, 1}, {m, n}, {}};
    c.inputs.push_back(d.f32(shapes[static_cast<size_t>(pick)]));
    c.constant.push_back(c.constant[1]);
  }
  return c;
}

// Spatial geometry shared by Conv and the pools: kernel, strides, dilations, pads or auto_pad.
struct Window {
  Shape x;                   // [N, C, spatial...]
  std::vector<int64_t> kernel, strides, dilations, pads;
  std::string auto_pad;
};

Window window(Draw& d, size_t spatial, int64_t channels, bool dilate) {
  Window w;
  w.x = {d.between(1, 2), channels};
  for (size_t i = 0; i < spatial; ++i) {
    const int64_t k = d.pick(std::vector<int64_t>{1, 1, 2, 3, 3, 5});
    const int64_t dil = dilate && d.chance(0.2) ? 2 : 1;
    const int64_t s = d.chance(0.7) ? 1 : d.between(2, 3);
    const int64_t extent = (k - 1) * dil + 1;
    w.x.push_back(std::max<int64_t>(extent, d.between(1, spatial == 1 ? 40 : spatial == 2 ? 14 : 6)));
    w.kernel.push_back(k), w.strides.push_back(s), w.dilations.push_back(dil);
  }
  w.pads.assign(2 * spatial, 0);
  const int p = static_cast<int>(d.between(0, 5));
  if (p == 1) w.auto_pad = "SAME_UPPER";
  else if (p == 2) w.auto_pad = "SAME_LOWER";
  else if (p == 3) w.auto_pad = "VALID";
  else if (p >= 4)
    for (size_t i = 0; i < spatial; ++i) {  // a pad stays below the kernel's extent
      const int64_t extent = (w.kernel[i] - 1) * w.dilations[i] + 1;
      w.pads[i] = d.between(0, extent - 1), w.pads[i + spatial] = d.between(0, extent - 1);
    }
  return w;
}

void set_window(Draw& d, Node& n, const Window& w, bool dilations) {
  if (d.chance(0.6)) set_attr(n, "kernel_shape", w.kernel);
  if (std::any_of(w.strides.begin(), w.strides.end(), [](int64_t s) { return s != 1; }) || d.chance(0.2))
    set_attr(n, "strides", w.strides);
  if (dilations && (std::any_of(w.dilations.begin(), w.dilations.end(), [](int64_t s) { return s != 1; }) || d.chance(0.2)))
    set_attr(n, "dilations", w.dilations);
  if (!w.auto_pad.empty()) set_attr(n, "auto_pad", w.auto_pad);
  else if (std::any_of(w.pads.begin(), w.pads.end(), [](int64_t p) { return p != 0; }) || d.chance(0.2))
    set_attr(n, "pads", w.pads);
}

Case conv(Draw& d, const std::string& op) {
  const size_t spatial = static_cast<size_t>(d.pick(std::vector<int64_t>{1, 2, 2, 2, 3}));
  // Groups: one, depthwise, or a few with several channels each.
  const int shape_kind = static_cast<int>(d.between(0, 3));
  int64_t group = 1, cin = d.pick(std::vector<int64_t>{1, 3, 4, 8, 16, 17}), cout = d.pick(std::vector<int64_t>{1, 4, 8, 16, 17, 32});
  if (shape_kind == 1) group = cin = cout = d.pick(std::vector<int64_t>{3, 8, 16, 17});
  if (shape_kind == 2) group = d.between(2, 3), cin = group * d.between(1, 4), cout = group * d.between(1, 4);
  Window w = window(d, spatial, cin, true);
  if (group == 1 && spatial == 1 && d.chance(0.5)) w.kernel[0] = std::min<int64_t>(w.kernel[0], w.x[2]);
  Case c{node(op, 11, 3), {}, {}, 1e-4};
  set_window(d, c.node, w, true);
  if (group != 1 || d.chance(0.2)) set_attr(c.node, "group", group);
  Shape ws = {cout, cin / group};
  ws.insert(ws.end(), w.kernel.begin(), w.kernel.end());
  c.inputs = {d.f32(w.x), d.f32(ws, -0.5, 0.5)};
  const bool constant = d.chance(0.85);
  c.constant = {false, constant};
  if (d.chance(0.7)) c.inputs.push_back(d.f32({cout})), c.constant.push_back(constant);
  else c.node.inputs.pop_back();
  return c;
}

Case pool(Draw& d, const std::string& op) {
  const size_t spatial = static_cast<size_t>(d.pick(std::vector<int64_t>{1, 2, 2, 3}));
  const int64_t channels = d.pick(std::vector<int64_t>{1, 3, 8, 16, 17});
  if (op == "GlobalAveragePool" || op == "GlobalMaxPool") {
    Shape s = {d.between(1, 2), channels};
    for (size_t i = 0; i < spatial; ++i) s.push_back(d.between(1, spatial == 3 ? 6 : 12));
    return Case{node(op, 1, 1), {d.f32(s)}, {false}, op == "GlobalAveragePool" ? 1e-5 : 0};
  }
  const bool max = op == "MaxPool";
  Window w = window(d, spatial, channels, max);
  for (auto& k : w.kernel) k = std::max<int64_t>(k, 1);
  Case c{node(op, max ? 12 : 11, 1), {d.f32(w.x)}, {false}, max ? 0 : 1e-5};
  set_attr(c.node, "kernel_shape", w.kernel);
  if (std::any_of(w.strides.begin(), w.strides.end(), [](int64_t s) { return s != 1; })) set_attr(c.node, "strides", w.strides);
  if (max && std::any_of(w.dilations.begin(), w.dilations.end(), [](int64_t s) { return s != 1; }))
    set_attr(c.node, "dilations", w.dilations);
  if (!w.auto_pad.empty()) set_attr(c.node, "auto_pad", w.auto_pad);
  else if (std::any_of(w.pads.begin(), w.pads.end(), [](int64_t p) { return p != 0; })) {
    // Pads below the kernel (a window must overlap the image).
    for (size_t i = 0; i < spatial; ++i)
      w.pads[i] = std::min(w.pads[i], w.kernel[i] - 1), w.pads[i + spatial] = std::min(w.pads[i + spatial], w.kernel[i] - 1);
    set_attr(c.node, "pads", w.pads);
  }
  if (w.auto_pad.empty() && d.chance(0.3)) set_attr(c.node, "ceil_mode", int64_t{1});
  if (!max && d.chance(0.5)) set_attr(c.node, "count_include_pad", d.between(0, 1));
  return c;
}

Case recurrent(Draw& d, const std::string& op) {
  const int64_t gates = op == "LSTM" ? 4 : op == "GRU" ? 3 : 1;
  const int64_t seq = d.between(1, 5), batch = d.between(1, 3), input = d.dim(17), hidden = d.dim(17);
  const std::string direction = d.pick(std::vector<std::string>{"forward", "reverse", "bidirectional"});
  const int64_t dirs = direction == "bidirectional" ? 2 : 1;
  const bool batch_first = d.chance(0.3);
  Case c{node(op, 14, op == "LSTM" ? 8 : 6, op == "LSTM" ? 3 : 2), {}, {}, 1e-5};
  set_attr(c.node, "hidden_size", hidden);
  if (direction != "forward" || d.chance(0.3)) set_attr(c.node, "direction", direction);
  if (batch_first) set_attr(c.node, "layout", int64_t{1});
  if (op == "GRU" && d.chance(0.5)) set_attr(c.node, "linear_before_reset", int64_t{1});
  c.inputs = {d.f32(batch_first ? Shape{batch, seq, input} : Shape{seq, batch, input}),
              d.f32({dirs, gates * hidden, input}, -0.5, 0.5), d.f32({dirs, gates * hidden, hidden}, -0.5, 0.5)};
  c.constant = {false, true, true};
  auto optional = [&](Tensor t, bool constant) {
    const bool present = d.chance(0.6);
    c.inputs.push_back(present ? std::move(t) : Tensor());
    c.constant.push_back(constant);
  };
  optional(d.f32({dirs, 2 * gates * hidden}, -0.5, 0.5), true);
  optional(d.ints(DType::i32, {batch}, 1, seq), false);
  const Shape state = batch_first ? Shape{batch, dirs, hidden} : Shape{dirs, batch, hidden};
  optional(d.f32(state), false);
  if (op == "LSTM") {
    optional(d.f32(state), false);
    optional(d.f32({dirs, 3 * hidden}, -0.5, 0.5), true);
  }
  // Outputs the graph leaves unnamed: Y alone, or Y with the last states.
  for (size_t i = 1; i < c.node.outputs.size(); ++i)
    if (d.chance(0.4)) c.node.outputs[i].clear();
  while (!c.node.outputs.empty() && c.node.outputs.back().empty()) c.node.outputs.pop_back();
  return c;
}

}  // namespace

void add_nn_families(std::vector<Family>& families) {
  families.push_back({"matmul", {"MatMul"}, matmul});
  families.push_back({"gemm", {"Gemm"}, gemm});
  families.push_back({"conv", {"Conv"}, conv});
  families.push_back({"pool", {"MaxPool", "AveragePool", "GlobalAveragePool", "GlobalMaxPool"}, pool});
  families.push_back({"recurrent", {"LSTM", "GRU", "RNN"}, recurrent});
}

}  // namespace grove::gen
