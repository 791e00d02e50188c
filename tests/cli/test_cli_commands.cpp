// The grove command on good input: demo, info, run, help and version.
#include <gtest/gtest.h>

#include <cmath>

#include "cli_harness.h"
#include "npy/npy.h"

namespace grove::cli_test {
namespace {

constexpr int kFloat = onnx::TensorProto::FLOAT;
constexpr int kInt64 = onnx::TensorProto::INT64;

// out/y = Relu(X + B), X: [2, 3]. The output name holds a '/' to test file-name sanitising.
ModelBuilder add_relu_model(const std::vector<std::string>& x_dims = {"2", "3"}) {
  ModelBuilder m;
  m.input("X", kFloat, x_dims).output("out/y", kFloat, x_dims);
  m.initializer("B", {3}, {0.5f, -1.0f, 0.0f});
  m.node("Add", {"X", "B"}, {"s"}, "add").node("Relu", {"s"}, {"out/y"}, "relu");
  return m;
}

TEST(CliCommands, DemoRunsTheEmbeddedModelFromAnyDirectory) {
  TempDir dir;
  for (auto args : {std::vector<std::string>{}, std::vector<std::string>{"demo"}}) {
    Result r = run_grove(args, dir.path());
    ASSERT_EQ(r.exit_code, 0) << r.err;
    EXPECT_NE(r.out.find("top-5"), std::string::npos) << r.out;
    EXPECT_NE(r.out.find("latency (median"), std::string::npos) << r.out;
    EXPECT_NE(r.out.find("barrier-free is"), std::string::npos) << r.out;
    EXPECT_NE(r.out.find("matches PyTorch: yes"), std::string::npos) << r.out;
  }
}

TEST(CliCommands, RunDefaultModelMatchesPyTorch) {
  TempDir dir;
  Result r = run_grove({"run", GROVE_MODELS_DIR "/default.onnx", "--input",
                        "image=" GROVE_MODELS_DIR "/default_input.npy", "--output", dir.path().string()});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  auto got = read_npy((dir / "logits.npy").string()).to_f64();
  auto want = read_npy(GROVE_MODELS_DIR "/default_expected.npy").to_f64();
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i) EXPECT_NEAR(got[i], want[i], 1e-4 + 1e-3 * std::abs(want[i])) << i;
}

TEST(CliCommands, VersionAndHelp) {
  Result v = run_grove({"--version"});
  EXPECT_EQ(v.exit_code, 0);
  EXPECT_EQ(v.out.rfind("grove ", 0), 0u) << v.out;
  Result h = run_grove({"run", "--help"});
  EXPECT_EQ(h.exit_code, 0);
  for (const char* text : {"--input", "--shape", "--output", "--threads", "--seed", "single-threaded", "Examples"})
    EXPECT_NE(h.out.find(text), std::string::npos) << text;
}

TEST(CliCommands, UsageErrorsExitTwo) {
  EXPECT_EQ(run_grove({"run"}).exit_code, 2);                          // no model
  EXPECT_EQ(run_grove({"run", "m.onnx", "--bogus"}).exit_code, 2);     // unknown option
  EXPECT_EQ(run_grove({"run", "m.onnx", "--threads", "-1"}).exit_code, 2);
  EXPECT_EQ(run_grove({"run", "m.onnx", "--schedule", "sideways"}).exit_code, 2);
  EXPECT_EQ(run_grove({"run", "m.onnx", "--executor", "gpu"}).exit_code, 2);
  EXPECT_EQ(run_grove({"frobnicate"}).exit_code, 2);
}

TEST(CliCommands, InfoOnTheDefaultModel) {
  Result r = run_grove({"info", GROVE_MODELS_DIR "/default.onnx"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  for (const char* text : {"image", "[1, 3, 112, 112]", "logits", "[1, 1000]", "Conv", "Gemm", "GFLOPs", "parameters:"})
    EXPECT_NE(r.out.find(text), std::string::npos) << text << "\n" << r.out;
}

TEST(CliCommands, InfoShowsSymbolicDimsAndBindsWithShape) {
  TempDir dir;
  auto model = add_relu_model({"batch", "3"}).save(dir / "dyn.onnx");
  Result unbound = run_grove({"info", model.string()});
  ASSERT_EQ(unbound.exit_code, 0) << unbound.err;
  EXPECT_NE(unbound.out.find("[batch, 3]"), std::string::npos) << unbound.out;
  EXPECT_NE(unbound.out.find("--shape X="), std::string::npos) << unbound.out;
  EXPECT_NE(unbound.out.find("Add"), std::string::npos) << unbound.out;

  Result bound = run_grove({"info", model.string(), "--shape", "X=4x3"});
  ASSERT_EQ(bound.exit_code, 0) << bound.err;
  EXPECT_NE(bound.out.find("bound: [4, 3]"), std::string::npos) << bound.out;
  EXPECT_NE(bound.out.find("GFLOPs for X=4x3"), std::string::npos) << bound.out;
}

TEST(CliCommands, RunReadsInputsAndWritesSanitisedOutputs) {
  TempDir dir;
  auto model = add_relu_model().save(dir / "m.onnx");
  std::vector<float> x = {1, 2, 3, -1, 0.5f, -4};
  write_npy((dir / "x.npy").string(), Tensor::from<float>({2, 3}, x));
  Result r = run_grove({"run", model.string(), "--input", "X=" + (dir / "x.npy").string(), "--output",
                        (dir / "results").string(), "--threads", "3"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("out/y: float32 [2, 3]"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("3 threads"), std::string::npos) << r.out;
  Tensor y = read_npy((dir / "results" / "out_y.npy").string());
  ASSERT_EQ(y.shape(), (Shape{2, 3}));
  std::vector<float> want = {1.5f, 1, 3, 0, 0, 0};
  for (size_t i = 0; i < want.size(); ++i) EXPECT_FLOAT_EQ(y.data<float>()[i], want[i]) << i;
}

TEST(CliCommands, RunFeedsAnInitializerThatIsAlsoAnInput) {
  TempDir dir;
  ModelBuilder m;  // y = x + w, w stored as {1, 2, 3} and declared as an input too
  m.input("x", kFloat, {"2", "3"}).input("w", kFloat, {"3"}).output("y", kFloat, {"2", "3"});
  m.initializer("w", {3}, {1, 2, 3}).node("Add", {"x", "w"}, {"y"});
  auto model = m.save(dir / "m.onnx");
  write_npy((dir / "x.npy").string(), Tensor::from<float>({2, 3}, std::vector<float>{0, 0, 0, 1, 1, 1}));
  write_npy((dir / "w.npy").string(), Tensor::from<float>({3}, std::vector<float>{10, 20, 30}));
  for (bool feed : {false, true}) {
    std::vector<std::string> args = {"run", model.string(), "-i", "x=" + (dir / "x.npy").string(), "--output",
                                     (dir / "out").string()};
    if (feed) args.insert(args.end(), {"-i", "w=" + (dir / "w.npy").string()});
    Result r = run_grove(args);
    ASSERT_EQ(r.exit_code, 0) << r.err;
    EXPECT_EQ(r.out.find("overrides the initializer") != std::string::npos, feed) << r.out;
    Tensor y = read_npy((dir / "out" / "y.npy").string());
    std::vector<float> want = feed ? std::vector<float>{10, 20, 30, 11, 21, 31} : std::vector<float>{1, 2, 3, 2, 3, 4};
    for (size_t i = 0; i < want.size(); ++i) EXPECT_FLOAT_EQ(y.data<float>()[i], want[i]) << i;
  }
}

TEST(CliCommands, RunUnnamedInputForSingleInputModel) {
  TempDir dir;
  auto model = add_relu_model().save(dir / "m.onnx");
  write_npy((dir / "x.npy").string(), Tensor::from<float>({2, 3}, std::vector<float>{1, 1, 1, 1, 1, 1}));
  Result r = run_grove({"run", model.string(), "-i", (dir / "x.npy").string()});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("from file"), std::string::npos) << r.out;
}

TEST(CliCommands, RunRandomInputsAreSeededAndClassifierGetsTop5) {
  TempDir dir;
  ModelBuilder m;
  m.input("x", kFloat, {"1", "12"}).output("y", kFloat, {"1", "12"}).node("Relu", {"x"}, {"y"});
  auto model = m.save(dir / "cls.onnx");
  Result a = run_grove({"run", model.string(), "--seed", "7", "-o", (dir / "a").string()});
  Result b = run_grove({"run", model.string(), "--seed", "7", "-o", (dir / "b").string()});
  Result c = run_grove({"run", model.string(), "--seed", "8", "-o", (dir / "c").string()});
  ASSERT_EQ(a.exit_code, 0) << a.err;
  EXPECT_NE(a.out.find("top-5:"), std::string::npos) << a.out;
  EXPECT_NE(a.out.find("random (seed 7)"), std::string::npos) << a.out;
  auto ya = read_npy((dir / "a" / "y.npy").string()).to_f64();
  auto yb = read_npy((dir / "b" / "y.npy").string()).to_f64();
  auto yc = read_npy((dir / "c" / "y.npy").string()).to_f64();
  EXPECT_EQ(ya, yb);
  EXPECT_NE(ya, yc);
  for (double v : ya) EXPECT_TRUE(v >= 0 && v < 1) << v;  // Relu of uniform [-1, 1)
}

TEST(CliCommands, RunRandomInt64InputsAreSmallNonNegative) {
  TempDir dir;
  ModelBuilder m;
  m.input("ids", kInt64, {"2", "50"}).output("twice", kInt64, {"2", "50"}).node("Add", {"ids", "ids"}, {"twice"});
  auto model = m.save(dir / "ids.onnx");
  Result r = run_grove({"run", model.string(), "-o", dir.path().string()});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  Tensor t = read_npy((dir / "twice.npy").string());
  ASSERT_EQ(t.dtype(), DType::i64);
  for (int64_t v : t.span<int64_t>()) EXPECT_TRUE(v >= 0 && v < 200 && v % 2 == 0) << v;
}

TEST(CliCommands, DataDependentShapesRunUnbound) {
  TempDir dir;
  ModelBuilder m;
  m.input("x", kFloat, {"2", "3"}).output("idx", kInt64, {"2", "n"}).node("NonZero", {"x"}, {"idx"}, "nz");
  auto model = m.save(dir / "nz.onnx");
  write_npy((dir / "x.npy").string(), Tensor::from<float>({2, 3}, std::vector<float>{0, 1, 0, 2, 0, 3}));
  Result r = run_grove({"run", model.string(), "-i", (dir / "x.npy").string(), "-o", dir.path().string()});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("graph unbound"), std::string::npos) << r.out;
  Tensor idx = read_npy((dir / "idx.npy").string());
  EXPECT_EQ(idx.shape(), (Shape{2, 3}));
  Result info = run_grove({"info", model.string()});
  ASSERT_EQ(info.exit_code, 0) << info.err;
  EXPECT_NE(info.out.find("depend on input values"), std::string::npos) << info.out;
}

TEST(CliCommands, RunDynamicModelWithShape) {
  TempDir dir;
  auto model = add_relu_model({"batch", "3"}).save(dir / "dyn.onnx");
  Result r = run_grove({"run", model.string(), "--shape", "X=5x3"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("out/y: float32 [5, 3]"), std::string::npos) << r.out;
}

}  // namespace
}  // namespace grove::cli_test
