// Hostile JSON in-process: nesting past the limit is refused before parsing, and what is
// under the limit never reaches code that recurses once per level.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "serve/json_depth.h"
#include "serve/kserve_tensor.h"
#include "serve_test_util.h"

namespace grove::serve {
namespace {

using nlohmann::json;

std::string nested(size_t levels, const std::string& inner) { return std::string(levels, '[') + inner + std::string(levels, ']'); }

class JsonLimits : public ::testing::Test {
 protected:
  JsonLimits() : models(engine, {}, repo.dir()), server(engine, models, {.max_body_bytes = 8 << 20}) {
    repo.write("add.onnx", test::add_model());
    models.load("add");
  }
  HttpResponse infer(const std::string& body) { return server.handle({"POST", "/v2/models/add/infer", {}, body}); }
  static std::string error_of(const HttpResponse& r) {
    json j = json::parse(r.body, nullptr, false);
    return j.is_object() && j.contains("error") ? j["error"].get<std::string>() : r.body;
  }

  test::TempRepository repo;
  Engine engine{{.threads = 1}};
  ModelRepository models;
  InferenceServer server;
};

TEST(JsonDepth, CountsBracketsOutsideStrings) {
  EXPECT_EQ(json_nesting_depth(R"({"a": [1, [2]], "b": {}})", 100), 3);
  EXPECT_EQ(json_nesting_depth(R"({"a": "[[[[{{{{", "b": "\"[[[["})", 100), 1);
  EXPECT_EQ(json_nesting_depth("", 100), 0);
  EXPECT_EQ(json_nesting_depth(std::string(1000, '['), 10), 11);  // stops scanning past the limit
}

// 60,000 levels in an input's `data` (120 KB) crashed the server in the recursive flattening.
TEST_F(JsonLimits, DeepDataIsRefusedBeforeParsing) {
  std::string body = R"({"inputs": [{"name": "x", "shape": [2, 3], "datatype": "FP32", "data": )" + nested(60000, "1") + "}]}";
  HttpResponse r = infer(body);
  EXPECT_EQ(r.status, 400);
  EXPECT_EQ(error_of(r), "JSON nested deeper than 64 levels (the server's max_json_depth)");
}

// A million levels inside `parameters` crashed it in a recursive copy of the value.
TEST_F(JsonLimits, DeepParametersAreRefusedBeforeParsing) {
  std::string body = R"({"parameters": {"p": )" + nested(1000000, "") + R"(}, "inputs": []})";
  HttpResponse r = infer(body);
  EXPECT_EQ(r.status, 400);
  EXPECT_NE(error_of(r).find("max_json_depth"), std::string::npos) << r.body;
}

TEST_F(JsonLimits, NestingAtTheLimitIsServed) {
  // The body, `inputs`, the input object, then `data` nested 61 deep: 64 levels.
  std::string body = R"({"inputs": [{"name": "x", "shape": [2, 3], "datatype": "FP32", "data": )" + nested(61, "1, 2, 3, 4, 5, 6") + "}]}";
  HttpResponse r = infer(body);
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(json::parse(r.body)["outputs"][0]["data"], json({2, 4, 6, 5, 7, 9}));
  EXPECT_EQ(infer(R"({"inputs": [{"name": "x", "shape": [2, 3], "datatype": "FP32", "data": )" + nested(62, "1") + "}]}").status, 400);
}

// Flattening walks `data` with its own stack: a value parsed with no depth limit (the fuzzer,
// another caller) cannot overflow the thread's stack however deep it is.
TEST(KserveTensor, FlattensDeepDataWithoutRecursion) {
  json deep = json::parse(nested(200000, "7"));
  Tensor t = tensor_from_json("x", DType::f32, {1}, deep);
  EXPECT_EQ(t.data<float>()[0], 7.0f);
  EXPECT_THROW(tensor_from_json("x", DType::f32, {2}, deep), HttpError);
}

TEST_F(JsonLimits, EmptyBodyIsNamed) {
  HttpResponse r = infer("");
  EXPECT_EQ(r.status, 400);
  EXPECT_NE(error_of(r).find("empty request body"), std::string::npos) << r.body;
}

}  // namespace
}  // namespace grove::serve
