// grove generate's refusals: a model that is not a decoder with a cache, bad token ids, a
// cache input without its present output. Each a one-line error naming what is wrong.
#include <gtest/gtest.h>

#include "cli_harness.h"

namespace grove::cli_test {
namespace {

constexpr int kGenFloat = onnx::TensorProto::FLOAT, kGenInt64 = onnx::TensorProto::INT64;

void expect_generate_error(const Result& r, const std::string& words) {
  expect_clean_error(r);
  EXPECT_NE(r.err.find(words), std::string::npos) << r.err;
}

TEST(CliGenerate, RefusesAModelWithoutTokenIds) {
  TempDir dir;
  Result r = run_grove({"generate", GROVE_MODELS_DIR "/default.onnx", "--prompt-ids", "1,2"});
  expect_generate_error(r, "no input named 'input_ids'");
}

TEST(CliGenerate, RefusesAModelWithoutACache) {
  TempDir dir;
  ModelBuilder b;
  b.input("input_ids", kGenInt64, {"1", "s"}).output("logits", kGenInt64, {"1", "s"}).node("Identity", {"input_ids"}, {"logits"});
  Result r = run_grove({"generate", b.save(dir / "m.onnx").string(), "--prompt-ids", "1"});
  expect_generate_error(r, "no input named 'past...'");
}

TEST(CliGenerate, RefusesACacheInputWithoutItsPresent) {
  TempDir dir;
  ModelBuilder b;
  b.input("input_ids", kGenInt64, {"1", "s"})
      .input("past_key_values.0.key", kGenFloat, {"1", "2", "p", "4"})
      .output("logits", kGenInt64, {"1", "s"})
      .output("other", kGenFloat, {"1", "2", "p", "4"})
      .node("Identity", {"input_ids"}, {"logits"})
      .node("Identity", {"past_key_values.0.key"}, {"other"});
  Result r = run_grove({"generate", b.save(dir / "m.onnx").string(), "--prompt-ids", "1"});
  expect_generate_error(r, "'past_key_values.0.key' has no matching output");
}

TEST(CliGenerate, RefusesBadTokenIds) {
  for (const char* ids : {"1,x", "", "-3", "1,,2", "1.5"}) {
    Result r = run_grove({"generate", GROVE_MODELS_DIR "/default.onnx", "--prompt-ids", ids});
    expect_clean_error(r);
    EXPECT_NE(r.err.find("--prompt-ids"), std::string::npos) << ids << ": " << r.err;
  }
}

}  // namespace
}  // namespace grove::cli_test
