// The KServe v2 handlers in-process: every endpoint, every error case, and concurrent
// requests of two models on one engine equal to a Session's own outputs.
#include <gtest/gtest.h>

#include <algorithm>
#include <nlohmann/json.hpp>
#include <set>
#include <thread>

#include "serve_test_util.h"

namespace grove::serve {
namespace {

using nlohmann::json;
using test::TempRepository;

class Server : public ::testing::Test {
 protected:
  Server() : models(engine, {}, repo.dir()), server(engine, models, {.max_body_bytes = 1 << 20}) {
    repo.write("add.onnx", test::add_model());
    repo.write("pair/1/model.onnx", test::two_output_model());
    repo.write("broken.onnx", "not a model");
    models.load("add");
    models.load("pair");
    models.load("lookup", repo.write("elsewhere/g.onnx", test::gather_model()));
  }

  HttpResponse call(const std::string& method, const std::string& path, const std::string& body = "",
                    std::map<std::string, std::string> headers = {}) {
    return server.handle({method, path, std::move(headers), body});
  }
  HttpResponse infer(const std::string& model, const json& body) { return call("POST", "/v2/models/" + model + "/infer", body.dump()); }
  static json parse(const HttpResponse& r) { return json::parse(r.body); }
  // The status and that the body is {"error": "..."} containing `words`.
  static void expect_error(const HttpResponse& r, int status, std::initializer_list<const char*> words) {
    EXPECT_EQ(r.status, status) << r.body;
    json j = json::parse(r.body, nullptr, false);
    ASSERT_TRUE(j.is_object() && j.contains("error")) << r.body;
    for (const char* w : words) EXPECT_NE(j["error"].get<std::string>().find(w), std::string::npos) << w << " in " << r.body;
  }

  TempRepository repo;
  Engine engine{{.threads = 2}};
  ModelRepository models;
  InferenceServer server;
};

json add_request(std::vector<float> x) {
  return {{"id", "r1"}, {"inputs", {{{"name", "x"}, {"shape", {2, 3}}, {"datatype", "FP32"}, {"data", x}}}}};
}

TEST_F(Server, HealthAndServerMetadata) {
  EXPECT_EQ(call("GET", "/v2/health/live").status, 200);
  EXPECT_EQ(call("GET", "/v2/health/ready").status, 200);
  json meta = parse(call("GET", "/v2"));
  EXPECT_EQ(meta["name"], "grove");
  EXPECT_NE(meta["extensions"].dump().find("binary_tensor_data"), std::string::npos);
  server.start_draining();
  EXPECT_EQ(call("GET", "/v2/health/ready").status, 503);
  EXPECT_EQ(call("GET", "/v2/health/live").status, 200);
  expect_error(infer("add", add_request({1, 2, 3, 4, 5, 6})), 503, {"shutting down"});
}

TEST_F(Server, ModelMetadataAndReadiness) {
  json meta = parse(call("GET", "/v2/models/pair"));
  EXPECT_EQ(meta["name"], "pair");
  EXPECT_EQ(meta["versions"], json({"1"}));
  EXPECT_EQ(meta["inputs"][0]["datatype"], "FP32");
  EXPECT_EQ(meta["inputs"][0]["shape"], json({-1, 4}));
  EXPECT_EQ(meta["outputs"].size(), 2u);
  EXPECT_EQ(call("GET", "/v2/models/pair/versions/1").body, call("GET", "/v2/models/pair").body);
  EXPECT_EQ(parse(call("GET", "/v2/models/add/ready"))["ready"], true);
  EXPECT_EQ(call("GET", "/v2/models/add/versions/1/ready").status, 200);
  expect_error(call("GET", "/v2/models/add/versions/2"), 404, {"no version '2'"});
  expect_error(call("GET", "/v2/models/nope"), 404, {"unknown model 'nope'"});
  expect_error(call("GET", "/v2/models/nope/ready"), 404, {"nope"});
}

TEST_F(Server, InferJson) {
  HttpResponse r = infer("add", add_request({1, 2, 3, 4, 5, 6}));
  ASSERT_EQ(r.status, 200) << r.body;
  json j = parse(r);
  EXPECT_EQ(j["model_name"], "add");
  EXPECT_EQ(j["id"], "r1");
  EXPECT_EQ(j["outputs"][0]["name"], "y");
  EXPECT_EQ(j["outputs"][0]["datatype"], "FP32");
  EXPECT_EQ(j["outputs"][0]["shape"], json({2, 3}));
  EXPECT_EQ(j["outputs"][0]["data"], json({2, 4, 6, 5, 7, 9}));
  // Nested data as Triton accepts it, and the versioned path.
  json nested = add_request({});
  nested["inputs"][0]["data"] = {{1, 2, 3}, {4, 5, 6}};
  r = call("POST", "/v2/models/add/versions/1/infer", nested.dump());
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(parse(r)["outputs"][0]["data"], json({2, 4, 6, 5, 7, 9}));
}

TEST_F(Server, InferDynamicShapeAndRequestedOutputs) {
  json req = {{"inputs", {{{"name", "x"}, {"shape", {3, 4}}, {"datatype", "FP32"}, {"data", std::vector<float>(12, -2.0f)}}}},
              {"outputs", {{{"name", "neg"}}}}};
  HttpResponse r = infer("pair", req);
  ASSERT_EQ(r.status, 200) << r.body;
  json j = parse(r);
  ASSERT_EQ(j["outputs"].size(), 1u);
  EXPECT_EQ(j["outputs"][0]["name"], "neg");
  EXPECT_EQ(j["outputs"][0]["shape"], json({3, 4}));
  EXPECT_EQ(j["outputs"][0]["data"], json(std::vector<float>(12, 2.0f)));
}

TEST_F(Server, InferBinaryInAndOut) {
  std::vector<float> x = {1, 2, 3, 4, 5, 6};
  json header = {{"inputs", {{{"name", "x"}, {"shape", {2, 3}}, {"datatype", "FP32"}, {"parameters", {{"binary_data_size", 24}}}}}},
                 {"outputs", {{{"name", "y"}, {"parameters", {{"binary_data", true}}}}}}};
  std::string head = header.dump();
  std::string body = head + std::string(reinterpret_cast<const char*>(x.data()), 24);
  HttpResponse r = call("POST", "/v2/models/add/infer", body, {{"inference-header-content-length", std::to_string(head.size())}});
  ASSERT_EQ(r.status, 200) << r.body;
  ASSERT_TRUE(r.headers.count("Inference-Header-Content-Length"));
  size_t n = std::stoul(r.headers["Inference-Header-Content-Length"]);
  json j = json::parse(r.body.substr(0, n));
  EXPECT_EQ(j["outputs"][0]["parameters"]["binary_data_size"], 24);
  EXPECT_FALSE(j["outputs"][0].contains("data"));
  ASSERT_EQ(r.body.size(), n + 24);
  std::vector<float> y(6);
  std::memcpy(y.data(), r.body.data() + n, 24);
  EXPECT_EQ(y, (std::vector<float>{2, 4, 6, 5, 7, 9}));
  // binary_data_output for every output, JSON input.
  json all = add_request(x);
  all["parameters"] = {{"binary_data_output", true}};
  r = infer("add", all);
  ASSERT_EQ(r.status, 200);
  EXPECT_EQ(r.content_type, "application/octet-stream");
}

TEST_F(Server, BadRequestsGetA4xxNamingTheProblem) {
  expect_error(call("POST", "/v2/models/add/infer", "{bad json"), 400, {"malformed JSON"});
  expect_error(call("POST", "/v2/models/add/infer", "[1, 2]"), 400, {"JSON object"});
  expect_error(infer("add", json::object()), 400, {"'inputs' array"});
  expect_error(infer("add", {{"inputs", json::array()}}), 400, {"missing input 'x'"});
  json r = add_request({1, 2, 3, 4, 5, 6});
  r["inputs"][0]["name"] = "z";
  expect_error(infer("add", r), 400, {"no input named 'z'", "inputs: x"});
  r = add_request({1, 2, 3, 4, 5, 6});
  r["inputs"][0]["datatype"] = "INT32";
  expect_error(infer("add", r), 400, {"datatype INT32", "expects FP32"});
  r["inputs"][0]["datatype"] = "BYTES";
  expect_error(infer("add", r), 400, {"unsupported datatype 'BYTES'"});
  r = add_request({1, 2, 3, 4, 5, 6});
  r["inputs"][0]["shape"] = {3, 2};
  expect_error(infer("add", r), 400, {"shape 3x2", "expects 2x3"});
  r["inputs"][0]["shape"] = {2, -3};
  expect_error(infer("add", r), 400, {"non-negative"});
  expect_error(infer("add", add_request({1, 2, 3})), 400, {"holds 6 values, data has 3"});
  expect_error(infer("add", add_request({1, 2, 3, 4, 5, 6, 7})), 400, {"more data values"});
  r = add_request({1, 2, 3, 4, 5, 6});
  r["inputs"][0]["data"][2] = "three";
  expect_error(infer("add", r), 400, {"must be numbers"});
  r = add_request({1, 2, 3, 4, 5, 6});
  r["inputs"].push_back(r["inputs"][0]);
  expect_error(infer("add", r), 400, {"given twice"});
  r = add_request({1, 2, 3, 4, 5, 6});
  r["outputs"] = {{{"name", "nope"}}};
  expect_error(infer("add", r), 400, {"no output named 'nope'"});
  // Binary data that does not add up.
  json header = {{"inputs", {{{"name", "x"}, {"shape", {2, 3}}, {"datatype", "FP32"}, {"parameters", {{"binary_data_size", 24}}}}}}};
  std::string head = header.dump();
  auto with_bytes = [&](size_t extra, const std::string& length) {
    return call("POST", "/v2/models/add/infer", head + std::string(extra, '\0'), {{"inference-header-content-length", length}});
  };
  expect_error(with_bytes(20, std::to_string(head.size())), 400, {"past the end"});
  expect_error(with_bytes(28, std::to_string(head.size())), 400, {"4 bytes of binary data belong to no input"});
  expect_error(with_bytes(24, "99999"), 400, {"past the body"});
  expect_error(with_bytes(24, "-1"), 400, {"not a byte count"});
  // Limits and routing.
  expect_error(call("POST", "/v2/models/add/infer", std::string((1 << 20) + 1, ' ')), 413, {"--max-body-bytes"});
  expect_error(call("GET", "/v2/models/add/infer"), 405, {"GET"});
  expect_error(call("POST", "/v2/models/add"), 405, {"POST"});
  expect_error(call("GET", "/v3/anything"), 404, {"no such endpoint"});
  expect_error(call("GET", "/v2/models/add/explain"), 404, {"no such endpoint"});
  expect_error(infer("nope", add_request({})), 404, {"unknown model 'nope'"});
  // Bytes that are not UTF-8 are echoed in the parser's message with a replacement character
  // (fuzz_serve found the server aborting while writing that message as JSON).
  std::string body = add_request({1, 2, 3, 4, 5, 6}).dump();
  body.replace(body.find("\"x\""), 3, "\"\xb4\"");
  expect_error(call("POST", "/v2/models/add/infer", body), 400, {"malformed JSON", "\xef\xbf\xbd"});
}

TEST_F(Server, FailingInferenceIs500NamingTheNode) {
  json ok = {{"inputs", {{{"name", "i"}, {"shape", {2}}, {"datatype", "INT64"}, {"data", {3, 0}}}}}};
  HttpResponse r = infer("lookup", ok);
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(parse(r)["outputs"][0]["data"], json({40, 10}));
  json bad = ok;
  bad["inputs"][0]["data"] = {1, 100};
  expect_error(infer("lookup", bad), 500, {"lookup", "Gather", "out of range"});
  // The server and the model carry on.
  EXPECT_EQ(infer("lookup", ok).status, 200);
}

TEST_F(Server, RepositoryLoadUnloadAndIndex) {
  json index = parse(call("POST", "/v2/repository/index"));
  std::map<std::string, std::string> state;
  for (const json& e : index) state[e["name"]] = e["state"];
  EXPECT_EQ(state["add"], "READY");
  EXPECT_EQ(state["pair"], "READY");
  EXPECT_EQ(state["lookup"], "READY");
  EXPECT_EQ(state["broken"], "UNAVAILABLE");

  EXPECT_EQ(call("POST", "/v2/repository/models/add/unload").status, 200);
  expect_error(infer("add", add_request({1, 2, 3, 4, 5, 6})), 404, {"unknown model 'add'"});
  expect_error(call("POST", "/v2/repository/models/add/unload"), 404, {"not loaded"});
  index = parse(call("POST", "/v2/repository/index"));
  for (const json& e : index)
    if (e["name"] == "add") EXPECT_EQ(e["state"], "UNAVAILABLE");
  EXPECT_EQ(call("POST", "/v2/repository/models/add/load").status, 200);
  EXPECT_EQ(infer("add", add_request({1, 2, 3, 4, 5, 6})).status, 200);

  expect_error(call("POST", "/v2/repository/models/broken/load"), 400, {"broken.onnx"});
  expect_error(call("POST", "/v2/repository/models/missing/load"), 404, {"no model named 'missing'"});
  expect_error(call("POST", "/v2/repository/models/..%2F..%2Fetc/load"), 400, {"bad model name"});
  expect_error(call("POST", "/v2/repository/models/.hidden/load"), 400, {"bad model name"});
  expect_error(call("GET", "/v2/repository/index"), 405, {"GET"});
}

TEST_F(Server, MetricsCountRequestsPerModel) {
  infer("add", add_request({1, 2, 3, 4, 5, 6}));
  infer("add", add_request({1}));
  HttpResponse r = call("GET", "/metrics");
  ASSERT_EQ(r.status, 200);
  EXPECT_NE(r.content_type.find("text/plain"), std::string::npos);
  for (const char* line : {"grove_requests_total{model=\"add\"} 2", "grove_request_failures_total{model=\"add\"} 1",
                           "grove_request_duration_seconds_count{model=\"add\"} 2", "grove_requests_total{model=\"pair\"} 0",
                           "# TYPE grove_engine_tiles_total counter", "grove_engine_threads 2"})
    EXPECT_NE(r.body.find(line), std::string::npos) << line << "\n" << r.body;
  // One TYPE line per family: the exposition format rejects repeats.
  EXPECT_EQ(r.body.find("# TYPE grove_requests_total"), r.body.rfind("# TYPE grove_requests_total"));
}

TEST_F(Server, ConcurrentRequestsOfTwoModelsEqualSessionRuns) {
  std::vector<float> x(5 * 4);
  for (size_t i = 0; i < x.size(); ++i) x[i] = static_cast<float>(i) - 9.5f;
  json pair_req = {{"inputs", {{{"name", "x"}, {"shape", {5, 4}}, {"datatype", "FP32"}, {"data", x}}}}};
  const std::string want_pair = infer("pair", pair_req).body, want_add = infer("add", add_request({1, 2, 3, 4, 5, 6})).body;
  ASSERT_NE(want_pair.find("relu"), std::string::npos);
  std::atomic<int> wrong{0};
  std::vector<std::thread> clients;
  for (int c = 0; c < 16; ++c)
    clients.emplace_back([&, c] {
      for (int i = 0; i < 25; ++i) {
        bool pair = (c + i) % 2 == 0;
        HttpResponse r = pair ? infer("pair", pair_req) : infer("add", add_request({1, 2, 3, 4, 5, 6}));
        if (r.status != 200 || r.body != (pair ? want_pair : want_add)) wrong.fetch_add(1);
      }
    });
  for (std::thread& t : clients) t.join();
  EXPECT_EQ(wrong.load(), 0);
  EXPECT_EQ(server.in_flight(), 0);
}

// MT-Graph in the server: requests of two models that arrive together run as one compound
// task while the stage schedule is searched on them, live; every answer is the session's own.
// The search ends with a schedule in force or with the models' requests apart again, and
// GET /v2/mtgraph and /metrics say which. Off (window 0): no pair is ever formed.
TEST_F(Server, RequestsOfTwoModelsRunAsOnePairWhileTheirScheduleIsSearchedLive) {
  std::vector<float> x(5 * 4);
  for (size_t i = 0; i < x.size(); ++i) x[i] = static_cast<float>(i) - 9.5f;
  const json pair_req = {{"inputs", {{{"name", "x"}, {"shape", {5, 4}}, {"datatype", "FP32"}, {"data", x}}}}};
  const std::string want_pair = infer("pair", pair_req).body, want_add = infer("add", add_request({1, 2, 3, 4, 5, 6})).body;
  auto schedule = [&] {
    const json j = parse(call("GET", "/v2/mtgraph"));
    return j["pairs"].empty() ? json() : j["pairs"][0];
  };
  std::atomic<bool> go{true};
  std::atomic<int> wrong{0};
  std::vector<std::thread> clients;
  for (int c = 0; c < 2; ++c)
    clients.emplace_back([&, c] {
      while (go.load()) {
        HttpResponse r = c ? infer("pair", pair_req) : infer("add", add_request({1, 2, 3, 4, 5, 6}));
        if (r.status != 200 || r.body != (c ? want_pair : want_add)) wrong.fetch_add(1);
      }
    });
  const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(120);  // well under a second here
  while (std::chrono::steady_clock::now() < until && (schedule().is_null() || schedule()["phase"] == "searching"))
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  go.store(false);
  for (std::thread& t : clients) t.join();
  EXPECT_EQ(wrong.load(), 0);
  const json found = schedule();
  ASSERT_FALSE(found.is_null());
  EXPECT_EQ(std::set<std::string>(found["models"].begin(), found["models"].end()), (std::set<std::string>{"add", "pair"}));
  EXPECT_TRUE(found["phase"] == "in force" || found["phase"] == "alone") << found.dump();
  EXPECT_GT(found["pair_runs"].get<int64_t>(), 0);
  EXPECT_GT(found["schedules_profiled"].get<int>(), 1) << found.dump();
  EXPECT_EQ(found["pointers"].size(), 2u) << found.dump();
  const std::string metrics = call("GET", "/metrics").body;
  EXPECT_NE(metrics.find("grove_mtgraph_pair_runs_total{models="), std::string::npos);
  EXPECT_NE(metrics.find("grove_mtgraph_gain{models="), std::string::npos);

  // A model reloaded: its old plans go (the pair does not keep them), the new plans pair afresh,
  // and the answers stay the session's.
  models.load("add");
  go.store(true);
  clients.clear();
  for (int c = 0; c < 2; ++c)
    clients.emplace_back([&, c] {
      for (int i = 0; i < 300; ++i) {
        HttpResponse r = c ? infer("pair", pair_req) : infer("add", add_request({1, 2, 3, 4, 5, 6}));
        if (r.status != 200 || r.body != (c ? want_pair : want_add)) wrong.fetch_add(1);
      }
    });
  for (std::thread& t : clients) t.join();
  EXPECT_EQ(wrong.load(), 0);
  const json after = parse(call("GET", "/v2/mtgraph"))["pairs"];
  EXPECT_EQ(after.size(), 1u) << after.dump() << ": the unloaded plans' pair is still listed";

  InferenceServer off(engine, models, {.mt_graph_window_ms = 0});
  std::vector<std::thread> unpaired;
  for (int c = 0; c < 2; ++c)
    unpaired.emplace_back([&, c] {
      for (int i = 0; i < 50; ++i) {
        HttpResponse r = off.handle({"POST", "/v2/models/" + std::string(c ? "pair" : "add") + "/infer", {},
                                     c ? pair_req.dump() : add_request({1, 2, 3, 4, 5, 6}).dump()});
        if (r.status != 200 || r.body != (c ? want_pair : want_add)) wrong.fetch_add(1);
      }
    });
  for (std::thread& t : unpaired) t.join();
  EXPECT_EQ(wrong.load(), 0);
  const json none = json::parse(off.handle({"GET", "/v2/mtgraph", {}, ""}).body);
  EXPECT_EQ(none["enabled"], false);
  EXPECT_TRUE(none["pairs"].empty());
}

}  // namespace
}  // namespace grove::serve

namespace grove::serve {
namespace {

// The live page and its timeline while requests run (the engine's trace is started and
// stopped under load: run under ThreadSanitizer by scripts/test.sh); two recorders at once:
// one gets 503.
TEST_F(Server, TheLivePageAndATimelineRecordedUnderLoad) {
  const HttpResponse page = call("GET", "/");
  EXPECT_EQ(page.status, 200);
  EXPECT_EQ(page.content_type, "text/html; charset=utf-8");
  EXPECT_NE(page.body.find("/v2/timeline"), std::string::npos);
  std::atomic<bool> stop{false};
  std::thread load([&] {
    while (!stop.load()) EXPECT_EQ(infer("add", add_request({1, 2, 3, 4, 5, 6})).status, 200);
  });
  std::vector<HttpResponse> timelines(2);
  std::vector<std::thread> viewers;
  for (size_t i = 0; i < timelines.size(); ++i) viewers.emplace_back([&, i] { timelines[i] = call("GET", "/v2/timeline"); });
  for (std::thread& v : viewers) v.join();
  stop.store(true);
  load.join();
  std::vector<int> status = {timelines[0].status, timelines[1].status};
  std::sort(status.begin(), status.end());
  EXPECT_EQ(status, (std::vector<int>{200, 503}));
  const json t = parse(timelines[0].status == 200 ? timelines[0] : timelines[1]);
  EXPECT_EQ(t["workers"], 2);
  ASSERT_EQ(t["busy"].size(), 2u);
  ASSERT_GT(t["tiles"].size(), 0u) << "no tiles recorded while requests ran";
  std::set<int64_t> runs;
  for (const json& tile : t["tiles"]) {
    ASSERT_EQ(tile.size(), 5u);
    runs.insert(tile[1].get<int64_t>());
    EXPECT_GE(tile[3].get<double>(), 0);
    EXPECT_FALSE(tile[4].get<std::string>().empty());
  }
  EXPECT_LE(runs.size(), 6u) << "the last 6 runs' tiles only";
  expect_error(call("POST", "/v2/timeline"), 405, {"not allowed"});
}

TEST_F(Server, DynamicModelsTakeASubnetOrALatencyTargetPerRequest) {
  models.load("dyn", repo.write("dyn.onnx", test::dynamic_model()));
  auto request = [](json params) {
    json r = {{"inputs", {{{"name", "x"}, {"shape", {1, 4}}, {"datatype", "FP32"}, {"data", {1, -2, 3, 0.5}}}}}};
    if (!params.is_null()) r["parameters"] = params;
    return r;
  };
  const HttpResponse plain = infer("dyn", request(nullptr));
  ASSERT_EQ(plain.status, 200) << plain.body;
  EXPECT_FALSE(parse(plain).contains("parameters"));
  const json full = parse(infer("dyn", request({{"subnet", "full"}})));
  EXPECT_EQ(full["parameters"]["subnet"], "full");
  EXPECT_EQ(full["outputs"][0]["data"], parse(plain)["outputs"][0]["data"]);
  const json half = parse(infer("dyn", request({{"subnet", "half"}})));
  EXPECT_EQ(half["parameters"]["subnet"], "half");
  EXPECT_NE(half["outputs"][0]["data"], full["outputs"][0]["data"]);
  // Warm both, then a target nothing can miss picks the full net.
  for (int i = 0; i < 3; ++i) infer("dyn", request({{"subnet", "half"}}));
  EXPECT_EQ(parse(infer("dyn", request({{"latency_target_ms", 1e6}})))["parameters"]["subnet"], "full");
  expect_error(infer("dyn", request({{"subnet", "quarter"}})), 400, {"no sub-net 'quarter'", "half, full"});
  expect_error(infer("dyn", request({{"latency_target_ms", -1}})), 400, {"positive number"});
  expect_error(infer("dyn", request({{"subnet", "half"}, {"latency_target_ms", 2}})), 400, {"not both"});
  expect_error(infer("add", {{"inputs", add_request({1, 2, 3, 4, 5, 6})["inputs"]}, {"parameters", {{"subnet", "half"}}}}),
               400, {"model 'add' has no sub-nets"});
}

TEST(ServerBatching, JoinedRequestsGetTheirOwnRowsBack) {
  test::TempRepository repo;
  repo.write("pair.onnx", test::two_output_model());
  repo.write("add.onnx", test::add_model());
  Engine engine({.threads = 2});
  ModelRepository models(engine, {}, repo.dir(), {.max_batch = 16, .max_delay = std::chrono::milliseconds(50)});
  models.load("pair");
  models.load("add");
  EXPECT_TRUE(models.find("pair")->batcher);
  EXPECT_FALSE(models.find("add")->batcher);
  EXPECT_NE(models.find("add")->batching_note.find("input 'x'"), std::string::npos);
  InferenceServer server(engine, models);

  // Request i sends i+1 rows of the value i - 3.5 (Relu and Neg make each row's answer its own).
  auto request = [](int i) {
    std::vector<float> x(static_cast<size_t>(4 * (i + 1)), static_cast<float>(i) - 3.5f);
    return json{{"inputs", {{{"name", "x"}, {"shape", {i + 1, 4}}, {"datatype", "FP32"}, {"data", x}}}}}.dump();
  };
  std::vector<HttpResponse> answers(6);
  std::vector<std::thread> clients;
  for (int i = 0; i < 6; ++i)
    clients.emplace_back([&, i] { answers[static_cast<size_t>(i)] = server.handle({"POST", "/v2/models/pair/infer", {}, request(i)}); });
  for (std::thread& t : clients) t.join();
  for (int i = 0; i < 6; ++i) {
    const HttpResponse& r = answers[static_cast<size_t>(i)];
    ASSERT_EQ(r.status, 200) << r.body;
    json j = json::parse(r.body);
    float v = static_cast<float>(i) - 3.5f;
    for (const json& out : j["outputs"]) {
      EXPECT_EQ(out["shape"], json({i + 1, 4}));
      float want = out["name"] == "relu" ? std::max(v, 0.0f) : -v;
      EXPECT_EQ(out["data"], json(std::vector<float>(static_cast<size_t>(4 * (i + 1)), want))) << i;
    }
  }
  BatchStats stats = models.find("pair")->batcher->stats();
  EXPECT_EQ(stats.requests, 6);
  EXPECT_LT(stats.batches, 6) << "no requests were joined";
  std::string metrics = server.handle({"GET", "/metrics", {}, ""}).body;
  EXPECT_NE(metrics.find("grove_batched_requests_total{model=\"pair\"} 6"), std::string::npos) << metrics;
  // Different shapes past dim 0 never share a batch; a wrong shape still gets 400.
  HttpResponse bad = server.handle({"POST", "/v2/models/pair/infer", {}, json{{"inputs", {{{"name", "x"}, {"shape", {2, 5}}, {"datatype", "FP32"}, {"data", std::vector<float>(10)}}}}}.dump()});
  EXPECT_EQ(bad.status, 400) << bad.body;
}

}  // namespace
}  // namespace grove::serve
