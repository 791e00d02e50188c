// --request-timeout stops the run, not only the wait: a request past it gets 504 once its run
// has really stopped, its --max-concurrent slot is free only then, and the engine's jobs in
// flight (grove_engine_jobs_in_flight) is back where it was within about one tile's time.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <nlohmann/json.hpp>
#include <thread>

#include "serve_test_util.h"
#include "slow_models.h"

namespace grove::serve {
namespace {

using nlohmann::json;
using namespace std::chrono_literals;
using TimeoutClock = std::chrono::steady_clock;

constexpr int kChainSize = 512;

// A request whose input x (every element `value`) goes as raw bytes after its JSON header, the
// binary extension of the protocol: under the sanitizers, writing and parsing a 512 x 512 input
// as JSON text took most of these tests' time (30 s of one under ASan), and they are about the
// deadline, not the parser.
HttpRequest binary_request(const std::string& model, const std::vector<int64_t>& shape, float value,
                           const json& parameters = json::object()) {
  size_t n = 1;
  for (int64_t d : shape) n *= static_cast<size_t>(d);
  json header{{"inputs",
               {{{"name", "x"}, {"shape", shape}, {"datatype", "FP32"}, {"parameters", {{"binary_data_size", n * sizeof(float)}}}}}}};
  if (!parameters.empty()) header["parameters"] = parameters;
  HttpRequest r{"POST", "/v2/models/" + model + "/infer", {}, header.dump()};
  r.headers["inference-header-content-length"] = std::to_string(r.body.size());
  const std::vector<float> x(n, value);
  r.body.append(reinterpret_cast<const char*>(x.data()), n * sizeof(float));
  return r;
}

HttpRequest matmul_chain_request() { return binary_request("chain", {kChainSize, kChainSize}, 0.5f); }

std::string endless_loop_request() {
  return json{{"inputs",
               {{{"name", "x"}, {"shape", {2}}, {"datatype", "FP32"}, {"data", {1, 2}}},
                {{"name", "s0"}, {"shape", {2}}, {"datatype", "FP32"}, {"data", {0, 0}}}}}}
      .dump();
}

double timeout_test_seconds_since(TimeoutClock::time_point t) {
  return std::chrono::duration<double>(TimeoutClock::now() - t).count();
}

class RequestTimeout : public ::testing::Test {
 protected:
  RequestTimeout()
      : models(engine, {}, repo.dir()), server(engine, models, {.max_concurrent = 4, .request_timeout_s = 0.2}) {
    // Seconds of MatMul tiles on two cores, a few milliseconds each: 1500 layers are 400 GFLOP,
    // about 2 s even at a 2-core AVX-512 peak, far past the 0.2 s timeout on any machine. Under
    // ASan 10 layers finished inside it on an idle machine; 100 outlast it under either
    // sanitizer, and the runs are cancelled at the deadline, so the tests take no longer.
    models.load("chain", repo.write("chain.onnx", test::slow_matmul_chain_model(kSanitizedBuild ? 100 : 1500, kChainSize)));
    models.load("endless", repo.write("endless.onnx", test::endless_loop_model()));
    // Planned ahead, so that the requests' time goes to running.
    plan_for(*models.find("chain")->session, {{"x", {kChainSize, kChainSize}}});
  }
  HttpResponse infer(const std::string& model, const std::string& body) {
    return server.handle({"POST", "/v2/models/" + model + "/infer", {}, body});
  }

  test::TempRepository repo;
  Engine engine{{.threads = 2, .pin = false}};
  ModelRepository models;
  InferenceServer server;
};

TEST_F(RequestTimeout, A504StopsThePlannedRunAndFreesItsSlotOnlyThen) {
  const int64_t before = engine.stats().jobs_in_flight;
  const auto start = TimeoutClock::now();
  const HttpResponse r = server.handle(matmul_chain_request());
  const double took = timeout_test_seconds_since(start);
  ASSERT_EQ(r.status, 504) << r.body.substr(0, 300);
  EXPECT_NE(r.body.find("took over 0.2 s (--request-timeout)"), std::string::npos) << r.body;
  EXPECT_GE(took, 0.19);
  EXPECT_LT(took, 1.5 * test::kSanitizerSlack) << "the answer waited for far more than the run's tiles in hand";
  EXPECT_EQ(server.in_flight(), 0);
  // Back at once: the run's job leaves the count before its future is ready, and the 504
  // waits for the future.
  EXPECT_EQ(engine.stats().jobs_in_flight, before) << "the run went on after its 504";
  const std::string metrics = server.handle({"GET", "/metrics", {}, ""}).body;
  EXPECT_NE(metrics.find("grove_engine_jobs_in_flight " + std::to_string(before) + "\n"), std::string::npos) << metrics;
  EXPECT_NE(metrics.find("grove_inferences_in_flight 0\n"), std::string::npos) << metrics;
}

// More timed-out requests than --max-concurrent, several rounds: none of their runs pile up
// behind the slots (the server once had 165 runs in flight under --max-concurrent 4).
TEST_F(RequestTimeout, TimedOutRunsNeverPileUpPastMaxConcurrent) {
  std::atomic<int64_t> most_in_flight{0};
  std::atomic<bool> done{false};
  std::thread watcher([&] {
    while (!done.load()) {
      const int64_t now = engine.stats().jobs_in_flight;
      int64_t seen = most_in_flight.load();
      while (now > seen && !most_in_flight.compare_exchange_weak(seen, now)) {
      }
      std::this_thread::sleep_for(200us);
    }
  });
  std::atomic<int> answered_504{0}, busy_503{0}, other{0};
  for (int round = 0; round < 3; ++round) {
    std::vector<std::thread> clients;
    for (int c = 0; c < 6; ++c)
      clients.emplace_back([&] {
        const int status = server.handle(matmul_chain_request()).status;
        (status == 504 ? answered_504 : status == 503 ? busy_503 : other).fetch_add(1);
      });
    for (std::thread& t : clients) t.join();
  }
  done.store(true);
  watcher.join();
  EXPECT_EQ(other.load(), 0);
  EXPECT_GE(answered_504.load(), 3);
  EXPECT_LE(most_in_flight.load(), 4) << "runs went on behind their 504s";
  EXPECT_EQ(engine.stats().jobs_in_flight, 0);
}

TEST_F(RequestTimeout, AnEndlessLoopGetsA504AndStops) {
  const auto start = TimeoutClock::now();
  const HttpResponse r = infer("endless", endless_loop_request());
  EXPECT_EQ(r.status, 504) << r.body.substr(0, 300);
  EXPECT_LT(timeout_test_seconds_since(start), 1.5 * test::kSanitizerSlack);
  EXPECT_EQ(server.in_flight(), 0);
  EXPECT_EQ(engine.stats().jobs_in_flight, 0);
}

// A dynamic model of `layers` Gemms of [2048, 256] by one [256, 256] weight (Relu between):
// about 0.27 GFLOP a layer at full width, with sub-nets `half` and `full`.
std::string slow_dynamic_model(int layers) {
  test::OnnxBuilder b;
  b.input("x", onnx::TensorProto::FLOAT, {2048, 256}).output("y", onnx::TensorProto::FLOAT, {2048, 256});
  b.initializer_f32("w", {256, 256}, std::vector<float>(256 * 256, 1.0f / 256));
  std::string last = "x";
  for (int i = 0; i < layers; ++i) {
    const std::string w = "w", h = "h" + std::to_string(i);
    const std::string out = i + 1 == layers ? "y" : "r" + std::to_string(i);
    test::OnnxBuilder::attr_int(b.node("Gemm", {last, w}, {i + 1 == layers ? out : h}, "fc" + std::to_string(i)), "transB", 1);
    if (i + 1 < layers) b.node("Relu", {h}, {out}, "relu" + std::to_string(i));
    last = out;
  }
  auto* p = b.proto().add_metadata_props();
  p->set_key("grove.subnets");
  p->set_value("subnet half ratio=0.5\nsubnet full ratio=1");
  return b.bytes();
}

// A request for a sub-net stops at the deadline as any run does (its runs once went on past
// --request-timeout): 504, and nothing of it left in flight.
TEST_F(RequestTimeout, ASubnetRunGetsA504AndStops) {
  models.load("dyn", repo.write("dyn.onnx", slow_dynamic_model(kSanitizedBuild ? 20 : 1000)));
  const HttpResponse r = server.handle(binary_request("dyn", {2048, 256}, 0.5f, {{"subnet", "full"}}));
  EXPECT_EQ(r.status, 504) << r.body.substr(0, 300);
  EXPECT_NE(r.body.find("took over 0.2 s (--request-timeout)"), std::string::npos) << r.body.substr(0, 300);
  EXPECT_EQ(server.in_flight(), 0);
  EXPECT_EQ(engine.stats().jobs_in_flight, 0);
}

// Planning input shapes not seen before is not cut at the deadline, and it is not in the way of
// anything else: the request leaves with a 504 at its deadline while the planning goes on; the
// next request of those shapes is served from it; requests of shapes already planned do not
// wait for it; and past a few plannings at once per model, new shapes wait for a free slot.
class SlowPlanning : public RequestTimeout {
 protected:
  // A model planned at about 0.03 ms a node and run in milliseconds, deep enough that one
  // planning takes over 1 s here (the sanitizers' slow-down differs: measured, then grown).
  SlowPlanning() {
    int layers = kSanitizedBuild ? 2000 : 40000;
    for (int attempt = 0; attempt < 3; ++attempt) {
      deep = "deep" + std::to_string(attempt);
      models.load(deep, repo.write(deep + ".onnx", test::slow_planning_model(layers)));
      planning = plan_rows(1);
      if (planning > 1.0) break;
      layers = std::min(150'000, static_cast<int>(layers * 1.5 / std::max(planning, 0.01)) + 1);
    }
  }
  // Answers a planned shape's request however slowly its thousands of tiles run (under
  // ThreadSanitizer's adversarial schedules, past `server`'s 0.2 s).
  HttpResponse infer_patiently(const std::string& model, const std::string& body) {
    return patient.handle({"POST", "/v2/models/" + model + "/infer", {}, body});
  }

  InferenceServer patient{engine, models, {.request_timeout_s = 120}};
  static std::string rows_request(int rows) {
    std::vector<float> x(static_cast<size_t>(rows) * 8, 0.5f);
    return json{{"inputs", {{{"name", "x"}, {"shape", {rows, 8}}, {"datatype", "FP32"}, {"data", x}}}}}.dump();
  }
  // Seconds for planning `rows` from the calling thread, waiting for a planning under way.
  double plan_rows(int rows) {
    const auto start = TimeoutClock::now();
    EXPECT_NE(plan_for(*models.find(deep)->session, {{"x", {rows, 8}}}), nullptr);
    return timeout_test_seconds_since(start);
  }

  std::string deep;
  double planning = 0;  // seconds for one planning of the model, as measured (over 1 s)
};

TEST_F(SlowPlanning, ANewShapeGetsA504AtTheDeadlineAndIsServedOncePlanned) {
  ASSERT_GT(planning, 1.0) << "the model plans too fast on this machine for the test to mean anything";
  const auto start = TimeoutClock::now();
  const HttpResponse r = infer(deep, rows_request(2));
  const double took = timeout_test_seconds_since(start);
  ASSERT_EQ(r.status, 504) << r.body.substr(0, 300);
  EXPECT_NE(r.body.find("while planning input shapes not seen before; the planning goes on"), std::string::npos) << r.body;
  EXPECT_LT(took, planning / 2) << "the 504 waited for the planning (" << planning << " s)";
  EXPECT_EQ(server.in_flight(), 0);
  // The planning goes on behind the 504: shape 2's plan arrives with no request waiting for it
  // (seen directly, not by timing a planning, which contention stretches).
  Session& session = *models.find(deep)->session;
  const auto deadline = TimeoutClock::now() + std::chrono::seconds(120);
  while (cached_plan_count(session) < 2 && TimeoutClock::now() < deadline) std::this_thread::sleep_for(10ms);
  EXPECT_EQ(cached_plan_count(session), 2u) << "the planning did not go on behind the 504";
  const HttpResponse served = infer_patiently(deep, rows_request(2));
  EXPECT_EQ(served.status, 200) << served.body.substr(0, 300);
  EXPECT_EQ(cached_plan_count(session), 2u) << "shape 2 was planned again";
}

TEST_F(SlowPlanning, APlannedShapeDoesNotWaitForAnotherShapesPlanning) {
  ASSERT_GT(planning, 1.0);
  ASSERT_EQ(infer_patiently(deep, rows_request(1)).status, 200);
  int fresh = 0;
  std::thread planning_one([&] { fresh = infer(deep, rows_request(3)).status; });  // 504; its planning goes on
  std::this_thread::sleep_for(50ms);  // the planning under way
  // What a request of the planned shape asks of the session first (its memory estimate plans
  // with the request's token), timed apart from its run, whose tiles the sanitizers slow.
  const auto start = TimeoutClock::now();
  const auto plan = plan_for(*models.find(deep)->session, {{"x", {1, 8}}}, CancelToken::after(60));
  const double took = timeout_test_seconds_since(start);
  planning_one.join();
  EXPECT_EQ(fresh, 504);
  EXPECT_NE(plan, nullptr);
  EXPECT_LT(took, planning / 3) << "a planned shape waited for another shape's planning";
  EXPECT_EQ(infer_patiently(deep, rows_request(1)).status, 200);
}

// Two plannings at once per model: a third new shape's request waits for a free slot (until
// its deadline), so four new shapes at once leave two plannings behind their 504s, not four.
TEST_F(SlowPlanning, NewShapesPastTwoPlanningsAtOnceWaitForAFreeSlot) {
  ASSERT_GT(planning, 1.0);
  std::vector<int> status(4);
  std::vector<std::thread> clients;
  for (int i = 0; i < 4; ++i) clients.emplace_back([&, i] { status[static_cast<size_t>(i)] = infer(deep, rows_request(10 + i)).status; });
  for (std::thread& t : clients) t.join();
  EXPECT_EQ(std::count(status.begin(), status.end(), 504), 4);
  EXPECT_EQ(server.in_flight(), 0);
  // Shape 1 (planned by the fixture) and the two that got a slot, once their plannings end;
  // the other two were never started (their requests left while waiting for a slot).
  Session& session = *models.find(deep)->session;
  const auto deadline = TimeoutClock::now() + std::chrono::seconds(120);
  while (cached_plan_count(session) < 3 && TimeoutClock::now() < deadline) std::this_thread::sleep_for(10ms);
  std::this_thread::sleep_for(std::chrono::duration<double>(planning));
  EXPECT_EQ(cached_plan_count(session), 3u) << "shapes planned behind the four 504s, besides the fixture's";
}

}  // namespace
}  // namespace grove::serve
