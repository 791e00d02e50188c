// grove/generate.h's parts: token picking, finding a decoder's interface, the cache buffers.
// The generation loop against PyTorch: tests/models/generate_model_test.py; here against a
// loop of plain runs that feeds each step's presents back, on a one-layer decoder built here.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <set>

#include "generate/decoder_step.h"
#include "generate/kv_cache.h"
#include "graph_test_util.h"
#include "grove/error.h"
#include "grove/generate.h"
#include "onnx/import.h"
#include "onnx_builder.h"
#include "runtime/model.h"
#include "runtime/session.h"

namespace grove {
namespace {

TEST(PickToken, GreedyTakesTheLargestLogitAndTheLowestIndexOnATie) {
  const std::vector<float> logits = {0.5f, 2.0f, -1.0f, 2.0f, 1.9f};
  uint64_t rng = 1;
  EXPECT_EQ(pick_token(logits.data(), 5, {}, rng), 1);
  EXPECT_EQ(rng, 1u) << "greedy draws nothing";
  EXPECT_EQ(pick_token(logits.data(), 5, {.temperature = 1.0, .top_k = 1}, rng), 1);
  // A nucleus this small holds only the most likely token (the first of the tie).
  EXPECT_EQ(pick_token(logits.data(), 5, {.temperature = 1.0, .top_p = 1e-6}, rng), 1);
}

TEST(PickToken, SamplingFollowsTheSoftmaxAndTheSeed) {
  const std::vector<float> logits = {0.0f, std::log(2.0f), std::log(5.0f), -30.0f};
  std::map<int64_t, int> seen;
  uint64_t rng = 42;
  const int draws = 40000;
  for (int i = 0; i < draws; ++i) ++seen[pick_token(logits.data(), 4, {.temperature = 1.0}, rng)];
  EXPECT_NEAR(seen[0] / double(draws), 1.0 / 8, 0.01);
  EXPECT_NEAR(seen[1] / double(draws), 2.0 / 8, 0.01);
  EXPECT_NEAR(seen[2] / double(draws), 5.0 / 8, 0.01);
  EXPECT_LE(seen[3], 2);
  // top_k 2 keeps tokens 2 and 1 only, in the ratio 5:2.
  seen.clear();
  for (int i = 0; i < draws; ++i) ++seen[pick_token(logits.data(), 4, {.temperature = 1.0, .top_k = 2}, rng)];
  EXPECT_EQ(seen[0] + seen[3], 0);
  EXPECT_NEAR(seen[2] / double(draws), 5.0 / 7, 0.01);
  // top_p 0.7: token 2 (0.625) is not enough, tokens 2 and 1 (0.875) are.
  seen.clear();
  for (int i = 0; i < draws; ++i) ++seen[pick_token(logits.data(), 4, {.temperature = 1.0, .top_p = 0.7}, rng)];
  EXPECT_EQ(seen[0] + seen[3], 0);
  EXPECT_GT(seen[1], 0);
  // A high temperature flattens: token 0 gets more than its 1/8.
  seen.clear();
  for (int i = 0; i < draws; ++i) ++seen[pick_token(logits.data(), 4, {.temperature = 10.0}, rng)];
  EXPECT_GT(seen[0] / double(draws), 0.2);
  // The same seed gives the same tokens.
  uint64_t a = 7, b = 7;
  for (int i = 0; i < 100; ++i)
    EXPECT_EQ(pick_token(logits.data(), 4, {.temperature = 1.0}, a), pick_token(logits.data(), 4, {.temperature = 1.0}, b));
}

TEST(PickToken, RefusesBadSettings) {
  const std::vector<float> logits = {0.0f, 1.0f};
  uint64_t rng = 0;
  EXPECT_THROW(pick_token(logits.data(), 2, {.temperature = -1}, rng), Error);
  EXPECT_THROW(pick_token(logits.data(), 2, {.temperature = 1, .top_p = 0}, rng), Error);
  EXPECT_THROW(pick_token(logits.data(), 2, {.temperature = 1, .top_k = -2}, rng), Error);
  EXPECT_THROW(pick_token(logits.data(), 0, {}, rng), Error);
}

ValueSpec spec(std::string name, DType dtype, std::vector<int64_t> dims) {
  ValueSpec s;
  s.name = std::move(name);
  s.dtype = dtype;
  s.dims = std::move(dims);
  return s;
}

TEST(DecoderIo, FindsTheExportersSpellings) {
  const std::vector<ValueSpec> outputs = {spec("logits", DType::f32, {-1, -1, 10}),
                                          spec("present.0.key", DType::f32, {-1, 2, -1, 4}),
                                          spec("present_1", DType::f32, {-1, 2, -1, 4})};
  const DecoderIo io = DecoderIo::find({spec("input_ids", DType::i64, {-1, -1}),
                                        spec("attention_mask", DType::i64, {-1, -1}),
                                        spec("past_key_values.0.key", DType::f32, {-1, 2, -1, 4}),
                                        spec("past_1", DType::f32, {-1, 2, -1, 4})},
                                       outputs);
  ASSERT_EQ(io.cache.size(), 2u);
  EXPECT_EQ(io.cache[0].present, "present.0.key");
  EXPECT_EQ(io.cache[1].present, "present_1");
  EXPECT_EQ(io.cache[0].axis, 2);
  EXPECT_EQ(io.logits, "logits");
  EXPECT_FALSE(io.can_mask()) << "no position_ids";
}

TEST(DecoderIo, NamesWhatIsMissingOrAmbiguous) {
  const ValueSpec ids = spec("input_ids", DType::i64, {1, -1});
  const ValueSpec present = spec("present.0.key", DType::f32, {1, 2, -1, 4});
  auto message = [&](std::vector<ValueSpec> in, std::vector<ValueSpec> out) {
    try {
      DecoderIo::find(in, out);
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  EXPECT_NE(message({ids}, {present}).find("no input named 'past"), std::string::npos);
  EXPECT_NE(message({ids, spec("past_key_values.0.key", DType::f32, {1, -1, -1, 4})}, {present}).find("ambiguous"),
            std::string::npos);
  EXPECT_NE(message({ids, spec("past_key_values.0.key", DType::f32, {1, 2, 3, 4})}, {present}).find("no symbolic"),
            std::string::npos);
  EXPECT_NE(message({ids, spec("past_key_values.0.key", DType::f16, {1, 2, -1, 4})}, {present}).find("element type"),
            std::string::npos);
  EXPECT_NE(message({ids, spec("past_key_values.0.key", DType::f32, {1, 2, -1, 4}), spec("extra", DType::f32, {1})},
                    {present, spec("logits", DType::f32, {1})})
                .find("'extra'"),
            std::string::npos);
}

// A present for a cache of `capacity` positions plus `count` new ones: element (o, pos, d) =
// 1000 * o + pos + d / 10.
Tensor present_of(int64_t outer, int64_t capacity, int64_t count, int64_t depth) {
  Tensor t(DType::f32, {1, outer, capacity + count, depth});
  float* p = t.data<float>();
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t pos = 0; pos < capacity + count; ++pos)
      for (int64_t d = 0; d < depth; ++d) *p++ = 1000.0f * o + pos + d / 10.0f;
  return t;
}

TEST(KvCache, AppendsTheNewPositionsAndKeepsThemAcrossGrowth) {
  generate::KvCache cache({spec("past", DType::f32, {-1, 3, -1, 2})}, {2});
  cache.reserve(4);
  EXPECT_EQ(cache.past(0).shape(), (Shape{1, 3, 4, 2}));
  cache.append(0, present_of(3, 4, 3, 2), 4, 3);  // the step's 3 new positions are 4..6
  cache.advance(3);
  cache.reserve(8);  // doubles: the 3 filled positions move
  cache.append(0, present_of(3, 8, 1, 2), 8, 1);
  cache.advance(1);
  const float* p = cache.past(0).data<float>();
  for (int64_t o = 0; o < 3; ++o)
    for (int64_t pos = 0; pos < 4; ++pos)
      for (int64_t d = 0; d < 2; ++d)
        EXPECT_FLOAT_EQ(p[(o * 8 + pos) * 2 + d], 1000.0f * o + (pos < 3 ? 4 + pos : 8) + d / 10.0f)
            << "row " << o << " position " << pos;
  EXPECT_EQ(cache.length(), 4);
  EXPECT_THROW(cache.append(0, present_of(3, 8, 1, 3), 8, 1), Error) << "head dim differs";
  EXPECT_THROW(cache.append(0, present_of(3, 7, 1, 2), 8, 1), Error) << "too few positions";
  EXPECT_THROW(cache.advance(5), Error);
}

TEST(KvCache, RefusesASymbolicHeadCount) {
  EXPECT_THROW(generate::KvCache({spec("past", DType::f32, {-1, -1, -1, 2})}, {2}), Error);
}

// One attention layer as the exporters write a decoder: Q, K and V of the new tokens from
// token and position embeddings ([1, 2 heads, S, 4]); the presents Concat(past, new) along the positions (with
// `present_is_concat` false, an Identity of that Concat); K^T a Transpose of the key present;
// the mask's 0 slots -10000; logits over 11 tokens from the heads' outputs.
std::string tiny_decoder_bytes(bool present_is_concat) {
  constexpr int kF = onnx::TensorProto::FLOAT, kI = onnx::TensorProto::INT64;
  test::OnnxBuilder b(17);
  b.input("input_ids", kI, {1, -1}).input("attention_mask", kI, {1, -1}).input("position_ids", kI, {1, -1});
  b.input("past_key_values.0.key", kF, {1, 2, -1, 4}).input("past_key_values.0.value", kF, {1, 2, -1, 4});
  b.output("logits", kF, {1, -1, 11}).output("present.0.key", kF, {1, 2, -1, 4}).output("present.0.value", kF, {1, 2, -1, 4});
  // Each symbolic dimension its own name: new tokens, all positions, past positions.
  auto* g = b.proto().mutable_graph();
  for (int i : {0, 2}) g->mutable_input(i)->mutable_type()->mutable_tensor_type()->mutable_shape()->mutable_dim(1)->set_dim_param("new");
  g->mutable_input(1)->mutable_type()->mutable_tensor_type()->mutable_shape()->mutable_dim(1)->set_dim_param("all");
  for (int i : {3, 4}) g->mutable_input(i)->mutable_type()->mutable_tensor_type()->mutable_shape()->mutable_dim(2)->set_dim_param("past");
  g->mutable_output(0)->mutable_type()->mutable_tensor_type()->mutable_shape()->mutable_dim(1)->set_dim_param("new");
  for (int i : {1, 2}) g->mutable_output(i)->mutable_type()->mutable_tensor_type()->mutable_shape()->mutable_dim(2)->set_dim_param("all");
  const auto weights = [](size_t n, float seed) { return test::pseudo_random(n, static_cast<uint32_t>(seed * 100), 2.0f); };
  b.initializer_f32("emb_q", {11, 8}, weights(88, 0.7f));
  b.initializer_f32("emb_k", {11, 8}, weights(88, 1.3f));
  b.initializer_f32("emb_v", {11, 8}, weights(88, 2.1f));
  b.initializer_f32("w_out", {8, 11}, weights(88, 0.9f));
  b.initializer_f32("pos_q", {64, 8}, weights(512, 0.31f));
  b.initializer_f32("pos_k", {64, 8}, weights(512, 0.53f));
  b.initializer_f32("pos_v", {64, 8}, weights(512, 0.17f));
  b.initializer_i64("heads_shape", {4}, {1, -1, 2, 4});
  b.initializer_i64("rows_shape", {3}, {1, -1, 8});
  b.initializer_i64("mask_axes", {2}, {1, 2});
  b.initializer_f32("scale", {}, {0.5f});
  b.initializer_f32("one", {}, {1.0f});
  b.initializer_f32("big", {}, {-10000.0f});
  for (const char* x : {"q", "k", "v"}) {
    const std::string name(x);
    b.node("Gather", {"emb_" + name, "input_ids"}, {name + "_tokens"});
    b.node("Gather", {"pos_" + name, "position_ids"}, {name + "_positions"});
    b.node("Add", {name + "_tokens", name + "_positions"}, {name + "_rows"});
    b.node("Reshape", {name + "_rows", "heads_shape"}, {name + "_heads"});
    test::OnnxBuilder::attr_ints(b.node("Transpose", {name + "_heads"}, {name + "_new"}), "perm", {0, 2, 1, 3});
  }
  for (const char* kv : {"key", "value"}) {
    const std::string present = std::string("present.0.") + kv, joined = present_is_concat ? present : present + "_joined";
    const std::string fresh = kv == std::string("key") ? "k_new" : "v_new";
    test::OnnxBuilder::attr_int(b.node("Concat", {std::string("past_key_values.0.") + kv, fresh}, {joined}), "axis", 2);
    if (!present_is_concat) b.node("Identity", {joined}, {present});
  }
  test::OnnxBuilder::attr_int(b.node("Cast", {"attention_mask"}, {"mask_f"}), "to", kF);
  b.node("Sub", {"one", "mask_f"}, {"unmasked"});
  b.node("Mul", {"unmasked", "big"}, {"mask_add"});
  b.node("Unsqueeze", {"mask_add", "mask_axes"}, {"mask4"});
  test::OnnxBuilder::attr_ints(b.node("Transpose", {"present.0.key"}, {"kt"}), "perm", {0, 1, 3, 2});
  b.node("MatMul", {"q_new", "kt"}, {"scores"});
  b.node("Mul", {"scores", "scale"}, {"scaled"});
  b.node("Add", {"scaled", "mask4"}, {"masked"});
  test::OnnxBuilder::attr_int(b.node("Softmax", {"masked"}, {"probs"}), "axis", -1);
  b.node("MatMul", {"probs", "present.0.value"}, {"ctx"});
  test::OnnxBuilder::attr_ints(b.node("Transpose", {"ctx"}, {"ctx_t"}), "perm", {0, 2, 1, 3});
  b.node("Reshape", {"ctx_t", "rows_shape"}, {"ctx_rows"});
  b.node("MatMul", {"ctx_rows", "w_out"}, {"logits"});
  return b.bytes();
}

Tensor ids(std::vector<int64_t> v) {
  Tensor t(DType::i64, {1, static_cast<int64_t>(v.size())});
  std::copy(v.begin(), v.end(), t.data<int64_t>());
  return t;
}

// The oracle: plain runs, every slot filled and attended, each step's presents its next past.
std::vector<int64_t> greedy_by_plain_runs(Session& session, std::vector<int64_t> prompt, int new_tokens) {
  Tensor past_k(DType::f32, {1, 2, 0, 4}), past_v(DType::f32, {1, 2, 0, 4});
  std::vector<int64_t> out, step = prompt;
  int64_t length = 0;
  for (int n = 0; n < new_tokens; ++n) {
    std::vector<int64_t> positions(step.size());
    for (size_t i = 0; i < step.size(); ++i) positions[i] = length + static_cast<int64_t>(i);
    TensorMap r = session.run({{"input_ids", ids(step)},
                               {"attention_mask", ids(std::vector<int64_t>(static_cast<size_t>(length) + step.size(), 1))},
                               {"position_ids", ids(positions)},
                               {"past_key_values.0.key", past_k},
                               {"past_key_values.0.value", past_v}});
    const Tensor& logits = r.at("logits");
    const float* last = logits.data<float>() + logits.numel() - 11;
    out.push_back(std::max_element(last, last + 11) - last);
    length += static_cast<int64_t>(step.size());
    past_k = r.at("present.0.key"), past_v = r.at("present.0.value");
    step = {out.back()};
  }
  return out;
}

// A decoder whose presents are Concats of the past is stepped by a session returning only the
// new positions, in which the attention reads the cache in place: no Concat, no Transpose of
// the cache is left. The tokens are the plain loop's, with the cache's capacity growing on the
// way; a present made otherwise leaves the generator on the session as it is.
TEST(Generator, StepsWithoutCopyingTheCacheWhenThePresentsAreConcatsOfThePast) {
  for (bool present_is_concat : {true, false}) {
    Engine engine({.threads = 2, .pin = false});
    Session session(engine, model_from_graph(load_onnx_bytes(tiny_decoder_bytes(present_is_concat), "tiny.onnx")));
    const std::vector<int64_t> prompt{3, 7, 1};
    const std::vector<int64_t> want = greedy_by_plain_runs(session, prompt, 12);
    ASSERT_GT(std::set<int64_t>(want.begin(), want.end()).size(), 3u) << "the tokens must change from step to step";
    Generator generator(session);
    GenerateOptions options;
    options.max_new_tokens = 12;
    options.min_capacity = 4;  // grows twice on the way
    EXPECT_EQ(generator.generate(prompt, options), want) << "present is concat " << present_is_concat;
    const generate::DecoderStep step = generate::decoder_step(session, generator.io());
    if (!present_is_concat) {
      EXPECT_EQ(step.session, &session);
      EXPECT_EQ(step.new_positions, (std::vector<std::string>{"", ""}));
      continue;
    }
    ASSERT_NE(step.session, &session);
    EXPECT_EQ(step.new_positions, (std::vector<std::string>{"k_new", "v_new"}));
    const std::map<std::string, int> ops = test::histogram(bound_graph(step.session->model()));
    EXPECT_EQ(ops.count("Concat"), 0u);
    EXPECT_EQ(ops.at("grove.internal:Attention"), 1);
  }
}

}  // namespace
}  // namespace grove
