// grove tune: it writes a record into the per-machine cache that grove plan, run and bench then
// use for the same model and thread count only; a damaged record found there is skipped with
// a note, and one named with --tuning is an error.
#include <gtest/gtest.h>

#include <cstdlib>
#include <fstream>
#include <sstream>

#include "cli_harness.h"

namespace grove::cli_test {
namespace {

const std::string kModel = GROVE_MODELS_DIR "/default.onnx";
const std::string kInput = "image=" GROVE_MODELS_DIR "/default_input.npy";

// GROVE_TUNE_DIR for the grove processes this test starts (they inherit the environment).
struct TuneDir {
  explicit TuneDir(const std::filesystem::path& p) { setenv("GROVE_TUNE_DIR", p.c_str(), 1); }
  ~TuneDir() { unsetenv("GROVE_TUNE_DIR"); }
};

std::string record_path(const std::string& out) {
  const size_t at = out.find("record: ");
  if (at == std::string::npos) return "";
  return out.substr(at + 8, out.find(" (", at) - at - 8);
}

TEST(CliTune, WritesARecordThatOnlyItsOwnPlansUse) {
  TempDir d;
  TuneDir env(d / "cache");
  Result r = run_grove({"tune", kModel, "--input", kInput, "--threads", "2", "--runs", "2", "--passes", "1",
                        "--verify-runs", "3", "-q", "--dataset", (d / "profile.csv").string()});
  ASSERT_EQ(r.exit_code, 0) << r.err << r.out;
  const std::string path = record_path(r.out);
  ASSERT_FALSE(path.empty()) << r.out;
  EXPECT_EQ(path.rfind((d / "cache").string(), 0), 0u) << path;
  EXPECT_TRUE(std::filesystem::exists(path)) << path;
  EXPECT_NE(r.out.find("whole model"), std::string::npos) << r.out;
  const std::string csv = read_bytes(d / "profile.csv");
  EXPECT_EQ(csv.rfind("machine,threads,node,", 0), 0u) << csv;
  EXPECT_GT(std::count(csv.begin(), csv.end(), '\n'), 1) << "no measured candidate in the dataset";

  Result two = run_grove({"plan", kModel, "--threads", "2", "--tile-counts", "fixed"});
  ASSERT_EQ(two.exit_code, 0) << two.err;
  EXPECT_NE(two.out.find("tuning: tuning record " + path), std::string::npos) << two.out;
  Result one = run_grove({"plan", kModel, "--threads", "1"});  // measured at 2 threads: not this plan's
  ASSERT_EQ(one.exit_code, 0) << one.err;
  EXPECT_EQ(one.out.find("tuning: tuning record"), std::string::npos) << one.out;
  Result off = run_grove({"run", kModel, "--input", kInput, "--threads", "2", "--tuning", "off"});
  ASSERT_EQ(off.exit_code, 0) << off.err;
  EXPECT_EQ(off.out.find("tuning:"), std::string::npos) << off.out;
  Result on = run_grove({"run", kModel, "--input", kInput, "--threads", "2"});
  ASSERT_EQ(on.exit_code, 0) << on.err;
  EXPECT_NE(on.out.find("tuning: tuning record"), std::string::npos) << on.out;

  // Damaged in the cache: the plan goes by the rules and says why; named on the command line: an error.
  write_bytes(path, "grove-tune-record 1\nmachine x\n");
  Result skipped = run_grove({"plan", kModel, "--threads", "2"});
  ASSERT_EQ(skipped.exit_code, 0) << skipped.err;
  EXPECT_NE(skipped.out.find("ignored"), std::string::npos) << skipped.out;
  expect_clean_error(run_grove({"plan", kModel, "--threads", "2", "--tuning", path}));
  expect_clean_error(run_grove({"run", kModel, "--input", kInput, "--tuning", (d / "missing.record").string()}));
}

TEST(CliTune, ARecordForOtherThreadsIsRefusedWhenNamed) {
  TempDir d;
  const std::string path = (d / "t1.record").string();
  Result r = run_grove({"tune", kModel, "--input", kInput, "--threads", "1", "--runs", "1", "--passes", "1",
                        "--verify-runs", "2", "-q", "-o", path});
  ASSERT_EQ(r.exit_code, 0) << r.err << r.out;
  Result wrong = run_grove({"run", kModel, "--input", kInput, "--threads", "2", "--tuning", path});
  expect_clean_error(wrong);
  EXPECT_NE(wrong.err.find("does not fit"), std::string::npos) << wrong.err;
  Result right = run_grove({"run", kModel, "--input", kInput, "--threads", "1", "--tuning", path});
  EXPECT_EQ(right.exit_code, 0) << right.err;
}

// --fit trains this CPU's model on the dataset grove tune wrote; plans without a record then ask
// it in place of the model shipped for the ISA.
TEST(CliTune, FitTrainsAModelThatPlansWithoutARecordUse) {
  TempDir d;
  TuneDir env(d / "cache");
  Result shipped = run_grove({"plan", kModel, "--threads", "2", "--tuning", "model"});
  ASSERT_EQ(shipped.exit_code, 0) << shipped.err;
  EXPECT_NE(shipped.out.find("tuning: performance model shipped for"), std::string::npos) << shipped.out;
  const std::string csv = (d / "profile.csv").string();
  for (const char* threads : {"1", "2"}) {
    Result r = run_grove({"tune", kModel, "--input", kInput, "--threads", threads, "--runs", "2", "--passes", "1",
                          "--verify-runs", "2", "-q", "--dataset", csv, "-o", (d / "unused.record").string()});
    ASSERT_EQ(r.exit_code, 0) << r.err << r.out;
  }
  Result fit = run_grove({"tune", "--fit", csv, "--fit-report", (d / "report.csv").string()});
  ASSERT_EQ(fit.exit_code, 0) << fit.err << fit.out;
  EXPECT_NE(fit.out.find("NN2"), std::string::npos) << fit.out;
  EXPECT_NE(fit.out.find("linear regression"), std::string::npos) << fit.out;
  EXPECT_EQ(read_bytes(d / "report.csv").rfind("primitive,measured_us,nn2_us,linear_us\n", 0), 0u);
  Result plan = run_grove({"plan", kModel, "--threads", "2", "--tuning", "model"});
  ASSERT_EQ(plan.exit_code, 0) << plan.err;
  EXPECT_NE(plan.out.find("tuning: performance model " + (d / "cache").string()), std::string::npos) << plan.out;
  Result run = run_grove({"run", kModel, "--input", kInput, "--threads", "2"});  // auto: no record, so the model
  ASSERT_EQ(run.exit_code, 0) << run.err;
  EXPECT_NE(run.out.find("tuning: performance model " + (d / "cache").string()), std::string::npos) << run.out;

  // Another CPU's rows: fitted only where --fit-machine names them, and only into --model-out.
  std::istringstream rows(read_bytes(csv));
  std::string line, other;
  std::getline(rows, line);
  other = line + "\n";
  while (std::getline(rows, line)) other += "\"another cpu\"" + line.substr(line.find('"', 1) + 1) + "\n";
  write_bytes(d / "another.csv", other);
  expect_clean_error(run_grove({"tune", "--fit", (d / "another.csv").string()}));
  expect_clean_error(run_grove({"tune", "--fit", (d / "another.csv").string(), "--fit-machine", "another cpu"}));
  Result study = run_grove({"tune", "--fit", (d / "another.csv").string(), "--fit-machine", "another cpu", "--model-out",
                            (d / "another.perfmodel").string()});
  ASSERT_EQ(study.exit_code, 0) << study.err << study.out;
  EXPECT_NE(study.out.find("machine: another cpu"), std::string::npos) << study.out;
  EXPECT_EQ(read_bytes(d / "another.perfmodel").rfind("grove-perf-model 2\n", 0), 0u);

  Result transfer = run_grove({"tune", "--fit", csv, "--transfer-from", (d / "missing.perfmodel").string()});
  expect_clean_error(transfer);
  write_bytes(d / "other.csv", "machine,threads\n");
  expect_clean_error(run_grove({"tune", "--fit", (d / "other.csv").string()}));
  expect_clean_error(run_grove({"tune", kModel, "--fit", csv}));
}

// Rows of a made-up CPU for 40 convs, times from their FLOPs and a per-primitive speed,
// measuring every primitive the shipped models price except `left_out`.
std::string synthetic_dataset(const std::string& left_out) {
  std::string csv = "machine,threads,node,batch,cin,cout,in_h,in_w,out_h,out_w,kernel_h,kernel_w,stride_h,stride_w,"
                    "group,primitive,extent,tiles,us\n";
  const std::pair<const char*, double> speeds[] = {{"gemm", 1.0},   {"winograd", 0.6},      {"nhwc", 0.9},
                                                   {"winograd_nhwc", 0.55}, {"direct", 1.4}, {"winograd_f2x3_nhwc", 0.7},
                                                   {"nchwc", 0.8}};
  for (int i = 0; i < 40; ++i) {
    const int cin = 16 << (i % 4), cout = 16 << ((i / 4) % 3), side = 7 * (1 + i % 5);
    const double mflop = 2.0 * cin * cout * 9 * side * side / 1e6;
    for (const auto& [primitive, speed] : speeds) {
      if (primitive == left_out) continue;
      csv += "\"test cpu\",1,\"conv" + std::to_string(i) + "\",1," + std::to_string(cin) + "," + std::to_string(cout) + "," +
             std::to_string(side) + "," + std::to_string(side) + "," + std::to_string(side) + "," + std::to_string(side) +
             ",3,3,1,1,1," + primitive + ",1x" + std::to_string(cout) + "x" + std::to_string(side) + "x" +
             std::to_string(side) + ",1," + std::to_string(10 + mflop * speed) + "\n";
    }
  }
  return csv;
}

// Fine-tuning a shipped model on rows that never measure one of its primitives keeps that
// output from the shipped model (it once stopped: "output 4 has no measured time in any
// sample"), for each shipped model and each primitive left out.
TEST(CliTune, TransferFromEachShippedModelWorksOnRowsLackingAPrimitive) {
  TempDir d;
  for (const char* shipped : {"avx512", "avx2"})
    for (const char* left_out : {"direct", "winograd_nhwc"}) {
      SCOPED_TRACE(std::string(shipped) + " without " + left_out);
      write_bytes(d / "rows.csv", synthetic_dataset(left_out));
      const std::string out = (d / "moved.perfmodel").string();
      Result r = run_grove({"tune", "--fit", (d / "rows.csv").string(), "--fit-machine", "test cpu", "--model-out", out,
                            "--transfer-from", GROVE_MODELS_DIR "/perf/" + std::string(shipped) + ".perfmodel",
                            "--fit-report", (d / "report.csv").string()});
      ASSERT_EQ(r.exit_code, 0) << r.err << r.out;
      EXPECT_NE(r.err.find(std::string("measures '") + left_out + "'"), std::string::npos) << r.err;
      EXPECT_NE(r.out.find("not trained (no row measures '" + std::string(left_out) + "')"), std::string::npos) << r.out;
      EXPECT_NE(r.out.find("transferred (fine-tuned)"), std::string::npos) << r.out;
      EXPECT_EQ(read_bytes(out).rfind("grove-perf-model 2\n", 0), 0u);
      // Every measured primitive is in the report, with no baseline prediction beside it.
      const std::string report = read_bytes(d / "report.csv");
      EXPECT_NE(report.find("\ngemm,"), std::string::npos) << report.substr(0, 300);
      EXPECT_EQ(report.find("\n" + std::string(left_out) + ","), std::string::npos);
    }
}

// --sample profiles sampled conv layers, each a one-conv model, into the dataset: one row per
// measured candidate, every sample's configuration a conv of the sampled sizes. Without
// --dataset, or with a model, it is an error.
TEST(CliTune, SampleAppendsSampledConvLayersToTheDataset) {
  TempDir d;
  const std::string csv = (d / "samples.csv").string();
  Result r = run_grove({"tune", "--sample", "3", "--threads", "1", "--runs", "2", "--passes", "1", "--dataset", csv});
  ASSERT_EQ(r.exit_code, 0) << r.err << r.out;
  EXPECT_NE(r.err.find("sample 3/3"), std::string::npos) << r.err;
  std::ifstream f(csv);
  std::string line;
  ASSERT_TRUE(std::getline(f, line));
  EXPECT_EQ(line.rfind("machine,threads,node,batch,cin,cout,", 0), 0u) << line;
  int rows = 0;
  while (std::getline(f, line)) {
    ++rows;
    EXPECT_NE(line.find(",\"conv\",1,"), std::string::npos) << line;  // node conv, batch 1
  }
  EXPECT_GE(rows, 3) << "a GEMM candidate for each sampled layer at least";
  // Stems: few input channels, where the direct kernel is measured too.
  const std::string stems = (d / "stems.csv").string();
  Result s = run_grove({"tune", "--sample", "2", "--sample-stems", "--threads", "1", "--runs", "2", "--passes", "1",
                        "--dataset", stems});
  ASSERT_EQ(s.exit_code, 0) << s.err << s.out;
  const std::string stem_rows = read_bytes(stems);
  EXPECT_NE(stem_rows.find(",direct,"), std::string::npos) << stem_rows;
  std::istringstream lines(stem_rows);
  std::getline(lines, line);
  while (std::getline(lines, line)) {
    const size_t cin_at = line.find(",\"conv\",1,") + 10;
    EXPECT_LE(std::stoll(line.substr(cin_at)), 4) << line;
  }
  expect_clean_error(run_grove({"tune", "--sample-stems", "--dataset", stems}));
  expect_clean_error(run_grove({"tune", "--sample", "2"}));
  expect_clean_error(run_grove({"tune", kModel, "--sample", "2", "--dataset", csv}));
}

// On a machine with no tuning of its own (an empty cache), plans take the choices of the model
// shipped for the ISA where it predicts its plan saves enough (the default model at one
// thread: about a fifth of its convs' time), each such node's decisions naming the model;
// --tuning off keeps the rules everywhere.
TEST(CliTune, AFreshMachinePlansWithTheShippedModelWhereItPredictsAGain) {
  TempDir d;
  TuneDir env(d / "cache");
  Result fresh = run_grove({"plan", kModel, "--threads", "1", "--json"});
  ASSERT_EQ(fresh.exit_code, 0) << fresh.err;
  if (fresh.out.find("\"tuning\": \"performance model shipped for") == std::string::npos)
    GTEST_SKIP() << "no performance model ships for this ISA";
  EXPECT_NE(fresh.out.find(" choices, predicted to save "), std::string::npos) << fresh.out;
  EXPECT_NE(fresh.out.find("\"primitive_source\": \"model\""), std::string::npos) << fresh.out;
  Result off = run_grove({"plan", kModel, "--threads", "1", "--json", "--tuning", "off"});
  ASSERT_EQ(off.exit_code, 0) << off.err;
  EXPECT_EQ(off.out.find("\"primitive_source\": \"model\""), std::string::npos) << off.out;
  EXPECT_NE(off.out.find("\"tuning\": \"\""), std::string::npos) << off.out;
}

// --sample-layouts times every layout change of sampled values into a CSV; --fit-layouts trains
// the layout model on it, reports it against the per-element price and installs it, and plans
// then name it beside the performance model. Without --dataset, or with a model, an error.
TEST(CliTune, LayoutChangesAreSampledAndTheLayoutModelFittedAndUsed) {
  TempDir d;
  TuneDir env(d / "cache");
  const std::string csv = (d / "layouts.csv").string();
  Result r = run_grove({"tune", "--sample-layouts", "8", "--threads", "2", "--runs", "2", "--passes", "1", "--dataset", csv});
  ASSERT_EQ(r.exit_code, 0) << r.err << r.out;
  EXPECT_NE(r.err.find("value 8/8 at 2 threads"), std::string::npos) << r.err;
  const std::string rows = read_bytes(csv);
  EXPECT_EQ(rows.rfind("machine,threads,change,batch,c,h,w,us\n", 0), 0u) << rows.substr(0, 200);
  for (const char* change : {"nchw_to_nhwc", "nhwc_to_nchw", "nchw_to_blocked", "blocked_to_nchw", "nhwc_to_blocked", "blocked_to_nhwc"})
    EXPECT_NE(rows.find(std::string(",") + change + ",1,"), std::string::npos) << change;
  Result fit = run_grove({"tune", "--fit-layouts", csv});
  ASSERT_EQ(fit.exit_code, 0) << fit.err << fit.out;
  EXPECT_NE(fit.out.find("one price per element"), std::string::npos) << fit.out;
  EXPECT_NE(fit.out.find("model: " + (d / "cache").string()), std::string::npos) << fit.out;
  Result plan = run_grove({"plan", kModel, "--threads", "2", "--tuning", "model"});
  ASSERT_EQ(plan.exit_code, 0) << plan.err;
  EXPECT_NE(plan.out.find(" and layout model " + (d / "cache").string()), std::string::npos) << plan.out;
  expect_clean_error(run_grove({"tune", "--sample-layouts", "2"}));
  expect_clean_error(run_grove({"tune", kModel, "--sample-layouts", "2", "--dataset", csv}));
  write_bytes(d / "few.csv", "machine,threads,change,batch,c,h,w,us\n");
  expect_clean_error(run_grove({"tune", "--fit-layouts", (d / "few.csv").string()}));
}

// --calibrate samples conv layers here, fine-tunes the model shipped for this ISA on them and
// installs it as this machine's model, which plans then use. With a model, it is an error.
TEST(CliTune, CalibrateFineTunesTheShippedModelAndInstallsIt) {
  TempDir d;
  TuneDir env(d / "cache");
  Result r = run_grove({"tune", "--calibrate", "--sample", "5", "--threads", "2", "--runs", "2", "--passes", "1"});
  ASSERT_EQ(r.exit_code, 0) << r.err << r.out;
  EXPECT_NE(r.err.find("calibrating the "), std::string::npos) << r.err;
  EXPECT_NE(r.out.find("transferred (fine-tuned)"), std::string::npos) << r.out;
  int installed = 0;
  for (const auto& e : std::filesystem::recursive_directory_iterator(d / "cache"))
    if (e.path().filename() == "conv.perfmodel") {
      ++installed;
      std::ifstream f(e.path());
      std::string line;
      std::getline(f, line);
      EXPECT_EQ(line, "grove-perf-model 2");
    }
  EXPECT_EQ(installed, 1);
  Result plan = run_grove({"plan", kModel, "--threads", "2", "--tuning", "model"});
  ASSERT_EQ(plan.exit_code, 0) << plan.err;
  EXPECT_NE(plan.out.find("tuning: performance model " + (d / "cache").string()), std::string::npos) << plan.out;
  expect_clean_error(run_grove({"tune", kModel, "--calibrate"}));
}

}  // namespace
}  // namespace grove::cli_test
