// fuse_attention: the attention chains of a 2-layer BERT-style and a GPT-2-style (causal
// Where) model become grove.internal Attention nodes, and the tile runtime on the fused graph
// matches the reference executor on the unfused graph; chains that differ in any checked
// way are left exactly as they were.
#include <gtest/gtest.h>

#include <cmath>

#include "ops/attention/attention.h"
#include "ops/op.h"
#include "passes/flops.h"
#include "passes/passes.h"
#include "plan/plan.h"
#include "runtime/session.h"
#include "onnx/import.h"
#include "graph_test_util.h"
#include "onnx_builder.h"
#include "runtime/model.h"
#include "tiny_models.h"

using namespace grove;
using grove::test::histogram;
using grove::test::OnnxBuilder;
using grove::test::relative_error;

namespace {
constexpr int kFloat = onnx::TensorProto::FLOAT;

Tensor random_tensor(Shape shape, uint32_t seed, float scale = 1.f) {
  Tensor t(DType::f32, shape);
  auto v = test::pseudo_random(static_cast<size_t>(t.numel()), seed, scale);
  std::copy(v.begin(), v.end(), t.data<float>());
  return t;
}

// The reference executor on the bound but unoptimised graph: the unfused oracle.
TensorMap unfused_reference(const std::string& bytes, const TensorMap& inputs) {
  Graph plain = load_onnx_bytes(bytes, "plain.onnx");
  bind_shapes(plain, {});
  return run_reference(plain, inputs);
}

// The tiles use the float GEMM and vector exp, the reference double sums: they agree to
// float rounding, not bits.
void expect_tiles_match_unfused(const std::string& bytes, const TensorMap& inputs, const std::string& what) {
  TensorMap want = unfused_reference(bytes, inputs);
  Model fused_model = model_from_graph(load_onnx_bytes(bytes, what + ".onnx"));
  EXPECT_LT(relative_error(fused_model.run_reference(inputs).at("out"), want.at("out")), 1e-6) << what << " reference";
  for (int threads : {1, 3})
    for (int tiles_per_op : {0, 5}) {
      Engine engine({.threads = threads, .pin = false});
      Session session(engine, model_from_graph(load_onnx_bytes(bytes, what + ".onnx")), {.tiles_per_op = tiles_per_op});
      RunStats stats;
      TensorMap got = session.run(inputs, &stats);
      EXPECT_FALSE(stats.used_reference);
      EXPECT_LT(relative_error(got.at("out"), want.at("out")), 1e-5)
          << what << " threads=" << threads << " tiles_per_op=" << tiles_per_op;
    }
}

TensorMap transformer_inputs() {
  Tensor mask(DType::f32, {1, 1, 1, 12});
  for (int i = 9; i < 12; ++i) mask.data<float>()[i] = -10000.f;  // padding tokens
  return {{"h", random_tensor({1, 12, 32}, 2)}, {"mask", mask}};
}

}  // namespace

TEST(FuseAttention, BertStyleLayersFuseAndTilesMatchUnfusedReference) {
  const std::string bytes = test::transformer_bytes();
  Model model = model_from_graph(load_onnx_bytes(bytes, "bert.onnx"));
  auto h = histogram(bound_graph(model));
  EXPECT_EQ(h["grove.internal:Attention"], 2);
  EXPECT_EQ(h["Softmax"], 0);
  expect_tiles_match_unfused(bytes, transformer_inputs(), "bert");
}

TEST(FuseAttention, CausalGpt2StyleLayersFuseAndTilesMatchUnfusedReference) {
  const std::string bytes = test::transformer_bytes(/*causal=*/true);
  Model model = model_from_graph(load_onnx_bytes(bytes, "gpt2.onnx"));
  auto h = histogram(bound_graph(model));
  EXPECT_EQ(h["grove.internal:Attention"], 2);
  EXPECT_EQ(h["Where"], 0);
  expect_tiles_match_unfused(bytes, transformer_inputs(), "gpt2");
}

// The heads' Reshapes and Transposes (and GPT-2's Split of one Q|K|V projection) go into the
// node: it reads the projections' rows at column offsets and writes [B, S, H, Dv].
TEST(FuseAttention, SplitReshapeAndTransposesAroundTheChainAreAbsorbed) {
  for (bool fused_qkv : {false, true}) {
    const std::string bytes = test::transformer_bytes(/*causal=*/true, fused_qkv);
    Model model = model_from_graph(load_onnx_bytes(bytes, "gpt2.onnx"));
    auto h = histogram(bound_graph(model));
    EXPECT_EQ(h["grove.internal:Attention"], 2) << fused_qkv;
    EXPECT_EQ(h["Transpose"], 0) << fused_qkv;
    EXPECT_EQ(h["Split"], 0) << fused_qkv;
    EXPECT_EQ(h["Reshape"], 2) << fused_qkv;  // the merge of the heads after each layer: a view
    for (const Node& n : bound_graph(model).nodes) {
      if (n.op_type != "Attention") continue;
      EXPECT_EQ(n.attr_int("heads", 0), 4);
      EXPECT_EQ(n.attr_int("head_dim", 0), 8);
      EXPECT_EQ(n.attr_int("k_offset", -1), fused_qkv ? 32 : 0);
      EXPECT_EQ(n.attr_int("v_offset", -1), fused_qkv ? 64 : 0);
      if (fused_qkv) EXPECT_EQ(n.inputs[0], n.inputs[2]);
    }
    expect_tiles_match_unfused(bytes, transformer_inputs(), fused_qkv ? "gpt2_qkv" : "gpt2");
  }
}

// A Split one of whose outputs is read elsewhere stays; the chain then reads its outputs.
TEST(FuseAttention, ASplitWithAnotherReaderIsKept) {
  std::string bytes = test::transformer_bytes(/*causal=*/false, /*fused_qkv=*/true);
  onnx::ModelProto m;
  ASSERT_TRUE(m.ParseFromString(bytes));
  auto* out = m.mutable_graph()->add_output();
  out->set_name("l0_v");
  out->mutable_type()->mutable_tensor_type()->set_elem_type(kFloat);
  ASSERT_TRUE(m.SerializeToString(&bytes));
  Model model = model_from_graph(load_onnx_bytes(bytes, "kept.onnx"));
  auto h = histogram(bound_graph(model));
  EXPECT_EQ(h["grove.internal:Attention"], 2);
  EXPECT_EQ(h["Split"], 1);
  expect_tiles_match_unfused(bytes, transformer_inputs(), "kept");
}

// One attention chain on graph inputs, with one thing changed per variant.
enum class Variant { plain, div_scale, scores_also_output, softmax_axis_2, runtime_scale, add_before_scale };

std::string attention_bytes(Variant v) {
  OnnxBuilder b(17);
  b.input("q", kFloat, {1, 2, 5, 4}).input("kt", kFloat, {1, 2, 4, 6}).input("v", kFloat, {1, 2, 6, 3});
  b.input("mask", kFloat, {1, 1, 1, 6});
  b.output("out", kFloat, {1, 2, 5, 3});
  b.initializer_f32("scale", {}, {0.5f});
  if (v == Variant::runtime_scale) b.input("s", kFloat, {});
  b.node("MatMul", {"q", "kt"}, {"scores"}, "qk");
  const std::string scale = v == Variant::runtime_scale ? "s" : "scale";
  if (v == Variant::add_before_scale) {
    b.node("Add", {"scores", "mask"}, {"masked0"}, "mask");
    b.node("Mul", {"masked0", scale}, {"masked"}, "scale");
  } else {
    b.node(v == Variant::div_scale ? "Div" : "Mul", {"scores", scale}, {"scaled"}, "scale");
    b.node("Add", {"scaled", "mask"}, {"masked"}, "mask");
  }
  OnnxBuilder::attr_int(b.node("Softmax", {"masked"}, {"probs"}, "softmax"), "axis", v == Variant::softmax_axis_2 ? 2 : -1);
  b.node("MatMul", {"probs", "v"}, {"out"}, "pv");
  if (v == Variant::scores_also_output) b.output("scaled", kFloat, {1, 2, 5, 6});
  return b.bytes();
}

TensorMap attention_inputs(Variant v) {
  TensorMap in{{"q", random_tensor({1, 2, 5, 4}, 1, 2.f)},
               {"kt", random_tensor({1, 2, 4, 6}, 2, 2.f)},
               {"v", random_tensor({1, 2, 6, 3}, 3)},
               {"mask", random_tensor({1, 1, 1, 6}, 4, 3.f)}};
  if (v == Variant::runtime_scale) in["s"] = Tensor::scalar<float>(0.25f);
  return in;
}

TEST(FuseAttention, SmallChainFusesWithMulOrDivScale) {
  for (Variant v : {Variant::plain, Variant::div_scale}) {
    const std::string bytes = attention_bytes(v);
    Model model = model_from_graph(load_onnx_bytes(bytes, "attn.onnx"));
    EXPECT_EQ(histogram(bound_graph(model)), (std::map<std::string, int>{{"grove.internal:Attention", 1}}));
    expect_tiles_match_unfused(bytes, attention_inputs(v), "attn");
  }
}

TEST(FuseAttention, ChainsThatDifferAreLeftUnchanged) {
  for (Variant v : {Variant::scores_also_output, Variant::softmax_axis_2, Variant::runtime_scale, Variant::add_before_scale}) {
    Graph g = load_onnx_bytes(attention_bytes(v), "attn.onnx");
    bind_shapes(g, {});
    const auto before = histogram(g);
    const size_t values_before = g.values.size();
    EXPECT_EQ(fuse_attention(g), 0) << int(v);
    EXPECT_EQ(histogram(g), before) << int(v);
    EXPECT_EQ(g.values.size(), values_before) << int(v);
  }
}

TEST(FuseAttention, FlopsOfTheFusedGraphEqualTheUnfused) {
  for (bool causal : {false, true}) {
    const std::string bytes = test::transformer_bytes(causal, /*fused_qkv=*/causal);
    Graph plain = load_onnx_bytes(bytes, "plain.onnx");
    bind_shapes(plain, {});
    Model model = model_from_graph(load_onnx_bytes(bytes, "fused.onnx"));
    ASSERT_EQ(histogram(bound_graph(model))["grove.internal:Attention"], 2);
    EXPECT_EQ(graph_flops(bound_graph(model)), graph_flops(plain)) << "causal " << causal;
  }
}

// A decoder step's attention as torch.onnx writes it: the presents are Concat(past, new) along
// the positions, K^T a Transpose of the key present. The fused node reads the present K itself
// (key_rows) and the Transpose goes; when the presents are not graph outputs (the Generator's
// step) it reads the past and new parts and the Concats go too. One query row (a decode step)
// reads K and V in place, several (a prompt) through the GEMM. With group > 1 the key and value
// heads are repeated for grouped-query attention (Unsqueeze, Expand, Reshape), and the node
// reads the unrepeated ones (kv_group).
std::string cached_attention_bytes(int64_t queries, int64_t past, bool presents_are_outputs, int64_t group = 1) {
  OnnxBuilder b(17);
  const int64_t heads = 6, kv_heads = heads / group, dim = 20, total = past + queries;
  b.input("q", kFloat, {1, heads, queries, dim}).input("mask", kFloat, {1, 1, queries, total});
  for (const char* kv : {"k", "v"})
    b.input(std::string("past_") + kv, kFloat, {1, kv_heads, past, dim})
        .input(std::string("new_") + kv, kFloat, {1, kv_heads, queries, dim});
  b.output("out", kFloat, {1, heads, queries, dim});
  if (presents_are_outputs)
    b.output("present_k", kFloat, {1, kv_heads, total, dim}).output("present_v", kFloat, {1, kv_heads, total, dim});
  b.initializer_f32("scale", {}, {0.125f});
  OnnxBuilder::attr_int(b.node("Concat", {"past_k", "new_k"}, {"present_k"}, "cat_k"), "axis", 2);
  OnnxBuilder::attr_int(b.node("Concat", {"past_v", "new_v"}, {"present_v"}, "cat_v"), "axis", -2);
  std::string k = "present_k", v = "present_v";
  if (group > 1) {  // grouped-query attention's repeat of the key/value heads, as LLaMA's exports write it
    b.initializer_i64("axis2", {1}, {2});
    b.initializer_i64("expanded", {5}, {1, kv_heads, group, total, dim});
    b.initializer_i64("repeated", {4}, {1, heads, total, dim});
    for (std::string* x : {&k, &v}) {
      b.node("Unsqueeze", {*x, "axis2"}, {*x + "_u"});
      b.node("Expand", {*x + "_u", "expanded"}, {*x + "_e"});
      b.node("Reshape", {*x + "_e", "repeated"}, {*x + "_r"});
      *x += "_r";
    }
  }
  OnnxBuilder::attr_ints(b.node("Transpose", {k}, {"kt"}, "kt"), "perm", {0, 1, 3, 2});
  b.node("MatMul", {"q", "kt"}, {"scores"}, "qk");
  b.node("Mul", {"scores", "scale"}, {"scaled"}, "scale");
  b.node("Add", {"scaled", "mask"}, {"masked"}, "mask");
  OnnxBuilder::attr_int(b.node("Softmax", {"masked"}, {"probs"}, "softmax"), "axis", -1);
  b.node("MatMul", {"probs", v}, {"out"}, "pv");
  return b.bytes();
}

TEST(FuseAttention, ADecodersCacheIsReadInPlaceWithoutItsTransposeOrConcats) {
  for (int64_t group : {1, 3})
  for (bool presents_are_outputs : {true, false})
    for (int64_t queries : {1, 2, 7}) {
      const int64_t past = 37, kv_heads = 6 / group;
      const std::string what = "cached_q" + std::to_string(queries) + (presents_are_outputs ? "_presents" : "") +
                               "_group" + std::to_string(group);
      const std::string bytes = cached_attention_bytes(queries, past, presents_are_outputs, group);
      Model model = model_from_graph(load_onnx_bytes(bytes, "cached.onnx"));
      const Graph& g = bound_graph(model);
      std::map<std::string, int> want{{"grove.internal:Attention", 1}};
      if (presents_are_outputs) want["Concat"] = 2;
      EXPECT_EQ(histogram(g), want) << what;
      for (const Node& n : g.nodes)
        if (n.op_type == "Attention") {
          EXPECT_EQ(n.attr_int("key_rows", 0), 1);
          EXPECT_EQ(n.attr_int("kv_group", 1), group) << what;
          const std::vector<std::string> parts{"q", "past_k", "past_v", "mask", "", "new_k", "new_v"};
          if (presents_are_outputs) EXPECT_EQ(n.inputs[1], "present_k") << what;
          else EXPECT_EQ(n.inputs, parts) << what;
        }
      Tensor mask(DType::f32, {1, 1, queries, past + queries});
      for (int64_t i = 0; i < mask.numel(); ++i) mask.data<float>()[i] = i % 5 == 2 ? -10000.f : 0.f;  // empty slots
      TensorMap in{{"q", random_tensor({1, 6, queries, 20}, 1, 2.f)}, {"mask", mask}};
      uint32_t seed = 2;
      for (const char* kv : {"k", "v"}) {
        in[std::string("past_") + kv] = random_tensor({1, kv_heads, past, 20}, seed++);
        in[std::string("new_") + kv] = random_tensor({1, kv_heads, queries, 20}, seed++);
      }
      expect_tiles_match_unfused(bytes, in, what);
    }
}

// A decode step's attention does 2 FLOPs per cached key or value it reads: by its FLOPs it is
// under the minimum tile, yet it runs at the memory's speed, and as one tile it kept one core
// waiting for it in every layer. The plan counts what it reads at the machine's price of a
// moved element and cuts it by heads across the threads; a prompt's attention (the GEMM path,
// 7 query rows) and a short cache stay one tile.
TEST(FuseAttention, ADecodeStepsAttentionIsCutAcrossThreadsByWhatItReads) {
  const auto attention_tiles = [](int64_t queries, int64_t past, int threads) {
    const Model model = model_from_graph(load_onnx_bytes(cached_attention_bytes(queries, past, false), "c.onnx"));
    const Graph& g = bound_graph(model);
    PlanOptions options;
    options.threads = threads;
    options.machine.move_flops = 32;
    auto plan = make_plan(g, options);
    for (size_t n = 0; n < plan->graph.nodes.size(); ++n)
      if (plan->graph.nodes[n].op_type == "Attention") {
        EXPECT_LT(node_flops(plan->graph, plan->graph.nodes[n]), int64_t{1} << 20);
        return plan->tiles.tile_count[n];
      }
    ADD_FAILURE() << "no Attention node";
    return 0;
  };
  // 6 heads x 281 keys x 40 floats of K and V: 67,440 elements, 2.2 MFLOPs at 32 a moved element
  // (its own FLOPs: 1.0 M).
  EXPECT_EQ(attention_tiles(1, 280, 2), 2);
  EXPECT_EQ(attention_tiles(1, 280, 3), 2);  // each tile at least the minimum
  EXPECT_EQ(attention_tiles(1, 280, 1), 1);
  EXPECT_EQ(attention_tiles(1, 20, 2), 1);
  EXPECT_EQ(attention_tiles(7, 280, 2), 1);
}

// A sequence-major node (from a model or plan file naming grove.internal) whose attributes do
// not fit its inputs is an Error naming the node, never an out-of-bounds read.
TEST(FuseAttention, SequenceMajorAttributesAreChecked) {
  const auto node = [](int64_t heads, int64_t head_dim, int64_t k_offset) {
    Node n;
    n.name = "attn";
    n.op_type = "Attention";
    n.domain = kGroveDomain;
    for (auto [key, value] : {std::pair<const char*, int64_t>{"heads", heads}, {"head_dim", head_dim},
                              {"value_dim", 8}, {"k_offset", k_offset}}) {
      Attribute a;
      a.kind = Attribute::Kind::i;
      a.i = value;
      n.attrs[key] = a;
    }
    return n;
  };
  const Shape rows{1, 12, 96};
  const AttentionLayout ok = attention_layout(node(4, 8, 32), rows, rows, rows);
  EXPECT_TRUE(ok.sequence_major);
  EXPECT_EQ(ok.k.offset, 32);
  EXPECT_EQ(ok.out.row_stride, 32);
  for (const Node& bad : {node(4, 8, 72), node(4, 8, -1), node(0, 8, 0), node(4, -8, 0),
                          node(int64_t{1} << 40, int64_t{1} << 40, 0)}) {
    try {
      attention_layout(bad, rows, rows, rows);
      ADD_FAILURE() << "accepted heads " << bad.attr_int("heads", 0) << " k_offset " << bad.attr_int("k_offset", 0);
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("attn"), std::string::npos) << e.what();
    }
  }
  EXPECT_THROW(attention_layout(node(4, 8, 0), rows, {1, 12}, rows), Error);  // K not 3-D
}
