// grove bench: the JSON the benchmark suite reads (every timed run, throughput), and the
// co-execution mode (several models: together vs one after the other).
#include <gtest/gtest.h>

#include <chrono>
#include <cstdlib>
#include <fstream>
#include <iterator>
#include <set>

#include "cli_harness.h"
#include "kernels/gemm.h"
#include "kernels/isa.h"

namespace grove::cli_test {
namespace {

const std::string kModel = GROVE_MODELS_DIR "/default.onnx";
const std::string kInput = "image=" GROVE_MODELS_DIR "/default_input.npy";

// The numbers of the JSON array after "key": [ ... ].
std::vector<double> json_array(const std::string& text, const std::string& key) {
  std::vector<double> values;
  size_t at = text.find("\"" + key + "\": [");
  if (at == std::string::npos) return values;
  const char* p = text.c_str() + text.find('[', at) + 1;
  while (*p && *p != ']') {
    char* end = nullptr;
    values.push_back(std::strtod(p, &end));
    p = end;
    while (*p == ',' || *p == ' ') ++p;
  }
  return values;
}

TEST(CliBench, JsonListsEveryTimedRunAndThroughput) {
  Result r = run_grove({"bench", kModel, "--runs", "3", "--warmup", "0", "--threads", "2", "--input", kInput, "--json"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  std::vector<double> ms = json_array(r.out, "ms");
  ASSERT_EQ(ms.size(), 3u) << r.out;
  for (double x : ms) EXPECT_GT(x, 0) << r.out;
  EXPECT_NE(r.out.find("\"throughput_per_s\": "), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("\"mean_ms\": "), std::string::npos) << r.out;
}

// --warmup-seconds keeps warming up past --warmup runs: the process cannot finish sooner, and
// the timed runs are still the ones asked for. A negative duration is refused.
TEST(CliBench, WarmupSecondsWarmsUpForThatLong) {
  const auto start = std::chrono::steady_clock::now();
  Result r = run_grove({"bench", kModel, "--runs", "2", "--warmup", "0", "--warmup-seconds", "0.4", "--input", kInput,
                        "--json"});
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(json_array(r.out, "ms").size(), 2u) << r.out;
  EXPECT_GE(seconds, 0.4);
  Result bad = run_grove({"bench", kModel, "--warmup-seconds", "-1"});
  EXPECT_NE(bad.exit_code, 0);
  EXPECT_NE(bad.err.find("--warmup-seconds"), std::string::npos) << bad.err;
}

TEST(CliBench, SeveralModelsCoExecuteAgainstOneAfterTheOther) {
  Result r = run_grove({"bench", kModel, kModel, "--runs", "2", "--warmup", "0", "--threads", "2", "--input", kInput,
                        "--json"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  for (const char* key : {"\"rounds\": 2", "\"together_p50_ms\": ", "\"in_turn_p50_ms\": ", "\"together_per_s\": ",
                          "\"speedup\": "})
    EXPECT_NE(r.out.find(key), std::string::npos) << key << "\n" << r.out;
  Result table = run_grove({"bench", kModel, kModel, "--runs", "1", "--warmup", "0"});
  ASSERT_EQ(table.exit_code, 0) << table.err;
  EXPECT_NE(table.out.find("co-execution speedup:"), std::string::npos) << table.out;
}

TEST(CliBench, CoExecutionRejectsBothSchedulesAndUnnamedInputs) {
  Result both = run_grove({"bench", kModel, kModel, "--schedule", "both"});
  EXPECT_EQ(both.exit_code, 1);
  EXPECT_NE(both.err.find("--schedule both"), std::string::npos) << both.err;
  Result unnamed = run_grove({"bench", kModel, kModel, "--input", GROVE_MODELS_DIR "/default_input.npy"});
  EXPECT_EQ(unnamed.exit_code, 1);
  EXPECT_NE(unnamed.err.find("name it as NAME=FILE.npy"), std::string::npos) << unnamed.err;
  // --trace traces one model timed alone: with several models it is an error, not ignored.
  Result traced = run_grove({"bench", kModel, kModel, "--trace", "/tmp/grove_unused_trace.json"});
  EXPECT_EQ(traced.exit_code, 1);
  EXPECT_NE(traced.err.find("--trace"), std::string::npos) << traced.err;
}

// --pieces both times tiles whole and in pieces side by side (one schedule and precision).
TEST(CliBench, PiecesBothTimesWholeAndPiecesSideBySide) {
  Result r = run_grove({"bench", kModel, "--runs", "2", "--warmup", "0", "--threads", "2", "--input", kInput,
                        "--pieces", "both"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("aspen/whole"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("aspen/pieces"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("pieces speedup"), std::string::npos) << r.out;
  Result both = run_grove({"bench", kModel, "--runs", "1", "--pieces", "both", "--schedule", "both"});
  EXPECT_EQ(both.exit_code, 1);
  EXPECT_NE(both.err.find("--pieces both compares one schedule"), std::string::npos) << both.err;
}

// --trace-runs traces that many warm runs, each tile tagged with its run's job id, so a short
// model's trace is more than a sample of one; without --trace it is an error, not ignored.
TEST(CliBench, TraceRunsTracesThatManyRunsEachWithItsJob) {
  const std::string path = ::testing::TempDir() + "grove_trace_runs.json";
  Result r = run_grove({"bench", kModel, "--runs", "2", "--warmup", "0", "--threads", "2", "--input", kInput,
                        "--trace", path, "--trace-runs", "4"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  std::ifstream f(path);
  const std::string trace((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  std::set<long> jobs;
  for (size_t at = trace.find("\"job\":"); at != std::string::npos; at = trace.find("\"job\":", at + 1))
    jobs.insert(std::strtol(trace.c_str() + at + 6, nullptr, 10));
  EXPECT_EQ(jobs.size(), 4u) << trace.substr(0, 400);
  Result alone = run_grove({"bench", kModel, "--runs", "1", "--trace-runs", "3"});
  EXPECT_EQ(alone.exit_code, 2);  // a usage error
  EXPECT_NE(alone.err.find("--trace-runs requires --trace"), std::string::npos) << alone.err;
}

}  // namespace
}  // namespace grove::cli_test

namespace grove::cli_test {
namespace {

// --precision: bf16 and fp32 series side by side, the plan's note, and --check's agreement.
// On a CPU without AVX512-BF16 the bf16 series is fp32 and the note says so.
TEST(CliBench, PrecisionBothTimesBf16NextToFp32AndChecksAgreement) {
  // Random inputs (no --input): --check draws three sets.
  Result r = run_grove({"bench", kModel, "--runs", "2", "--warmup", "0", "--precision", "both", "--check", "3", "--json"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("\"precision\": \"fp32\""), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("\"precision\": \"bf16\""), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("\"check\": {\"inputs\": 3"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("\"top1_agreement\": "), std::string::npos) << r.out;
  const bool bf16_here = r.out.find("bf16 products") != std::string::npos;  // "... on AMX tiles" with AMX
  EXPECT_TRUE(bf16_here || r.out.find("no AVX512-BF16") != std::string::npos) << r.out;
  Result table = run_grove({"bench", kModel, "--runs", "1", "--warmup", "0", "--precision", "both"});
  ASSERT_EQ(table.exit_code, 0) << table.err;
  EXPECT_NE(table.out.find("bf16 speedup (p50 fp32 / p50 bf16):"), std::string::npos) << table.out;
  EXPECT_NE(table.out.find("aspen/bf16"), std::string::npos) << table.out;
}

// --precision fp32,int8: the float model quantized in memory (calibrated on the bench inputs,
// or on --calibrate's samples), timed next to fp32, and --check compares the two.
TEST(CliBench, Int8QuantizesInMemoryAndChecksAgainstFp32) {
  Result r = run_grove({"bench", kModel, "--runs", "2", "--warmup", "0", "--precision", "fp32,int8", "--check", "3", "--json"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("\"precision\": \"fp32\""), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("\"precision\": \"int8\""), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("\"checks\": [{\"inputs\": 3"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find(", \"precision\": \"int8\"}]"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("\"int8_note\": \"21 nodes quantized (20 Conv"), std::string::npos) << r.out;
  Result table = run_grove({"bench", kModel, "--runs", "1", "--warmup", "0", "--precision", "fp32,int8", "--input", kInput});
  ASSERT_EQ(table.exit_code, 0) << table.err;
  EXPECT_NE(table.out.find("int8: 21 nodes quantized"), std::string::npos) << table.out;
  EXPECT_NE(table.out.find("calibrated on the benchmark's input set only"), std::string::npos) << table.out;
  EXPECT_NE(table.out.find("aspen/int8"), std::string::npos) << table.out;
  EXPECT_NE(table.out.find("int8 speedup (p50 fp32 / p50 int8):"), std::string::npos) << table.out;

  TempDir dir;
  std::filesystem::create_directory(dir / "samples");
  std::filesystem::copy_file(GROVE_MODELS_DIR "/default_input.npy", dir / "samples" / "a.npy");
  Result calibrated = run_grove({"bench", kModel, "--runs", "1", "--warmup", "0", "--precision", "int8", "--calibrate",
                                 (dir / "samples").string(), "--check", "2"});
  ASSERT_EQ(calibrated.exit_code, 0) << calibrated.err;
  EXPECT_NE(calibrated.out.find("calibrated on 1 samples from"), std::string::npos) << calibrated.out;
  EXPECT_NE(calibrated.out.find("check int8 vs fp32 over 2 input sets"), std::string::npos) << calibrated.out;
}

// What --precision int8 refuses, each a one-line error: a model already quantized, --calibrate
// without int8 or on a missing directory, an unknown precision in a list, and run/plan (which
// take QDQ models from grove quantize instead).
TEST(CliBench, Int8RefusalsAreCleanErrors) {
  TempDir dir;
  std::filesystem::create_directory(dir / "samples");
  std::filesystem::copy_file(GROVE_MODELS_DIR "/default_input.npy", dir / "samples" / "a.npy");
  const std::string qdq = (dir / "q.onnx").string();
  ASSERT_EQ(run_grove({"quantize", kModel, "--calibrate", (dir / "samples").string(), "-o", qdq}).exit_code, 0);
  Result twice = run_grove({"bench", qdq, "--runs", "1", "--precision", "int8"});
  expect_clean_error(twice);
  EXPECT_NE(twice.err.find("already quantized"), std::string::npos) << twice.err;
  Result lone = run_grove({"bench", kModel, "--runs", "1", "--calibrate", (dir / "samples").string()});
  expect_clean_error(lone);
  EXPECT_NE(lone.err.find("add int8 to --precision"), std::string::npos) << lone.err;
  Result missing = run_grove({"bench", kModel, "--runs", "1", "--precision", "int8", "--calibrate", (dir / "nope").string()});
  expect_clean_error(missing);
  EXPECT_NE(missing.err.find("not a directory"), std::string::npos) << missing.err;
  Result unknown = run_grove({"bench", kModel, "--runs", "1", "--precision", "fp32,fp16"});
  expect_clean_error(unknown);
  EXPECT_NE(unknown.err.find("--precision fp32,fp16: expected fp32, bf16, int8"), std::string::npos) << unknown.err;
  Result run = run_grove({"run", kModel, "--precision", "int8"});
  EXPECT_NE(run.exit_code, 0);
  EXPECT_NE(run.err.find("grove quantize"), std::string::npos) << run.err;
}

// GROVE_ISA=avx2 hides AVX512-BF16: bf16 runs fp32 and says so once, never an illegal instruction.
TEST(CliBench, Bf16WithoutTheIsaRunsFp32WithANote) {
  setenv("GROVE_ISA", "avx2", 1);
  Result r = run_grove({"run", kModel, "--input", kInput, "--precision", "bf16"});
  unsetenv("GROVE_ISA");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("no AVX512-BF16: running fp32"), std::string::npos) << r.out;
  Result bad = run_grove({"run", kModel, "--precision", "fp16"});
  EXPECT_EQ(bad.exit_code, 2) << bad.out;  // a usage error
  EXPECT_NE(bad.err.find("--precision"), std::string::npos) << bad.err;
  Result coexec = run_grove({"bench", kModel, kModel, "--precision", "both"});
  EXPECT_EQ(coexec.exit_code, 1);
  EXPECT_NE(coexec.err.find("--precision both"), std::string::npos) << coexec.err;
}

// bf16 runs on AMX tiles where the CPU has them, and GROVE_ISA=avx512 turns AMX off: the same
// model then runs on AVX512-BF16 dot products, or in fp32 where they measured too slow (the
// plan says which), and both runs succeed.
TEST(CliBench, Bf16UsesAmxWhereThereIsOneAndGroveIsaTurnsItOff) {
  Result plan = run_grove({"plan", kModel, "--totals", "--precision", "bf16"});
  ASSERT_EQ(plan.exit_code, 0) << plan.err;
  const bool amx = kernels::precision_supported(kernels::Precision::bf16_amx, kernels::active_isa());
  const bool bf16 = kernels::precision_supported(kernels::Precision::bf16, kernels::active_isa());
  EXPECT_EQ(plan.out.find("bf16 products on AMX tiles") != std::string::npos, amx) << plan.out;
  setenv("GROVE_ISA", "avx512", 1);
  Result dot = run_grove({"run", kModel, "--input", kInput, "--precision", "bf16"});
  Result dot_plan = run_grove({"plan", kModel, "--totals", "--precision", "bf16"});
  unsetenv("GROVE_ISA");
  ASSERT_EQ(dot.exit_code, 0) << dot.err;
  EXPECT_EQ(dot_plan.out.find("AMX"), std::string::npos) << dot_plan.out;
  const bool dot_products = dot_plan.out.find("bf16 products in") != std::string::npos;
  const bool too_slow = dot_plan.out.find("as fast as fp32 (measured): running fp32") != std::string::npos;
  EXPECT_EQ(dot_products || too_slow, bf16) << dot_plan.out;
  EXPECT_FALSE(dot_products && too_slow) << dot_plan.out;
  Result tiles = run_grove({"run", kModel, "--input", kInput, "--precision", "bf16"});
  ASSERT_EQ(tiles.exit_code, 0) << tiles.err;
}

// --layout: plan says what went channels-last; bench times both layouts side by side; run
// gives the same outputs either way; a misspelt layout is a usage error.
TEST(CliBench, LayoutBothTimesNchwNextToChannelsLast) {
  Result plan = run_grove({"plan", kModel, "--totals"});
  ASSERT_EQ(plan.exit_code, 0) << plan.err;
  EXPECT_NE(plan.out.find("Convs channels-last (ConvNhwc, DepthwiseConvNhwc)"), std::string::npos) << plan.out;
  Result nchw = run_grove({"plan", kModel, "--totals", "--layout", "nchw"});
  ASSERT_EQ(nchw.exit_code, 0) << nchw.err;
  EXPECT_NE(nchw.out.find("layout: NCHW"), std::string::npos) << nchw.out;
  Result both = run_grove({"bench", kModel, "--runs", "1", "--warmup", "0", "--layout", "both"});
  ASSERT_EQ(both.exit_code, 0) << both.err;
  EXPECT_NE(both.out.find("aspen/nchw"), std::string::npos) << both.out;
  EXPECT_NE(both.out.find("aspen/nhwc"), std::string::npos) << both.out;
  EXPECT_NE(both.out.find("channels-last speedup (p50 nchw / p50 nhwc):"), std::string::npos) << both.out;
  Result bad = run_grove({"run", kModel, "--layout", "nchwc"});
  EXPECT_EQ(bad.exit_code, 2) << bad.out;
  EXPECT_NE(bad.err.find("--layout"), std::string::npos) << bad.err;
  Result mixed = run_grove({"bench", kModel, "--layout", "both", "--precision", "both"});
  EXPECT_EQ(mixed.exit_code, 1);
  EXPECT_NE(mixed.err.find("--layout both"), std::string::npos) << mixed.err;
}

TEST(CliBench, SimulatePredictsEachCoreCountAndValidates) {
  Result r = run_grove({"simulate", kModel, "--cores", "1,4", "--runs", "1", "--validate", "2", "--input", kInput, "--json"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  // aspen and barrier at 1 (also measured: a count this machine has) and 4 cores.
  EXPECT_NE(r.out.find("\"schedule\": \"barrier\", \"cores\": 4"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("\"measured_ms\": "), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("\"bandwidth_all_gbs\": "), std::string::npos) << r.out;
  Result bad = run_grove({"simulate", kModel, "--cores", "0"});
  EXPECT_EQ(bad.exit_code, 2) << bad.err;
}

TEST(CliBench, TailTimesEachLayerOverItsWidths) {
  // The embedded CNN's convs, each at widths 2 below to 2 above its own: five points a layer,
  // the layer's own width among them, every time positive.
  Result r = run_grove({"tail", kModel, "--span", "2", "--step", "1", "--runs", "1", "--threads", "1", "--json"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("\"op\": \"Conv\""), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("\"points\": [["), std::string::npos) << r.out;
  EXPECT_EQ(r.out.find("\"ms\": 0.0000"), std::string::npos) << r.out;
  Result table = run_grove({"tail", kModel, "--span", "1", "--runs", "1", "--threads", "1"});
  ASSERT_EQ(table.exit_code, 0) << table.err;
  EXPECT_NE(table.out.find("prune to"), std::string::npos) << table.out;
  Result none = run_grove({"tail", kModel, "--only", "no-such-layer"});
  EXPECT_EQ(none.exit_code, 1);
  EXPECT_NE(none.err.find("no-such-layer"), std::string::npos) << none.err;
}

// A MatMul one output column past a whole panel of the GEMM's register tile (32 columns with
// AVX-512, 16 with AVX2): the 33rd column costs a panel of its own, far more than its share of
// the channels, so grove tail suggests pruning to 32; at 32 it suggests nothing to prune.
TEST(CliBench, TailSuggestsPruningALayerOneColumnPastAStep) {
  TempDir d;
  for (int width : {33, 32}) {
    ModelBuilder m;
    m.input("x", onnx::TensorProto::FLOAT, {"1024", "512"}).output("y", onnx::TensorProto::FLOAT, {"1024", std::to_string(width)});
    m.initializer("w", {512, width}, std::vector<float>(static_cast<size_t>(512 * width), 0.01f));
    m.node("MatMul", {"x", "w"}, {"y"}, "past_a_step");
    const auto model = m.save(d / ("w" + std::to_string(width) + ".onnx"));
    Result r = run_grove({"tail", model.string(), "--span", "1", "--step", "1", "--runs", "3", "--threads", "1", "--json"});
    ASSERT_EQ(r.exit_code, 0) << r.err;
    const std::string want = width == 33 ? "\"prune_to\": 32," : "\"prune_to\": 0,";
    EXPECT_NE(r.out.find(want), std::string::npos) << "width " << width << ": " << r.out;
  }
}

TEST(CliBench, WorkersScheduleReportsEachPhaseAndRejectsBadPhases) {
  Result r = run_grove({"bench", kModel, "--input", kInput, "--workers-schedule", "1:0.2s,2:0.2s", "--warmup", "0", "--json"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("\"workers\": 1"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("\"workers\": 2"), std::string::npos) << r.out;
  for (const char* bad : {"2", "x:1s", "1:0s", "1:2q"}) {
    Result e = run_grove({"bench", kModel, "--workers-schedule", bad});
    EXPECT_EQ(e.exit_code, 1) << bad;
    EXPECT_NE(e.err.find("--workers-schedule"), std::string::npos) << e.err;
  }
}

}  // namespace
}  // namespace grove::cli_test
