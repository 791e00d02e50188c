#pragma once
// Shared by test_plan.cpp and test_planned_run.cpp: small models, TileRules written here
// (independent of src/ops' rules, so the planner is tested on its own), a brute-force
// dependency oracle and a serial driver that runs tiles in a random topological order.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <random>
#include <set>

#include "passes/bind.h"
#include "ops/evaluate.h"
#include "onnx/import.h"
#include "onnx_builder.h"
#include "plan/plan.h"
#include "runtime/model.h"
#include "runtime/planned_run.h"

namespace grove::test {

constexpr int kF32 = onnx::TensorProto::FLOAT;

inline std::vector<float> seeded_values(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> u(-1.f, 1.f);
  std::vector<float> v(n);
  for (auto& x : v) x = u(rng);
  return v;
}

inline Tensor seeded_tensor(Shape shape, uint32_t seed) {
  std::vector<float> v = seeded_values(static_cast<size_t>(numel(shape)), seed);
  return Tensor::from<float>(std::move(shape), v);
}

inline void weight(OnnxBuilder& b, const std::string& name, std::vector<int64_t> dims, uint32_t seed) {
  b.initializer_f32(name, dims, seeded_values(static_cast<size_t>(numel(dims)), seed));
}

// Copies region r of `from` into the same region of `to` (same shape and dtype).
inline void copy_region(const Tensor& from, Tensor& to, const Region& r) {
  if (volume(r) == 0) return;
  size_t es = dtype_size(from.dtype());
  const Shape& s = from.shape();
  std::vector<int64_t> idx(r.size());
  for (size_t d = 0; d < r.size(); ++d) idx[d] = r[d].begin;
  while (true) {
    int64_t off = 0;
    for (size_t d = 0; d < r.size(); ++d) off = off * s[d] + idx[d];
    std::memcpy(to.raw() + off * es, from.raw() + off * es, es);
    size_t d = r.size();
    while (d-- > 0) {
      if (++idx[d] < r[d].end) break;
      idx[d] = r[d].begin;
    }
    if (d == static_cast<size_t>(-1)) return;
  }
}

// run_tile of every test rule: the whole op by its reference, then only the tile's region
// copied out. The ops used here are local (an output element depends on its window only),
// so NaN in unread input elements cannot leak into the region: a missing edge shows.
inline void whole_then_copy(const Node& node, std::span<const Tensor* const> in, std::span<Tensor* const> out,
                            const Region& r, const void*, TileScratch&) {
  std::vector<Tensor> full = evaluate_node(node, in);
  copy_region(full[0], *out[0], r);
}

inline std::vector<int64_t> test_cut_all(const Node&, std::span<const ValueInfo>, std::span<const ValueInfo> out) {
  return std::vector<int64_t>(out[0].shape.size(), 1);
}

inline Region broadcast_need(const Shape& in, const Region& out) {
  Region r(in.size());
  size_t shift = out.size() - in.size();
  for (size_t d = 0; d < in.size(); ++d) r[d] = in[d] == 1 ? Range{0, 1} : out[d + shift];
  return r;
}

inline void test_elementwise_needs(const Node&, std::span<const ValueInfo> in, std::span<const ValueInfo>,
                                   const Region& out, std::span<Region> need) {
  for (size_t i = 0; i < in.size(); ++i) need[i] = in[i].present ? broadcast_need(in[i].shape, out) : Region{};
}

// Softmax over the last axis: rows may be cut, the last dim not.
inline std::vector<int64_t> test_cut_rows(const Node&, std::span<const ValueInfo>, std::span<const ValueInfo> out) {
  std::vector<int64_t> b(out[0].shape.size(), 1);
  if (!b.empty()) b.back() = 0;
  return b;
}

// Conv (group 1) and MaxPool, NCHW: rows and columns widened by kernel, stride, pad, dilation.
inline void test_window_needs(const Node& node, std::span<const ValueInfo> in, std::span<const ValueInfo>,
                              const Region& out, std::span<Region> need) {
  bool conv = node.op_type == "Conv";
  const Shape& x = in[0].shape;
  size_t spatial = x.size() - 2;
  std::vector<int64_t> kernel = conv ? Shape(in[1].shape.begin() + 2, in[1].shape.end()) : node.attr_ints("kernel_shape");
  std::vector<int64_t> strides = node.attr_ints("strides", std::vector<int64_t>(spatial, 1));
  std::vector<int64_t> pads = node.attr_ints("pads", std::vector<int64_t>(2 * spatial, 0));
  std::vector<int64_t> dil = node.attr_ints("dilations", std::vector<int64_t>(spatial, 1));
  Region r = out;
  if (conv) r[1] = {0, x[1]};
  for (size_t s = 0; s < spatial; ++s) {
    int64_t b = out[2 + s].begin * strides[s] - pads[s];
    int64_t e = (out[2 + s].end - 1) * strides[s] - pads[s] + (kernel[s] - 1) * dil[s] + 1;
    r[2 + s] = {std::max<int64_t>(b, 0), std::min(e, x[2 + s])};
  }
  need[0] = r;
  for (size_t i = 1; i < in.size(); ++i) need[i] = in[i].present ? full_region(in[i].shape) : Region{};
}

// MatMul with a 2-D B: rows of A over all of K; all of B's K over the tile's columns.
inline void test_matmul_needs(const Node&, std::span<const ValueInfo> in, std::span<const ValueInfo>,
                              const Region& out, std::span<Region> need) {
  Region a = out;
  a.back() = {0, in[0].shape.back()};
  need[0] = a;
  need[1] = {{0, in[1].shape[0]}, out.back()};
}

// Concat: the part of the tile along the axis that falls in each input, shifted.
inline void test_concat_needs(const Node& node, std::span<const ValueInfo> in, std::span<const ValueInfo> o,
                              const Region& out, std::span<Region> need) {
  int64_t axis = node.attr_int("axis", 0);
  if (axis < 0) axis += static_cast<int64_t>(o[0].shape.size());
  int64_t offset = 0;
  for (size_t i = 0; i < in.size(); ++i) {
    int64_t len = in[i].shape[axis];
    int64_t b = std::max(out[axis].begin, offset), e = std::min(out[axis].end, offset + len);
    if (b < e) {
      need[i] = out;
      need[i][axis] = {b - offset, e - offset};
    } else {
      need[i] = {};
    }
    offset += len;
  }
}

inline void test_transpose_needs(const Node& node, std::span<const ValueInfo> in, std::span<const ValueInfo>,
                                 const Region& out, std::span<Region> need) {
  std::vector<int64_t> perm = node.attr_ints("perm");
  Region r(in[0].shape.size());
  for (size_t d = 0; d < perm.size(); ++d) r[perm[d]] = out[d];
  need[0] = r;
}

// Cuts only in multiples of 3 along dim 1 and 4 along dim 2, to test block multiples.
inline std::vector<int64_t> test_cut_blocky(const Node&, std::span<const ValueInfo>, std::span<const ValueInfo> out) {
  std::vector<int64_t> b(out[0].shape.size(), 1);
  if (b.size() >= 3) b[1] = 3, b[2] = 4;
  return b;
}

inline const TileRule* test_rule(const Node& node) {
  static const TileRule elementwise{test_cut_all, test_elementwise_needs, whole_then_copy};
  static const TileRule softmax{test_cut_rows, test_elementwise_needs, whole_then_copy};
  static const TileRule window{test_cut_all, test_window_needs, whole_then_copy};
  static const TileRule matmul{test_cut_all, test_matmul_needs, whole_then_copy};
  static const TileRule concat{test_cut_all, test_concat_needs, whole_then_copy};
  static const TileRule transpose{test_cut_all, test_transpose_needs, whole_then_copy};
  static const TileRule blocky{test_cut_blocky, test_elementwise_needs, whole_then_copy};
  const std::string& op = node.op_type;
  if (op == "Relu" || op == "Sigmoid" || op == "Add" || op == "Mul") return &elementwise;
  if (op == "Tanh") return &blocky;
  if (op == "Softmax") return &softmax;
  if (op == "Conv" || op == "MaxPool") return &window;
  if (op == "MatMul") return &matmul;
  if (op == "Concat") return &concat;
  if (op == "Transpose") return &transpose;
  return nullptr;  // Reshape, Split, ...: one whole tile by the reference
}

// ---- Small models ----

struct TestModel {
  std::string name;
  std::string bytes;
  TensorMap inputs;
};

// x:[1,3,19,15] -> Conv s2 p1 -> Relu -> Conv dilation 2 -> MaxPool 2x2 s2 -> Conv 1x1.
inline TestModel conv_chain() {
  OnnxBuilder b;
  b.input("x", kF32, {1, 3, 19, 15}).output("y", kF32, {1, 5, 2, 2});
  weight(b, "w1", {4, 3, 3, 3}, 1);
  weight(b, "b1", {4}, 2);
  weight(b, "w2", {6, 4, 3, 3}, 3);
  weight(b, "w3", {5, 6, 1, 1}, 4);
  auto& c1 = b.node("Conv", {"x", "w1", "b1"}, {"c1"}, "conv1");
  OnnxBuilder::attr_ints(c1, "strides", {2, 2});
  OnnxBuilder::attr_ints(c1, "pads", {1, 1, 1, 1});
  b.node("Relu", {"c1"}, {"r1"}, "relu1");
  auto& c2 = b.node("Conv", {"r1", "w2"}, {"c2"}, "conv2");
  OnnxBuilder::attr_ints(c2, "dilations", {2, 2});
  OnnxBuilder::attr_ints(c2, "pads", {2, 1, 2, 1});
  auto& p = b.node("MaxPool", {"c2"}, {"p"}, "pool");
  OnnxBuilder::attr_ints(p, "kernel_shape", {2, 2});
  OnnxBuilder::attr_ints(p, "strides", {2, 2});
  b.node("Conv", {"p", "w3"}, {"y"}, "conv3");
  return {"conv_chain", b.bytes(), {{"x", seeded_tensor({1, 3, 19, 15}, 10)}}};
}

// A residual block: y = Relu(Conv(Relu(Conv(x))) + x), plus an add of two intermediates.
inline TestModel residual() {
  OnnxBuilder b;
  b.input("x", kF32, {1, 4, 12, 12}).output("y", kF32, {1, 4, 12, 12}).output("z", kF32, {1, 4, 12, 12});
  weight(b, "w1", {4, 4, 3, 3}, 5);
  weight(b, "w2", {4, 4, 3, 3}, 6);
  OnnxBuilder::attr_ints(b.node("Conv", {"x", "w1"}, {"c1"}, "conv1"), "pads", {1, 1, 1, 1});
  b.node("Relu", {"c1"}, {"r1"}, "relu1");
  OnnxBuilder::attr_ints(b.node("Conv", {"r1", "w2"}, {"c2"}, "conv2"), "pads", {1, 1, 1, 1});
  b.node("Add", {"c2", "x"}, {"s"}, "add");
  b.node("Relu", {"s"}, {"y"}, "relu2");
  b.node("Add", {"c1", "c2"}, {"z"}, "add_mid");
  return {"residual", b.bytes(), {{"x", seeded_tensor({1, 4, 12, 12}, 11)}}};
}

// x:[2,9,16] -> MatMul -> Add bias -> Sigmoid -> MatMul -> Softmax; and a Tanh (blocky rule).
inline TestModel matmul_chain() {
  OnnxBuilder b;
  b.input("x", kF32, {2, 9, 16}).output("y", kF32, {2, 9, 8}).output("t", kF32, {2, 9, 24});
  weight(b, "w1", {16, 24}, 7);
  weight(b, "b1", {24}, 8);
  weight(b, "w2", {24, 8}, 9);
  b.node("MatMul", {"x", "w1"}, {"m1"}, "mm1");
  b.node("Add", {"m1", "b1"}, {"a1"}, "bias1");
  b.node("Sigmoid", {"a1"}, {"s1"}, "sig");
  b.node("MatMul", {"s1", "w2"}, {"m2"}, "mm2");
  OnnxBuilder::attr_int(b.node("Softmax", {"m2"}, {"y"}, "softmax"), "axis", -1);
  b.node("Tanh", {"a1"}, {"t"}, "tanh");
  return {"matmul_chain", b.bytes(), {{"x", seeded_tensor({2, 9, 16}, 12)}}};
}

// Concat, Transpose, Reshape (no rule), Split (two outputs, no rule), MatMul.
inline TestModel concat_reshape() {
  OnnxBuilder b;
  b.input("x", kF32, {1, 6, 10}).output("y", kF32, {10, 5}).output("u", kF32, {1, 4, 10});
  weight(b, "w", {12, 5}, 13);
  b.initializer_i64("shape", {2}, {10, 12});
  b.initializer_i64("split", {2}, {8, 4});
  b.node("Relu", {"x"}, {"a"}, "relu");
  b.node("Sigmoid", {"x"}, {"s"}, "sigmoid");
  OnnxBuilder::attr_int(b.node("Concat", {"a", "s"}, {"c"}, "concat"), "axis", 1);
  OnnxBuilder::attr_ints(b.node("Transpose", {"c"}, {"t"}, "transpose"), "perm", {0, 2, 1});
  b.node("Reshape", {"t", "shape"}, {"r"}, "reshape");
  b.node("MatMul", {"r", "w"}, {"y"}, "mm");
  OnnxBuilder::attr_int(b.node("Split", {"c", "split"}, {"v", "u0"}, "split"), "axis", 1);
  b.node("Relu", {"u0"}, {"u"}, "relu_u");
  return {"concat_reshape", b.bytes(), {{"x", seeded_tensor({1, 6, 10}, 14)}}};
}

inline std::vector<TestModel> all_test_models() { return {conv_chain(), residual(), matmul_chain(), concat_reshape()}; }

inline Model load_test_model(const TestModel& m) { return model_from_graph(load_onnx_bytes(m.bytes, m.name + ".onnx")); }

// The model bound but not optimised: every op stays a node of its own (no epilogue fusion),
// for tests about the tiles of one particular op.
inline Graph unfused_graph(const TestModel& m) {
  Graph g = load_onnx_bytes(m.bytes, m.name + ".onnx");
  bind_shapes(g, {});
  return g;
}

// ---- Running and checking ----

// Runs every tile once, in a random order that respects the DAG (like any engine schedule).
inline void run_serial(PlannedRun& run, uint32_t seed) {
  DagView dag = run.dag();
  std::vector<int32_t> waiting(dag.n_parents.begin(), dag.n_parents.end());
  std::vector<int32_t> ready(dag.sources.begin(), dag.sources.end());
  std::mt19937 rng(seed);
  size_t done = 0;
  while (!ready.empty()) {
    size_t pick = std::uniform_int_distribution<size_t>(0, ready.size() - 1)(rng);
    int32_t t = ready[pick];
    ready[pick] = ready.back();
    ready.pop_back();
    run.run_tile(t, 0);
    ++done;
    for (int64_t c = dag.child_begin[t]; c < dag.child_begin[t + 1]; ++c)
      if (--waiting[dag.children[c]] == 0) ready.push_back(dag.children[c]);
  }
  ASSERT_EQ(done, dag.n_parents.size()) << "some tiles never became ready";
}

inline void expect_close(const TensorMap& got, const TensorMap& want, double tol, const std::string& what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  for (const auto& [name, w] : want) {
    auto it = got.find(name);
    ASSERT_NE(it, got.end()) << what << ": missing output " << name;
    const Tensor& g = it->second;
    ASSERT_EQ(g.shape(), w.shape()) << what << ": " << name;
    std::vector<double> gv = g.to_f64(), wv = w.to_f64();
    for (size_t i = 0; i < wv.size(); ++i)
      ASSERT_LE(std::abs(gv[i] - wv[i]), tol * (1 + std::abs(wv[i]))) << what << ": " << name << "[" << i << "]";
  }
}

}  // namespace grove::test
