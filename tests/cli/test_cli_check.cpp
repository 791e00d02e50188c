// grove check: the optimized plan against the reference executor on the imported graph.
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <optional>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "../unit/pruned_winograd_model.h"
#include "cli_harness.h"
#include "npy/npy.h"

using namespace grove;
using namespace grove::cli_test;

namespace {

// GROVE_TUNE_DIR pointed at a test's own folder while it lives, then put back.
class TuneDirFor {
 public:
  explicit TuneDirFor(const TempDir& dir) {
    if (const char* before = std::getenv("GROVE_TUNE_DIR")) saved_ = before;
    setenv("GROVE_TUNE_DIR", (dir / "tune").c_str(), 1);
  }
  ~TuneDirFor() {
    if (saved_) setenv("GROVE_TUNE_DIR", saved_->c_str(), 1);
    else unsetenv("GROVE_TUNE_DIR");
  }

 private:
  std::optional<std::string> saved_;
};

// The machine.probes file the first plan of the default model stores under dir's tune folder,
// and that file's lines; an empty path where the plan failed or stored none.
std::filesystem::path probes_file_after_a_plan(const TempDir& dir, std::vector<std::string>& lines) {
  const Result r = run_grove({"plan", GROVE_MODELS_DIR "/default.onnx", "--json"});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  std::filesystem::path file;
  if (std::filesystem::exists(dir / "tune"))
    for (const auto& entry : std::filesystem::recursive_directory_iterator(dir / "tune"))
      if (entry.path().filename() == "machine.probes") file = entry.path();
  std::istringstream in(file.empty() ? "" : read_bytes(file));
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  return file;
}

// What a test plants in a stored probes file before planning again.
struct PlantedProbes {
  std::string header;  // the first line, where not empty
  std::string min_channels, gain;
  bool drop_half_kept = false;
};

// Rewrites the probes file from `lines` with `planted`, then plans the default model again.
Result plan_with_planted_probes(const std::filesystem::path& file, const std::vector<std::string>& lines,
                                const PlantedProbes& planted) {
  std::string text;
  for (size_t i = 0; i < lines.size(); ++i) {
    std::string line = lines[i];
    if (i == 0 && !planted.header.empty()) line = planted.header;
    if (planted.drop_half_kept && line.starts_with("winograd_nhwc_small_plane_half_kept")) continue;
    if (line.starts_with("winograd_nhwc_min_channels")) line = "winograd_nhwc_min_channels " + planted.min_channels;
    if (line.starts_with("winograd_nhwc_small_plane_gain")) line = "winograd_nhwc_small_plane_gain " + planted.gain;
    text += line + "\n";
  }
  write_bytes(file, text);
  return run_grove({"plan", GROVE_MODELS_DIR "/default.onnx", "--json"});
}

std::vector<float> values(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> u(-1, 1);
  std::vector<float> v(n);
  for (float& x : v) x = u(rng);
  return v;
}

// x [4, 6] -> Gemm [4, 8] -> BatchNormalization on [N, C] -> Relu: the shape whose tile rule
// once read one channel for a whole row.
std::filesystem::path gemm_batchnorm_model(const TempDir& dir) {
  ModelBuilder b(14);
  b.input("x", onnx::TensorProto::FLOAT, {"4", "6"}).output("y", onnx::TensorProto::FLOAT, {"4", "8"});
  b.initializer("w", {6, 8}, values(48, 1)).initializer("c", {8}, values(8, 2));
  b.initializer("scale", {8}, values(8, 3)).initializer("bias", {8}, values(8, 4));
  b.initializer("mean", {8}, values(8, 5));
  std::vector<float> var = values(8, 6);
  for (float& v : var) v = 0.5f + v * v;
  b.initializer("var", {8}, var);
  b.node("Gemm", {"x", "w", "c"}, {"g"}, "fc");
  b.node("BatchNormalization", {"g", "scale", "bias", "mean", "var"}, {"n"}, "bn");
  b.node("Relu", {"n"}, {"y"}, "relu");
  return b.save(dir / "gemm_bn.onnx");
}

}  // namespace

TEST(CliCheck, TheDefaultModelAgrees) {
  Result r = run_grove({"check", GROVE_MODELS_DIR "/default.onnx", "--input", "image=" GROVE_MODELS_DIR "/default_input.npy"});
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_NE(r.out.find("agree: every output within"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("logits: largest error"), std::string::npos) << r.out;
}

TEST(CliCheck, ABatchNormAfterGemmAgrees) {
  TempDir dir;
  for (const char* threads : {"1", "2", "3"}) {
    Result r = run_grove({"check", gemm_batchnorm_model(dir).string(), "--threads", threads});
    EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
  }
}

// Below float rounding every GEMM differs from the reference's double sums: the search must
// pass the exact ops before the first conv and name that conv, and the plan's node for it.
TEST(CliCheck, AMismatchNamesTheFirstDifferingNode) {
  Result r = run_grove({"check", GROVE_MODELS_DIR "/default.onnx", "--tolerance", "1e-12", "--threads", "2"});
  ASSERT_EQ(r.exit_code, 3) << r.out << r.err;
  EXPECT_NE(r.out.find("MISMATCH"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("first differing value"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("made by node '"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("(Conv) with inputs [1, 3,"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("computed in the plan by node '"), std::string::npos) << r.out;
}

TEST(CliCheck, BadArgumentsAreOneLineErrors) {
  TempDir dir;
  expect_clean_error(run_grove({"check", (dir / "missing.onnx").string()}));
  write_bytes(dir / "junk.onnx", "not a model");
  expect_clean_error(run_grove({"check", (dir / "junk.onnx").string()}));
  Result r = run_grove({"check", GROVE_MODELS_DIR "/default.onnx", "--tolerance", "-1"});
  EXPECT_EQ(r.exit_code, 2) << r.err;
}

// The machine probes are stored once per machine: the same model and options plan the same
// way in every process, the first (which measures) included.
TEST(CliPlan, JsonIsTheSameInTenProcesses) {
  TempDir dir;
  TuneDirFor tune(dir);
  for (const char* threads : {"1", "2"}) {
    std::string first;
    for (int i = 0; i < 10; ++i) {
      Result r = run_grove({"plan", GROVE_MODELS_DIR "/default.onnx", "--json", "--threads", threads});
      ASSERT_EQ(r.exit_code, 0) << r.err;
      if (i == 0) first = r.out;
      EXPECT_EQ(r.out, first) << "process " << i << " at " << threads << " threads";
    }
    EXPECT_NE(first.find("\"machine_probes\""), std::string::npos) << first;
    EXPECT_NE(first.find("\"source\": \"stored in " + (dir / "tune").string()), std::string::npos) << first;
    EXPECT_NE(first.find("\"primitive_from\": \"rules\""), std::string::npos) << first;
    // Each node's decision record, with where its primitive and grid came from.
    EXPECT_NE(first.find("\"decisions\": {"), std::string::npos) << first;
    EXPECT_NE(first.find("\"primitive_source\": \"rule\""), std::string::npos) << first;
    EXPECT_NE(first.find("\"grid_source\": \"rule\""), std::string::npos) << first;
  }
  // A corrupt probes file is a cache, not an input: measured again and rewritten.
  for (const auto& entry : std::filesystem::recursive_directory_iterator(dir / "tune"))
    if (entry.path().filename() == "machine.probes") write_bytes(entry.path(), "grove machine probes 1\nmachine x\n");
  Result r = run_grove({"plan", GROVE_MODELS_DIR "/default.onnx", "--json", "--threads", "1"});
  EXPECT_EQ(r.exit_code, 0) << r.err;
}

// A pruned conv on Winograd whose cores share an image: grove plan says a session tries it
// against the pruned GEMM; grove run does (and says which it kept), and the record it leaves
// is what grove plan then plans by, either way.
TEST(CliPlan, APrunedWinogradConvFollowsThePruningTrialsRecord) {
  TempDir dir;
  TuneDirFor tune(dir);
  grove::test::store_probes_for_winograd();
  const std::string model = (dir / "pruned.onnx").string();
  write_bytes(model, grove::test::pruned_winograd_model(1));
  Result plan = run_grove({"plan", model, "--threads", "2"});
  ASSERT_EQ(plan.exit_code, 0) << plan.err;
  EXPECT_NE(plan.out.find("1 of them on Winograd"), std::string::npos) << plan.out;
  EXPECT_NE(plan.out.find("pruning: a session tries the pruned convs on Winograd against the pruned GEMM"),
            std::string::npos) << plan.out;
  Result run = run_grove({"run", model, "--threads", "2"});
  ASSERT_EQ(run.exit_code, 0) << run.err;
  EXPECT_NE(run.out.find("pruned convs on Winograd tried against the pruned GEMM: the "), std::string::npos) << run.out;
  std::filesystem::path record;
  for (const auto& entry : std::filesystem::recursive_directory_iterator(dir / "tune"))
    if (entry.path().extension() == ".record") record = entry.path();
  ASSERT_FALSE(record.empty()) << "grove run left no pruning record";
  for (const char* kept : {"gemm", "winograd"}) {
    std::ifstream in(record);
    std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    text = text.substr(0, text.find("pruned_convs ")) + "pruned_convs " + kept + "\n";
    write_bytes(record, text);
    plan = run_grove({"plan", model, "--threads", "2"});
    ASSERT_EQ(plan.exit_code, 0) << plan.err;
    EXPECT_EQ(plan.out.find("1 of them on Winograd") != std::string::npos, std::string(kept) == "winograd") << plan.out;
    EXPECT_NE(plan.out.find(std::string(kept) == "gemm" ? "record puts the pruned convs on the pruned GEMM"
                                                         : "record keeps the pruned convs on Winograd"),
              std::string::npos) << plan.out;
  }
}

namespace {

// A tuning folder of its own, with the probes file its first plan stored (file, its lines).
class StoredProbes : public ::testing::Test {
 protected:
  void SetUp() override {
    file = probes_file_after_a_plan(dir, lines);
    ASSERT_FALSE(file.empty());
  }
  TempDir dir;
  TuneDirFor tune{dir};
  std::vector<std::string> lines;
  std::filesystem::path file;
};

// A probes file from before the half-kept Winograd ratio was stored: only that ratio is measured
// and added; the file's other Winograd answers (and so the plans' Winograd layers) stay.
TEST_F(StoredProbes, AFileWithoutTheHalfKeptRatioKeepsItsWinogradAnswers) {
  const Result r = plan_with_planted_probes(file, lines, {.min_channels = "16", .gain = "1.25", .drop_half_kept = true});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("\"winograd_nhwc_min_channels\": 16,"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("\"winograd_small_plane_gain\": 1.25,"), std::string::npos) << r.out;
  const std::string key = "\"winograd_small_plane_half_kept\": ";
  const size_t at = r.out.find(key);
  ASSERT_NE(at, std::string::npos) << r.out;
  EXPECT_GT(std::stod(r.out.substr(at + key.size())), 0) << r.out;
  EXPECT_NE(read_bytes(file).find("winograd_nhwc_small_plane_half_kept "), std::string::npos);
}

// A probes file of an earlier version timed kernels this grove no longer runs: it is measured
// again and rewritten, not read (its answers would price the new kernels by the old ones).
TEST_F(StoredProbes, AFileOfAnotherVersionIsMeasuredAgain) {
  const std::string current_header = lines.front();
  ASSERT_NE(current_header, "grove machine probes 1");
  // The same machine and fields, an earlier version, and answers no measurement gives (the
  // probe answers a count it times, or 64; a gain near 1), so the test cannot pass by a new
  // measurement that happens to agree.
  const Result r =
      plan_with_planted_probes(file, lines, {.header = "grove machine probes 1", .min_channels = "7", .gain = "1234.5"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out.find("\"winograd_small_plane_gain\": 1234.5,"), std::string::npos) << r.out;
  EXPECT_EQ(r.out.find("\"winograd_nhwc_min_channels\": 7,"), std::string::npos) << r.out;
  const std::string stored = read_bytes(file);
  EXPECT_TRUE(stored.starts_with(current_header + "\n")) << stored;
  EXPECT_EQ(stored.find("winograd_nhwc_small_plane_gain 1234.5"), std::string::npos) << stored;
}

}  // namespace
