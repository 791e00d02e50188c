// The server-wide memory budget (--max-serve-memory): every admitted inference reserves its
// plan's activation bytes before it runs and gives them back once its run has stopped, so the
// runs in flight never reserve more than the budget; a request that finds no room waits
// (bounded) and then gets 503 naming the budget. Run under ThreadSanitizer by scripts/test.sh's
// serve stage.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <future>
#include <optional>
#include <nlohmann/json.hpp>
#include <thread>
#include <vector>

#include "serve_test_util.h"
#include "slow_models.h"

namespace grove::serve {
namespace {

using nlohmann::json;

// 200 MatMuls of [128, 128] (plus the input): 201 values of 64 KiB in the plan, 13,172,736 bytes
// reserved per request, and a run of about 0.8 GFLOP, long beside parsing the request's JSON,
// so that 8 requests at once overlap. Under a sanitizer 20 (the kernels are far slower there).
constexpr int kBudgetChainLayers = kSanitizedBuild ? 20 : 200;
constexpr int kBudgetChainSize = 128;
constexpr int64_t kBudgetPerRequest = int64_t{kBudgetChainLayers + 1} * kBudgetChainSize * kBudgetChainSize * 4;

std::string budget_chain_request() {
  std::vector<float> x(static_cast<size_t>(kBudgetChainSize) * kBudgetChainSize, 0.5f);
  return json{{"inputs", {{{"name", "x"}, {"shape", {kBudgetChainSize, kBudgetChainSize}}, {"datatype", "FP32"}, {"data", x}}}}}
      .dump();
}

struct BudgetRound {
  int ok = 0, refused = 0, other = 0;
  int64_t most_seen = 0;  // the most reserved bytes a watcher saw while the requests ran
  std::string refusal, unexpected;
};

// 8 requests at once from 8 threads, a watcher sampling the budget meanwhile.
BudgetRound eight_at_once(InferenceServer& server, const std::string& body) {
  BudgetRound round;
  std::mutex mutex;
  std::atomic<bool> done{false};
  std::thread watcher([&] {
    while (!done.load()) {
      const int64_t now = server.memory_budget().reserved();
      {
        std::lock_guard<std::mutex> lock(mutex);
        round.most_seen = std::max(round.most_seen, now);
      }
      std::this_thread::sleep_for(std::chrono::microseconds(100));
    }
  });
  std::vector<std::thread> clients;
  for (int i = 0; i < 8; ++i)
    clients.emplace_back([&] {
      const HttpResponse r = server.handle({"POST", "/v2/models/chain/infer", {}, body});
      std::lock_guard<std::mutex> lock(mutex);
      if (r.status == 200) {
        ++round.ok;
      } else if (r.status == 503) {
        ++round.refused;
        round.refusal = r.body;
      } else {
        ++round.other;
        round.unexpected = std::to_string(r.status) + " " + r.body;
      }
    });
  for (std::thread& t : clients) t.join();
  done.store(true);
  watcher.join();
  return round;
}

// Waiting requests are served in the order they came: with 60 of 100 bytes held, a request
// for 80 waits, and one for 30 that would fit queues behind it (it once went first, and a
// stream of small requests could keep a large one waiting until its time ran out).
TEST(MemoryBudgetOrder, WaitingRequestsAreServedInTheOrderTheyCame) {
  MemoryBudget budget(100);
  const auto later = MemoryBudget::Clock::now() + std::chrono::seconds(60);
  // Polls `done` for up to 10 s: a wrong order fails the test rather than hanging it.
  auto eventually = [](auto done) {
    for (int i = 0; i < 10000 && !done(); ++i) std::this_thread::sleep_for(std::chrono::milliseconds(1));
    return done();
  };
  std::optional<MemoryBudget::Reservation> held(budget.reserve(60, later));
  ASSERT_TRUE(*held);
  std::atomic<int> order{0}, large_at{0}, small_at{0};
  std::promise<void> release_large;
  std::thread large([&] {
    MemoryBudget::Reservation r = budget.reserve(80, later);
    large_at = ++order;
    release_large.get_future().wait();
  });
  ASSERT_TRUE(eventually([&] { return budget.waits() >= 1; }));
  std::thread small([&] {
    MemoryBudget::Reservation r = budget.reserve(30, later);  // given back at once
    small_at = ++order;
  });
  EXPECT_TRUE(eventually([&] { return budget.waits() >= 2 || small_at.load() != 0; }));
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  EXPECT_EQ(small_at.load(), 0) << "30 bytes went ahead of the 80 waiting before them";
  held.reset();  // none of the 100 held: the 80 goes first, then the 30 waits for room
  EXPECT_TRUE(eventually([&] { return large_at.load() != 0; }));
  EXPECT_EQ(large_at.load(), 1);
  release_large.set_value();
  large.join();
  small.join();
  EXPECT_EQ(small_at.load(), 2);
  EXPECT_EQ(budget.reserved(), 0);
  EXPECT_EQ(budget.refusals(), 0);
}

class ServeMemoryBudget : public ::testing::Test {
 protected:
  test::TempRepository repo;
  Engine engine{{.threads = 2, .pin = false}};
  ModelRepository models{engine, {}, repo.dir()};
  std::string chain_path = repo.write("chain.onnx", test::slow_matmul_chain_model(kBudgetChainLayers, kBudgetChainSize));
};

TEST_F(ServeMemoryBudget, TheEstimateIsThePlansValues) {
  models.load("chain", chain_path);
  TensorMap in{{"x", Tensor(DType::f32, {kBudgetChainSize, kBudgetChainSize})}};
  EXPECT_EQ(run_memory_estimate(*models.find("chain"), in), kBudgetPerRequest);
}

// A budget that fits two runs and no wait: of 8 requests at once some run and the rest get 503
// naming the budget; the reserved bytes never pass the budget and are all given back.
TEST_F(ServeMemoryBudget, EightLargeRequestsNeverReserveMoreThanTheBudget) {
  models.load("chain", chain_path);
  const int64_t budget = 2 * kBudgetPerRequest + kBudgetPerRequest / 2;
  InferenceServer server(engine, models, {.request_timeout_s = 60, .max_serve_memory = budget, .memory_wait_s = 0});
  const std::string body = budget_chain_request();
  for (int round_index = 0; round_index < 3; ++round_index) {
    const BudgetRound round = eight_at_once(server, body);
    std::printf("round %d: %d x 200, %d x 503, most reserved seen %lld of a budget of %lld bytes\n", round_index + 1,
                round.ok, round.refused, static_cast<long long>(round.most_seen), static_cast<long long>(budget));
    EXPECT_EQ(round.ok + round.refused, 8) << round.unexpected;
    EXPECT_GE(round.ok, 1);
    EXPECT_LE(round.most_seen, budget);
    if (round.refused > 0) {
      EXPECT_NE(round.refusal.find("server memory budget exhausted"), std::string::npos) << round.refusal;
      EXPECT_NE(round.refusal.find("--max-serve-memory"), std::string::npos) << round.refusal;
      EXPECT_EQ(round.refusal.find('\n'), std::string::npos) << round.refusal;
    }
  }
  EXPECT_LE(server.memory_budget().peak_reserved(), budget);
  EXPECT_GE(server.memory_budget().peak_reserved(), kBudgetPerRequest);
  EXPECT_EQ(server.memory_budget().reserved(), 0);
}

// The same budget with a long wait: every request runs (200), some after waiting for room, and
// never more than two reserve at once.
TEST_F(ServeMemoryBudget, RequestsWaitForRoomWithinTheirTimeout) {
  models.load("chain", chain_path);
  const int64_t budget = 2 * kBudgetPerRequest + kBudgetPerRequest / 2;
  InferenceServer server(engine, models, {.request_timeout_s = 120, .max_serve_memory = budget, .memory_wait_s = 120});
  const auto start = std::chrono::steady_clock::now();
  const BudgetRound round = eight_at_once(server, budget_chain_request());
  std::printf("8 requests, %lld waited for room: %d x 200 in %.2f s, most reserved seen %lld of %lld bytes\n",
              static_cast<long long>(server.memory_budget().waits()), round.ok,
              std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count(),
              static_cast<long long>(round.most_seen), static_cast<long long>(budget));
  EXPECT_EQ(round.ok, 8) << round.refused << " refused: " << round.refusal << round.unexpected;
  EXPECT_LE(server.memory_budget().peak_reserved(), budget);
  EXPECT_EQ(server.memory_budget().reserved(), 0);
  EXPECT_GE(server.memory_budget().waits(), 1) << "8 requests of which 2 fit: some must have waited";
}

// A request over the whole budget is refused at once (no wait could help), naming the bytes
// and the budget; /metrics shows the budget and the refusal.
TEST_F(ServeMemoryBudget, ARequestOverTheWholeBudgetGets503AtOnce) {
  models.load("chain", chain_path);
  InferenceServer server(engine, models, {.max_serve_memory = kBudgetPerRequest - 1, .memory_wait_s = 30});
  const auto start = std::chrono::steady_clock::now();
  const HttpResponse r = server.handle({"POST", "/v2/models/chain/infer", {}, budget_chain_request()});
  EXPECT_LT(std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count(), 10.0);
  EXPECT_EQ(r.status, 503) << r.body;
  const std::string msg = json::parse(r.body).at("error").get<std::string>();
  EXPECT_EQ(msg, "inference of model 'chain' needs " + std::to_string(kBudgetPerRequest) +
                     " bytes, over the server memory budget of " + std::to_string(kBudgetPerRequest - 1) +
                     " bytes (--max-serve-memory)");
  const std::string metrics = server.handle({"GET", "/metrics", {}, ""}).body;
  EXPECT_NE(metrics.find("grove_serve_memory_budget_bytes " + std::to_string(kBudgetPerRequest - 1)), std::string::npos);
  EXPECT_NE(metrics.find("grove_serve_memory_refusals_total 1"), std::string::npos);
  EXPECT_NE(metrics.find("grove_serve_memory_reserved_bytes 0"), std::string::npos);
}

// Parsing reserves 16 bytes per body byte while it lasts (the JSON DOM's bound): a body whose
// parse alone would pass the budget gets 503 at once, naming the bytes; otherwise the parse's
// bytes come first and go back before the run's are reserved.
TEST_F(ServeMemoryBudget, ParsingReservesSixteenBytesPerBodyByte) {
  models.load("chain", chain_path);
  const std::string body = budget_chain_request();
  const int64_t parse = 16 * static_cast<int64_t>(body.size());
  InferenceServer tight(engine, models, {.max_serve_memory = parse - 1, .memory_wait_s = 0});
  const HttpResponse refused = tight.handle({"POST", "/v2/models/chain/infer", {}, body});
  EXPECT_EQ(refused.status, 503) << refused.body.substr(0, 300);
  EXPECT_EQ(json::parse(refused.body).at("error").get<std::string>(),
            "parsing a request body of " + std::to_string(body.size()) + " bytes needs " + std::to_string(parse) +
                " bytes, over the server memory budget of " + std::to_string(parse - 1) + " bytes (--max-serve-memory)");
  EXPECT_EQ(tight.memory_budget().reserved(), 0);
  InferenceServer roomy(engine, models, {.max_serve_memory = std::max(parse, kBudgetPerRequest), .memory_wait_s = 0});
  const HttpResponse ok = roomy.handle({"POST", "/v2/models/chain/infer", {}, body});
  EXPECT_EQ(ok.status, 200) << ok.body.substr(0, 300);
  EXPECT_GE(roomy.memory_budget().peak_reserved(), parse);
  EXPECT_EQ(roomy.memory_budget().reserved(), 0);
}

// s = s0 + m * x by a Loop of m iterations over [1024] floats: a model that runs in segments,
// with no plan ahead to read its bytes from.
std::string counted_loop_model() {
  constexpr auto kFloat = onnx::TensorProto::FLOAT;
  test::OnnxBuilder b;
  b.input("m", onnx::TensorProto::INT64, {}).input("x", kFloat, {1024}).input("s0", kFloat, {1024});
  b.output("s", kFloat, {1024});
  test::OnnxBuilder body;
  body.input("i", onnx::TensorProto::INT64, {}).input("cond_in", onnx::TensorProto::BOOL, {}).input("s_in", kFloat, {1024});
  body.node("Add", {"s_in", "x"}, {"s_out"}, "step");
  body.node("Identity", {"cond_in"}, {"cond_out"}, "keep_going");
  body.output("cond_out", onnx::TensorProto::BOOL, {}).output("s_out", kFloat, {1024});
  auto& node = b.node("Loop", {"m", "", "s0"}, {"s"}, "repeat");
  auto* a = node.add_attribute();
  a->set_name("body");
  a->set_type(onnx::AttributeProto::GRAPH);
  *a->mutable_g() = body.proto().graph();
  return b.bytes();
}

// Its first request reserves the whole --max-memory; once a run has finished, twice the most a
// run has held (a few 4 KiB tensors), so a budget of 1.5 x --max-memory admits 8 at once with
// no wait (it once admitted one at a time: 1 x 200 and 7 x 503).
TEST_F(ServeMemoryBudget, AModelInSegmentsReservesTwiceItsMeasuredPeakOnceOneHasRun) {
  models.load("loop", repo.write("loop.onnx", counted_loop_model()));
  ServedModel& served = *models.find("loop");
  const int64_t limit = served.session->model().limits().memory_limit();
  const TensorMap in{{"m", Tensor::from<int64_t>({}, std::vector<int64_t>{50})},
                     {"x", Tensor(DType::f32, {1024})},
                     {"s0", Tensor(DType::f32, {1024})}};
  EXPECT_EQ(run_memory_estimate(served, in), limit);
  InferenceServer server(engine, models, {.request_timeout_s = 60, .max_serve_memory = limit + limit / 2, .memory_wait_s = 0});
  const std::vector<float> ones(1024, 1.0f), zeros(1024, 0.0f);
  const std::string body = json{{"inputs",
                                 {{{"name", "m"}, {"shape", json::array()}, {"datatype", "INT64"}, {"data", {50}}},
                                  {{"name", "x"}, {"shape", {1024}}, {"datatype", "FP32"}, {"data", ones}},
                                  {{"name", "s0"}, {"shape", {1024}}, {"datatype", "FP32"}, {"data", zeros}}}}}
                               .dump();
  const HttpResponse first = server.handle({"POST", "/v2/models/loop/infer", {}, body});
  ASSERT_EQ(first.status, 200) << first.body.substr(0, 300);
  EXPECT_EQ(json::parse(first.body).at("outputs").at(0).at("data").at(0).get<float>(), 50.0f);
  const int64_t measured = run_memory_estimate(served, in);
  EXPECT_GE(measured, 2 * 4096) << "at least the Loop's state, twice";
  EXPECT_LT(measured, 1 << 20) << "a few 4 KiB tensors, twice";
  std::vector<int> statuses(8, 0);
  std::vector<std::thread> clients;
  for (int i = 0; i < 8; ++i)
    clients.emplace_back([&, i] { statuses[static_cast<size_t>(i)] = server.handle({"POST", "/v2/models/loop/infer", {}, body}).status; });
  for (std::thread& t : clients) t.join();
  for (int status : statuses) EXPECT_EQ(status, 200);
  EXPECT_EQ(server.memory_budget().reserved(), 0);
}

// y = ConstantOfShape(shape) + x: a shape that depends on an input's values, run by the
// reference executor.
std::string value_shaped_model() {
  test::OnnxBuilder b;
  b.input("shape", onnx::TensorProto::INT64, {2}).input("x", onnx::TensorProto::FLOAT, {1});
  b.output("y", onnx::TensorProto::FLOAT, {-1, -1});
  b.node("ConstantOfShape", {"shape"}, {"c"}, "fill");
  b.node("Add", {"c", "x"}, {"y"}, "add");
  return b.bytes();
}

// The reference executor measures its runs too: once one has run, its requests reserve twice
// that (two 64x64 float tensors and x), not the whole --max-memory each, which with
// this budget would admit one at a time (1 x 200 and 7 x 503).
TEST_F(ServeMemoryBudget, AModelOnTheReferenceExecutorReservesTwiceItsMeasuredPeakOnceOneHasRun) {
  models.load("fill", repo.write("fill.onnx", value_shaped_model()));
  ServedModel& served = *models.find("fill");
  const int64_t limit = served.session->model().limits().memory_limit();
  const TensorMap in{{"shape", Tensor::from<int64_t>({2}, std::vector<int64_t>{64, 64})}, {"x", Tensor(DType::f32, {1})}};
  EXPECT_EQ(run_memory_estimate(served, in), limit);
  InferenceServer server(engine, models, {.request_timeout_s = 60, .max_serve_memory = limit + limit / 2, .memory_wait_s = 0});
  const std::string body = json{{"inputs",
                                 {{{"name", "shape"}, {"shape", {2}}, {"datatype", "INT64"}, {"data", {64, 64}}},
                                  {{"name", "x"}, {"shape", {1}}, {"datatype", "FP32"}, {"data", {1.5}}}}}}
                               .dump();
  const HttpResponse first = server.handle({"POST", "/v2/models/fill/infer", {}, body});
  ASSERT_EQ(first.status, 200) << first.body.substr(0, 300);
  EXPECT_EQ(json::parse(first.body).at("outputs").at(0).at("shape"), json({64, 64}));
  EXPECT_EQ(run_memory_estimate(served, in), 2 * (4 + 2 * 64 * 64 * 4));  // x, c and y
  std::vector<int> statuses(8, 0);
  std::vector<std::thread> clients;
  for (int i = 0; i < 8; ++i)
    clients.emplace_back([&, i] { statuses[static_cast<size_t>(i)] = server.handle({"POST", "/v2/models/fill/infer", {}, body}).status; });
  for (std::thread& t : clients) t.join();
  for (int status : statuses) EXPECT_EQ(status, 200);
  EXPECT_EQ(server.memory_budget().reserved(), 0);
}

// A run stopped at --request-timeout gives its bytes back only once it has stopped: by the time
// its 504 is answered, nothing is reserved. 300 MatMuls of 512x512 are 80 GFLOP, seconds on
// two cores, far past the 0.2 s timeout (100 under a sanitizer, as in test_request_timeout.cpp).
TEST_F(ServeMemoryBudget, ATimedOutRunGivesItsReservationBack) {
  models.load("slow", repo.write("slow.onnx", test::slow_matmul_chain_model(kSanitizedBuild ? 100 : 300, 512)));
  // Planned ahead: under ThreadSanitizer planning alone can outlast the 0.2 s, and a run whose
  // deadline has passed before it starts holds its reservation too briefly to be seen.
  plan_for(*models.find("slow")->session, {{"x", {512, 512}}});
  InferenceServer server(engine, models, {.request_timeout_s = 0.2, .max_serve_memory = int64_t{4} << 30});
  std::vector<float> x(512 * 512, 0.5f);
  const std::string body = json{{"inputs", {{{"name", "x"}, {"shape", {512, 512}}, {"datatype", "FP32"}, {"data", x}}}}}.dump();
  const HttpResponse r = server.handle({"POST", "/v2/models/slow/infer", {}, body});
  const int64_t after = server.memory_budget().reserved();
  EXPECT_EQ(r.status, 504) << r.body;
  EXPECT_EQ(after, 0);
  EXPECT_GT(server.memory_budget().peak_reserved(), 0) << "the run reserved nothing while it ran";
}

}  // namespace
}  // namespace grove::serve
