// FLOP counts per node: 2 x MACs for Conv/ConvTranspose/MatMul/Gemm and the recurrent ops,
// window reads for pooling, nothing for data movement, one per output element otherwise;
// each op's spec (ops/op.h) gives its count.
#include <gtest/gtest.h>

#include "graph/node_decisions.h"
#include "ops/op.h"
#include "passes/flops.h"

namespace grove {
namespace {

struct FlopsGraph {
  Graph g;
  void value(const std::string& name, Shape shape) { g.values[name] = ValueInfo{DType::f32, std::move(shape), nullptr, true}; }
  const Node& node(const std::string& op, std::vector<std::string> in, std::string out,
                   std::map<std::string, Attribute> attrs = {}) {
    Node n;
    n.name = op + "_" + std::to_string(g.nodes.size());
    n.op_type = op;
    n.inputs = std::move(in);
    n.outputs = {std::move(out)};
    n.attrs = std::move(attrs);
    g.nodes.push_back(std::move(n));
    return g.nodes.back();
  }
};

Attribute ints(std::vector<int64_t> v) {
  Attribute a;
  a.kind = Attribute::Kind::ints;
  a.ints = std::move(v);
  return a;
}
Attribute one(int64_t v) {
  Attribute a;
  a.kind = Attribute::Kind::i;
  a.i = v;
  return a;
}

TEST(Flops, ConvCountsTwoMacsPerOutputWeight) {
  FlopsGraph f;
  f.value("x", {1, 3, 8, 8});
  f.value("w", {16, 3, 3, 3});
  f.value("y", {1, 16, 8, 8});
  EXPECT_EQ(node_flops(f.g, f.node("Conv", {"x", "w"}, "y")), 2 * 16 * 64 * 27);
  // Grouped (depthwise): weight [C, 1, 3, 3].
  f.value("dw", {16, 1, 3, 3});
  f.value("z", {1, 16, 4, 4});
  EXPECT_EQ(node_flops(f.g, f.node("Conv", {"y", "dw"}, "z")), 2 * 16 * 16 * 9);
}

TEST(Flops, ConvTransposeCountsPerInputElement) {
  FlopsGraph f;
  f.value("x", {1, 4, 5, 5});
  f.value("w", {4, 2, 3, 3});
  f.value("y", {1, 2, 11, 11});
  EXPECT_EQ(node_flops(f.g, f.node("ConvTranspose", {"x", "w"}, "y")), 2 * 100 * 18);
}

TEST(Flops, MatMulAndGemm) {
  FlopsGraph f;
  f.value("a", {2, 3, 4});
  f.value("b", {4, 5});
  f.value("c", {2, 3, 5});
  EXPECT_EQ(node_flops(f.g, f.node("MatMul", {"a", "b"}, "c")), 2 * 30 * 4);
  f.value("p", {4, 5});
  f.value("q", {5, 6});
  f.value("r", {4, 6});
  EXPECT_EQ(node_flops(f.g, f.node("Gemm", {"p", "q"}, "r")), 2 * 24 * 5);
  f.value("pt", {5, 4});
  EXPECT_EQ(node_flops(f.g, f.node("Gemm", {"pt", "q"}, "r", {{"transA", one(1)}})), 2 * 24 * 5);
  EXPECT_EQ(node_flops(f.g, f.node("MatMulInteger", {"a", "b"}, "c")), 2 * 30 * 4);
}

TEST(Flops, IntegerConvCountsLikeConv) {
  FlopsGraph f;
  f.value("x", {1, 3, 8, 8});
  f.value("w", {4, 3, 3, 3});
  f.value("y", {1, 4, 6, 6});
  EXPECT_EQ(node_flops(f.g, f.node("ConvInteger", {"x", "w"}, "y")), 2 * 144 * 27);
  f.value("s", {});
  EXPECT_EQ(node_flops(f.g, f.node("QLinearConv", {"x", "s", "s", "w", "s", "s", "s", "s"}, "y")), 2 * 144 * 27);
}

TEST(Flops, PoolingReductionsAndElementwise) {
  FlopsGraph f;
  f.value("x", {1, 2, 8, 8});
  f.value("p", {1, 2, 4, 4});
  f.value("g", {1, 2, 1, 1});
  EXPECT_EQ(node_flops(f.g, f.node("MaxPool", {"x"}, "p", {{"kernel_shape", ints({3, 3})}})), 32 * 9);
  EXPECT_EQ(node_flops(f.g, f.node("GlobalAveragePool", {"x"}, "g")), 128);
  EXPECT_EQ(node_flops(f.g, f.node("ReduceMean", {"x"}, "g")), 128);
  f.value("r", {1, 2, 8, 8});
  EXPECT_EQ(node_flops(f.g, f.node("Relu", {"x"}, "r")), 128);
  EXPECT_EQ(node_flops(f.g, f.node("Add", {"x", "r"}, "r")), 128);
}

TEST(Flops, DataMovementIsFreeAndTotalsAdd) {
  FlopsGraph f;
  f.value("x", {2, 6});
  f.value("s", {2});
  f.value("y", {3, 4});
  EXPECT_EQ(node_flops(f.g, f.node("Reshape", {"x", "s"}, "y")), 0);
  EXPECT_EQ(node_flops(f.g, f.node("Transpose", {"x"}, "y")), 0);
  f.node("Relu", {"y"}, "y");
  EXPECT_EQ(graph_flops(f.g), 12);
}

TEST(Flops, RecurrentOpsCountTheirWeights) {
  FlopsGraph f;
  f.value("x", {5, 2, 3});   // sequence 5, batch 2, input 3
  f.value("w", {1, 16, 3});  // LSTM: 4 gates x hidden 4
  f.value("r", {1, 16, 4});
  f.value("y", {5, 1, 2, 4});
  EXPECT_EQ(node_flops(f.g, f.node("LSTM", {"x", "w", "r"}, "y")), 2 * 10 * (48 + 64));
}

TEST(Flops, InternalOpsCountAndEpiloguesAdd) {
  FlopsGraph f;
  f.value("x", {1, 3, 8, 8});
  f.value("w", {4, 3, 3, 3});
  f.value("y", {1, 4, 6, 6});
  Node conv = f.node("ConvIntegerScaled", {"x", "w"}, "y");
  conv.domain = kGroveDomain;
  EXPECT_EQ(node_flops(f.g, conv), 2 * 144 * 27);
  conv.decisions.epilogue.fused_flops = 144;  // a fused Relu's
  EXPECT_EQ(node_flops(f.g, conv), 2 * 144 * 27 + 144);
}

TEST(Flops, UnknownValuesAndOtherDomainsCountNothing) {
  FlopsGraph f;
  EXPECT_EQ(node_flops(f.g, f.node("Conv", {"x", "w"}, "missing")), 0);
  f.value("y", {10});
  Node custom;
  custom.op_type = "Relu";
  custom.domain = "com.example";
  custom.outputs = {"y"};
  EXPECT_EQ(node_flops(f.g, custom), 0);
}

}  // namespace
}  // namespace grove
