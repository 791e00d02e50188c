// grove/generate.h's parts: token picking, finding a decoder's interface, the cache buffers.
// The generation loop against PyTorch: tests/models/generate_model_test.py.
#include <gtest/gtest.h>

#include <cmath>
#include <map>

#include "generate/kv_cache.h"
#include "grove/error.h"
#include "grove/generate.h"

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

}  // namespace
}  // namespace grove
