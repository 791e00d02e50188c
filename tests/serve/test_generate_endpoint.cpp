// POST /v2/models/{name}/generate in-process: a tiny hand-built decoder whose next token is
// the current one plus 1 (mod 5) through a cache it must carry, and every refusal.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "serve_test_util.h"

namespace grove::serve {
namespace {

using nlohmann::json;
using test::TempRepository;

// input_ids [1, S] -> one-hot rows e [1, S, 5]; present = Concat(past, e as [1, 1, S, 5]);
// logits = (e + 0 * sum of the past's positions) . P, P the permutation t -> t + 1 mod 5. The
// past enters the logits (as zeros) so the cache input is read every step.
std::string counting_decoder() {
  test::OnnxBuilder b;
  b.input("input_ids", test::kI64, {1, -1})
      .input("past_key_values.0.key", test::kF32, {1, 1, -1, 5})
      .output("logits", test::kF32, {1, -1, 5})
      .output("present.0.key", test::kF32, {1, 1, -1, 5});
  std::vector<float> eye(25, 0.0f), next(25, 0.0f);
  for (int i = 0; i < 5; ++i) eye[i * 5 + i] = 1.0f, next[i * 5 + (i + 1) % 5] = 1.0f;
  b.initializer_f32("table", {5, 5}, eye);
  b.initializer_f32("next", {5, 5}, next);
  b.initializer_f32("zero", {1}, {0.0f});
  b.initializer_i64("axes1", {1}, {1});
  b.initializer_i64("axes2", {1}, {2});
  b.node("Gather", {"table", "input_ids"}, {"e"}, "embed");
  b.node("Unsqueeze", {"e", "axes1"}, {"k"}, "as_cache");
  test::OnnxBuilder::attr_int(b.node("Concat", {"past_key_values.0.key", "k"}, {"present.0.key"}, "append"), "axis", 2);
  b.node("ReduceSum", {"present.0.key", "axes2"}, {"summed"}, "sum_cache");  // [1, 1, 1, 5]
  b.node("Mul", {"summed", "zero"}, {"nothing"}, "times_zero");
  b.node("Squeeze", {"nothing", "axes1"}, {"nothing3"}, "squeeze");  // [1, 1, 5]
  b.node("Add", {"e", "nothing3"}, {"e2"}, "add_cache");
  b.node("MatMul", {"e2", "next"}, {"logits"}, "head");
  return b.bytes();
}

class Generate : public ::testing::Test {
 protected:
  Generate() : models(engine, {}, repo.dir()), server(engine, models, {.max_body_bytes = 1 << 20}) {
    repo.write("counter.onnx", counting_decoder());
    repo.write("add.onnx", test::add_model());
    models.load("counter");
    models.load("add");
  }
  HttpResponse post(const std::string& model, const std::string& body) {
    return server.handle({"POST", "/v2/models/" + model + "/generate", {}, body});
  }
  static void expect_error(const HttpResponse& r, int status, const char* words) {
    EXPECT_EQ(r.status, status) << r.body;
    json j = json::parse(r.body, nullptr, false);
    ASSERT_TRUE(j.is_object() && j.contains("error")) << r.body;
    EXPECT_NE(j["error"].get<std::string>().find(words), std::string::npos) << r.body;
  }

  TempRepository repo;
  Engine engine{{.threads = 2}};
  ModelRepository models;
  InferenceServer server;
};

TEST_F(Generate, CountsOnThroughItsCache) {
  const HttpResponse r = post("counter", R"({"prompt_ids": [2, 3], "max_new_tokens": 7})");
  ASSERT_EQ(r.status, 200) << r.body;
  const json j = json::parse(r.body);
  EXPECT_EQ(j["model_name"], "counter");
  EXPECT_EQ(j["tokens"], json({4, 0, 1, 2, 3, 4, 0}));
  EXPECT_GT(j["prefill_ms"].get<double>(), 0.0);
  // Stops after the end token; sampling at a low temperature still follows the logits.
  EXPECT_EQ(json::parse(post("counter", R"({"prompt_ids": [0], "max_new_tokens": 9, "eos": 3})").body)["tokens"],
            json({1, 2, 3}));
  EXPECT_EQ(json::parse(post("counter", R"({"prompt_ids": [1], "max_new_tokens": 3, "temperature": 0.01, "seed": 4})").body)["tokens"],
            json({2, 3, 4}));
}

TEST_F(Generate, RefusesWhatItCannotDo) {
  expect_error(post("add", R"({"prompt_ids": [1]})"), 400, "cannot generate: not a decoder");
  expect_error(post("counter", R"({"max_new_tokens": 3})"), 400, "'prompt_ids'");
  expect_error(post("counter", R"({"prompt_ids": []})"), 400, "'prompt_ids'");
  expect_error(post("counter", R"({"prompt_ids": [1, -2]})"), 400, "not a token id");
  expect_error(post("counter", R"({"prompt_ids": [1], "max_new_tokens": 100000})"), 400, "'max_new_tokens'");
  expect_error(post("counter", R"({"prompt_ids": [1], "top_p": 0})"), 400, "'top_p'");
  expect_error(post("counter", "[1, 2"), 400, "malformed JSON");
  expect_error(post("counter", "[1, 2]"), 400, "JSON object");
  expect_error(server.handle({"GET", "/v2/models/counter/generate", {}, ""}), 405, "not allowed");
  server.start_draining();
  expect_error(post("counter", R"({"prompt_ids": [1]})"), 503, "shutting down");
}

}  // namespace
}  // namespace grove::serve
