// POST /v2/models/{name}/generate and /generate_stream, in-process and over a socket: a tiny
// hand-built decoder whose next token is the current one plus 1 (mod 5) through a cache it
// must carry, the events as tokens are chosen, a client that goes away, and every refusal.
#include <gtest/gtest.h>

#include <chrono>
#include <thread>

#include <nlohmann/json.hpp>

#include "raw_client.h"
#include "serve/http_listener.h"
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
  HttpResponse post(const std::string& model, const std::string& body, const char* endpoint = "generate") {
    return server.handle({"POST", "/v2/models/" + model + "/" + endpoint, {}, body});
  }
  // The data of each Server-Sent Event in `text`, as JSON, with its `event:` name as "event".
  static std::vector<json> events(const std::string& text) {
    std::vector<json> out;
    for (size_t at = 0, end; (end = text.find("\n\n", at)) != std::string::npos; at = end + 2) {
      std::string block = text.substr(at, end - at), name;
      if (block.rfind("event: ", 0) == 0) {
        name = block.substr(7, block.find('\n') - 7);
        block = block.substr(block.find('\n') + 1);
      }
      EXPECT_EQ(block.rfind("data: ", 0), 0u) << block;
      json j = json::parse(block.substr(6));
      if (!name.empty()) j["event"] = name;
      out.push_back(j);
    }
    return out;
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

TEST_F(Generate, StreamsEachTokenAsAnEventThenTheReply) {
  const HttpResponse r = post("counter", R"({"prompt_ids": [2, 3], "max_new_tokens": 7})", "generate_stream");
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(r.content_type, "text/event-stream");
  const std::vector<json> e = events(collect_body(r));
  ASSERT_EQ(e.size(), 8u);
  const std::vector<int64_t> want = {4, 0, 1, 2, 3, 4, 0};
  for (size_t i = 0; i < want.size(); ++i) EXPECT_EQ(e[i], json({{"index", i}, {"token", want[i]}})) << i;
  EXPECT_EQ(e[7]["done"], true);
  EXPECT_EQ(e[7]["tokens"], json(want));
  EXPECT_EQ(models.find("counter")->metrics.failures(), 0);
  // Refusals before the first event are plain errors with their status.
  expect_error(post("counter", R"({"prompt_ids": []})", "generate_stream"), 400, "'prompt_ids'");
  expect_error(post("add", R"({"prompt_ids": [1]})", "generate_stream"), 400, "cannot generate");
}

TEST_F(Generate, StreamStopsWhenItsClientIsGone) {
  const HttpResponse r = post("counter", R"({"prompt_ids": [1], "max_new_tokens": 4000})", "generate_stream");
  ASSERT_EQ(r.status, 200) << r.body;
  int writes = 0;
  r.stream([&](std::string_view) { return ++writes < 3; });
  EXPECT_EQ(writes, 3);  // nothing written after the refused one: no more tokens, no reply
  EXPECT_EQ(server.in_flight(), 0);
  EXPECT_EQ(models.find("counter")->metrics.failures(), 1);
}

TEST_F(Generate, StreamsOverASocketAndStopsWhenTheClientCloses) {
  HttpListener listener(server, {.host = "127.0.0.1", .port = 0}, 1 << 20);
  const int port = listener.bind();
  std::thread serving([&] { listener.listen(); });
  auto request = [](const std::string& body) {
    return "POST /v2/models/counter/generate_stream HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
           "Content-Length: " + std::to_string(body.size()) + "\r\n\r\n" + body;
  };
  // Read until the chunked body's last chunk.
  auto read_until = [](test::RawClient& c, const std::string& end) {
    std::string got;
    const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(20);
    while (got.find(end) == std::string::npos && std::chrono::steady_clock::now() < until) {
      std::string part = c.read_response(0.2);
      got += part;
      if (part.empty() && c.closed_within(0)) break;
    }
    return got;
  };
  {
    test::RawClient c(port);
    ASSERT_TRUE(c.send(request(R"({"prompt_ids": [2, 3], "max_new_tokens": 5})")));
    const std::string got = read_until(c, "\r\n0\r\n\r\n");
    EXPECT_EQ(test::status_of(got), 200) << got;
    EXPECT_NE(got.find("Transfer-Encoding: chunked"), std::string::npos) << got;
    EXPECT_NE(got.find("text/event-stream"), std::string::npos) << got;
    EXPECT_NE(got.find(R"(data: {"index":4,"token":3})"), std::string::npos) << got;
    EXPECT_NE(got.find(R"("done":true)"), std::string::npos) << got;
  }
  const int64_t runs_before = engine.stats().jobs_submitted;
  {
    test::RawClient c(port);
    ASSERT_TRUE(c.send(request(R"({"prompt_ids": [1], "max_new_tokens": 4000})")));
    EXPECT_NE(read_until(c, "data: ").find("data: "), std::string::npos);
  }  // closed after the first event
  const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  while (models.find("counter")->metrics.failures() == 0 && std::chrono::steady_clock::now() < until)
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  EXPECT_EQ(models.find("counter")->metrics.failures(), 1);  // stopped, never counted as answered
  // A step is a run of the engine: it stopped a few tokens after the close, not at 4,000.
  EXPECT_LT(engine.stats().jobs_submitted - runs_before, 400);
  listener.stop();
  serving.join();
  EXPECT_EQ(server.in_flight(), 0);
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
