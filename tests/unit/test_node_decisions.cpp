// The typed decision record on nodes (graph/node_decisions.h): names round-trip, the parts of
// a fused node keep their own decisions, the graph hash sees decisions but leaves an
// undecided graph's hash alone, and a model cannot carry a decision as an attribute.
#include <gtest/gtest.h>

#include "graph/graph_hash.h"
#include "graph/node_decisions.h"
#include "onnx/import.h"
#include "ops/conv_fused/conv_max_pool.h"
#include "ops/conv_fused/expand_depthwise.h"
#include "ops/op.h"
#include "plan_test_util.h"

namespace grove {
namespace {

using namespace grove::test;

TEST(NodeDecisions, NamesRoundTrip) {
  for (ConvPrimitive p : {ConvPrimitive::unset, ConvPrimitive::gemm, ConvPrimitive::winograd, ConvPrimitive::direct,
                          ConvPrimitive::nhwc, ConvPrimitive::nchwc, ConvPrimitive::winograd_nhwc,
                          ConvPrimitive::winograd_f2x3_nhwc})
    EXPECT_EQ(parse_conv_primitive(conv_primitive_name(p)), p) << conv_primitive_name(p);
  EXPECT_FALSE(parse_conv_primitive("winograd_f6x3"));
  for (FusedActivation a : {FusedActivation::none, FusedActivation::relu, FusedActivation::clip, FusedActivation::leaky_relu,
                            FusedActivation::sigmoid, FusedActivation::hard_sigmoid, FusedActivation::hard_swish,
                            FusedActivation::gelu_erf, FusedActivation::gelu_tanh, FusedActivation::swish})
    EXPECT_EQ(parse_fused_activation(fused_activation_name(a)), a) << fused_activation_name(a);
  EXPECT_FALSE(parse_fused_activation("tanh"));
  EXPECT_TRUE(channels_last_choice(ConvPrimitive::winograd_f2x3_nhwc));
  EXPECT_FALSE(channels_last_choice(ConvPrimitive::winograd));
}

TEST(NodeDecisions, LabelAndReaders) {
  Node n;
  n.op_type = "Conv";
  EXPECT_TRUE(n.decisions.empty());
  EXPECT_EQ(op_label(n), "Conv");
  EXPECT_FALSE(has_fused_epilogue(n));
  n.decisions.epilogue.fused = "Add+Relu";
  n.decisions.precision = NodePrecision::bf16_amx;
  n.decisions.y_channel_offset = 0;
  EXPECT_EQ(op_label(n), "Conv+Add+Relu");
  EXPECT_TRUE(runs_in_bf16(n) && runs_on_amx(n));
  EXPECT_EQ(y_channel_offset(n), 0);
  EXPECT_FALSE(n.decisions.empty());  // an offset of 0 is a decision: y lies in a Concat's buffer
}

// Each part of a fused node runs with what was decided for it, the main part with the node's own.
TEST(NodeDecisions, PartsOfAFusedNodeKeepTheirOwn) {
  Node fused;
  fused.name = "block";
  fused.op_type = "InvertedResidualNhwc";
  fused.domain = kGroveDomain;
  fused.inputs = {"x", "we", "be", "wd", "bd", "wp", "bp", "r"};
  fused.outputs = {"y"};
  fused.decisions.epilogue = {.activation = FusedActivation::clip, .alpha = 0, .beta = 6, .fused = "Clip", .fused_flops = 7};
  fused.decisions.expand = Decisions{.x_nchw = true, .epilogue = {.activation = FusedActivation::relu, .fused = "Relu"}};
  fused.decisions.project = Decisions{.epilogue = {.fused = "Add"}};
  const Node e = expand_part(fused), d = depthwise_part(fused), p = project_part(fused);
  EXPECT_TRUE(reads_x_nchw(e));
  EXPECT_EQ(fused_epilogue(e).activation, FusedActivation::relu);
  EXPECT_FALSE(e.decisions.expand || e.decisions.project);
  EXPECT_EQ(static_cast<const Decisions&>(d.decisions), static_cast<const Decisions&>(fused.decisions));
  EXPECT_FALSE(d.decisions.expand || d.decisions.project);
  EXPECT_EQ(op_label(p), "ConvNhwc+Add");
  EXPECT_FALSE(reads_x_nchw(p));

  Node conv_pool;
  conv_pool.name = "stem";
  conv_pool.op_type = "ConvMaxPoolNhwc";
  conv_pool.domain = kGroveDomain;
  conv_pool.inputs = {"x", "w", "b"};
  conv_pool.outputs = {"y"};
  conv_pool.decisions.x_nchw = true;
  conv_pool.decisions.pool = Decisions{.epilogue = {.fused = "DequantizeLinear+MaxPool+QuantizeLinear"}};
  EXPECT_TRUE(reads_x_nchw(conv_part(conv_pool, "mid")));
  EXPECT_FALSE(has_fused_epilogue(conv_part(conv_pool, "mid")));
  EXPECT_TRUE(has_fused_epilogue(pool_part(conv_pool, "mid")));
  EXPECT_FALSE(reads_x_nchw(pool_part(conv_pool, "mid")));
}

// A saved TileGraph names the decided graph: a decision changes the hash, a part's included.
// An undecided graph hashes as it did before decisions were typed (tuning records are keyed
// by that hash), so clearing the decisions gives the first hash back.
TEST(NodeDecisions, GraphHashSeesDecisions) {
  Graph g = unfused_graph(conv_chain());
  const uint64_t plain = graph_hash(g, true);
  g.nodes[0].decisions.conv = ConvPrimitive::gemm;
  const uint64_t chosen = graph_hash(g, true);
  EXPECT_NE(chosen, plain);
  g.nodes[0].decisions.conv_source = DecisionSource::model;
  EXPECT_NE(graph_hash(g, true), chosen);
  g.nodes[0].decisions = {};
  g.nodes[0].decisions.pool = Decisions{};
  EXPECT_NE(graph_hash(g, true), plain);
  g.nodes[0].decisions = {};
  EXPECT_EQ(graph_hash(g, true), plain);
}

// A model's attribute never becomes a decision: grove_ names are refused at import.
TEST(NodeDecisions, ImportRefusesGroveAttributes) {
  OnnxBuilder b(13);
  b.input("x", kF32, {1, 4, 8, 8}).output("y", kF32, {1, 4, 8, 8});
  weight(b, "w", {4, 4, 1, 1}, 1);
  auto& conv = b.node("Conv", {"x", "w"}, {"y"}, "conv");
  auto* a = conv.add_attribute();
  a->set_name("grove_conv");
  a->set_type(onnx::AttributeProto::STRING);
  a->set_s("winograd");
  try {
    load_onnx_bytes(b.bytes(), "injected.onnx");
    ADD_FAILURE() << "a grove_ attribute was taken";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("reserved"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace grove
