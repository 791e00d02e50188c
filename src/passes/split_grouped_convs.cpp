// Grouped convs (more than one input channel per group, not depthwise) become one ordinary
// conv per group: Slice x's channels of the group, Conv with the group's weights, and one
// Concat of the groups' outputs along the channels. Why: an ordinary conv runs on every
// fast path grove has (channels-last, blocked, Winograd, tuned grids), a grouped one only on
// the NCHW GEMM, which measured several times slower per FLOP: three 128-channel 3x3 convs of
// 2 groups on 7x7 took 0.49 ms at 1 thread, split by hand 0.12, and the dense layers, with
// twice the FLOPs, 0.16 (Zen 5; docs/dccnn.md has the table).
//
// Consecutive grouped convs of the same group count (DCCNN's class-specific paths, thesis 004
// 3.2) become independent chains: a group's conv reads the previous conv's output of the same
// group directly, not a slice of their Concat, so each path is a chain of its own in the
// dataflow graph and no tile of one path waits for another path.
//
// Left grouped: convs with a fused residual (the residual would need slicing too) and convs
// with more than kMaxGroups groups, where one op per group pays its per-op and per-tile costs
// too often: split too, RegNet-400MF's layers of 25-55 groups of 16 channels measured
// 0.63-0.85x, ResNeXt-50's 32 groups 0.90-1.03x with 2.4 times the plan time (Zen 5,
// interleaved medians at 1 and 2 threads). Up to 16 groups, RegNetX-400MF measured 1.13-1.25x.
#include <algorithm>
#include <map>
#include <string>

#include "graph/node_decisions.h"
#include "ops/op_names.h"
#include "passes/graph_lookup.h"
#include "passes/passes.h"

namespace grove {
namespace {

constexpr int64_t kMaxGroups = 16;

Node slice_node(Graph& g, const std::string& base, const std::string& x, const std::string& out, int64_t begin,
                int64_t end) {
  Node s;
  s.name = out + "/Slice";
  s.op_type = kSlice;
  s.opset = 13;
  s.inputs = {x, add_i64_constant(g, base + "/starts", begin), add_i64_constant(g, base + "/ends", end),
              add_i64_constant(g, base + "/axes", 1)};
  s.outputs = {out};
  return s;
}

// Rows [first, first + count) of a constant's first dim.
Tensor first_dim_rows(const Tensor& t, int64_t first, int64_t count) {
  Shape shape = t.shape();
  const int64_t per_row = t.numel() / shape[0];
  shape[0] = count;
  Tensor out(DType::f32, shape);
  std::copy_n(t.data<float>() + first * per_row, count * per_row, out.data<float>());
  return out;
}

bool splits(const Graph& g, const Node& n) {
  if (n.op_type != kConv || !n.domain.empty() || n.inputs.size() < 2 || n.outputs.size() != 1) return false;
  const int64_t groups = n.attr_int("group", 1);
  if (groups <= 1 || groups > kMaxGroups) return false;
  const ValueInfo *x = info(g, n.inputs[0]), *y = info(g, n.outputs[0]);
  const Tensor* w = constant(g, n.inputs[1]);
  if (!f32_4d(x) || !f32_4d(y) || !w || w->dtype() != DType::f32 || w->rank() != 4 || w->dim(1) <= 1) return false;
  if (w->dim(0) % groups != 0 || x->shape[1] != w->dim(1) * groups || y->shape[1] != w->dim(0)) return false;
  if (n.inputs.size() > 2 && !n.inputs[2].empty()) {
    const Tensor* b = constant(g, n.inputs[2]);
    if (!b || b->dtype() != DType::f32 || b->numel() != w->dim(0)) return false;
  }
  return n.inputs.size() <= kEpilogueResidualInput || n.inputs[kEpilogueResidualInput].empty();
}

}  // namespace

int split_grouped_convs(Graph& g) {
  std::map<std::string, std::vector<std::string>> parts_of;  // a Concat made here -> its groups' values
  std::vector<Node> out;
  int split = 0;
  for (Node& n : g.nodes) {
    if (!splits(g, n)) {
      out.push_back(std::move(n));
      continue;
    }
    const int64_t groups = n.attr_int("group", 1);
    const Tensor w = *constant(g, n.inputs[1]);
    const bool has_bias = n.inputs.size() > 2 && !n.inputs[2].empty();
    const Tensor bias = has_bias ? *constant(g, n.inputs[2]) : Tensor();
    const ValueInfo x = *info(g, n.inputs[0]), y = *info(g, n.outputs[0]);
    const int64_t cin = w.dim(1), cout = w.dim(0) / groups;
    auto part = parts_of.find(n.inputs[0]);
    const bool same_paths = part != parts_of.end() && static_cast<int64_t>(part->second.size()) == groups;
    Node concat;
    concat.name = n.name.empty() ? n.outputs[0] + "/Concat" : n.name + "/Concat";
    concat.op_type = kConcat;
    concat.opset = 13;
    concat.attrs["axis"].kind = Attribute::Kind::i;
    concat.attrs["axis"].i = 1;
    concat.outputs = {n.outputs[0]};
    for (int64_t k = 0; k < groups; ++k) {
      const std::string base = (n.name.empty() ? n.outputs[0] : n.name) + "/group" + std::to_string(k);
      std::string xk;
      if (same_paths) {
        xk = part->second[static_cast<size_t>(k)];
      } else {
        xk = base + "/x";
        Shape s = x.shape;
        s[1] = cin;
        g.values[xk] = ValueInfo{x.dtype, s, nullptr, true};
        out.push_back(slice_node(g, base, n.inputs[0], xk, k * cin, (k + 1) * cin));
      }
      Node c = n;
      c.name = base;
      c.attrs.erase("group");
      c.inputs[0] = xk;
      c.inputs[1] = base + "/weight";
      g.initializers[c.inputs[1]] = first_dim_rows(w, k * cout, cout);
      g.values[c.inputs[1]] = ValueInfo{DType::f32, g.initializers[c.inputs[1]].shape(), nullptr, true};
      if (has_bias) {
        c.inputs[2] = base + "/bias";
        g.initializers[c.inputs[2]] = first_dim_rows(bias, k * cout, cout);
        g.values[c.inputs[2]] = ValueInfo{DType::f32, {cout}, nullptr, true};
      }
      c.outputs = {base + "/y"};
      Shape s = y.shape;
      s[1] = cout;
      g.values[c.outputs[0]] = ValueInfo{y.dtype, s, nullptr, true};
      concat.inputs.push_back(c.outputs[0]);
      out.push_back(std::move(c));
    }
    parts_of[n.outputs[0]] = concat.inputs;
    out.push_back(std::move(concat));
    ++split;
  }
  g.nodes = std::move(out);
  if (split > 0) remove_dead_nodes(g);  // a Concat whose readers all read its groups, the split weights' sources
  return split;
}

}  // namespace grove
