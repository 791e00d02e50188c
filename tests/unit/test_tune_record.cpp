// Tuning records (tune/record.h, tune/tuned_plan.h): the text round-trips, damage is an Error
// naming the line, a record fits only its own model, machine, thread count and precision, and
// the model key follows structure and shapes but not weight values.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>

#include "kernels/cpu_info.h"
#include "plan_test_util.h"
#include "tune/record.h"
#include "tune/tuned_plan.h"

namespace grove {
namespace {

using namespace grove::test;

tune::TuningRecord sample_record() {
  tune::TuningRecord r;
  r.machine = kernels::machine_key();
  r.model = "0123456789abcdef";
  r.threads = 2;
  r.precision = "fp32";
  r.default_ms = 48.5;
  r.tuned_ms = 46.25;
  r.choices = {{"/layer1/conv 2 (with spaces)", "winograd", {1, 64, 0, 0}}, {"plain", "", {1, 0, 4, 0}}, {"p", "gemm", {}}};
  r.node_us = {1200.5, 300, 10};
  r.rule_us = {1300, 310, 12};
  return r;
}

TEST(TuneRecord, SavedTextReadsBackTheSame) {
  const tune::TuningRecord r = sample_record();
  const tune::TuningRecord back = tune::parse_record(tune::save_record(r), "test");
  EXPECT_EQ(back.machine, r.machine);
  EXPECT_EQ(back.model, r.model);
  EXPECT_EQ(back.threads, 2);
  EXPECT_EQ(back.precision, "fp32");
  EXPECT_DOUBLE_EQ(back.default_ms, 48.5);
  EXPECT_DOUBLE_EQ(back.tuned_ms, 46.25);
  ASSERT_EQ(back.choices.size(), 3u);
  for (size_t i = 0; i < 3; ++i) {
    EXPECT_EQ(back.choices[i].node, r.choices[i].node);
    EXPECT_EQ(back.choices[i].primitive, r.choices[i].primitive);
    EXPECT_EQ(back.choices[i].extent, r.choices[i].extent);
    EXPECT_DOUBLE_EQ(back.node_us[i], r.node_us[i]);
    EXPECT_DOUBLE_EQ(back.rule_us[i], r.rule_us[i]);
  }
}

// A plan trial's verdict (runtime/plan_trial.h) is a record that says so; grove tune's says
// nothing, and reads back without it.
TEST(TuneRecord, APlanTrialsRecordSaysItWasOne) {
  tune::TuningRecord r = sample_record();
  EXPECT_EQ(tune::parse_record(tune::save_record(r), "test").measured_by, "");
  r.measured_by = tune::kMeasuredByTrial;
  const tune::TuningRecord back = tune::parse_record(tune::save_record(r), "test");
  EXPECT_EQ(back.measured_by, tune::kMeasuredByTrial);
  EXPECT_EQ(back.choices.size(), 3u);
  std::string bad = tune::save_record(r);
  bad.replace(bad.find("measured_by"), 11, "measured_at");
  EXPECT_THROW(tune::parse_record(bad, "test"), Error);
}

// A pruning trial's record (runtime/plan_trial.h) says which plan it kept; nothing else may
// stand in that line.
TEST(TuneRecord, APruningTrialsRecordSaysWhichPlanItKept) {
  tune::TuningRecord r = sample_record();
  r.choices.clear();
  r.measured_by = tune::kMeasuredByPruningTrial;
  for (const char* kept : {"winograd", "gemm"}) {
    r.pruned_convs = kept;
    const tune::TuningRecord back = tune::parse_record(tune::save_record(r), "test");
    EXPECT_EQ(back.measured_by, tune::kMeasuredByPruningTrial);
    EXPECT_EQ(back.pruned_convs, kept);
  }
  std::string bad = tune::save_record(r);
  bad.replace(bad.find("pruned_convs gemm"), 17, "pruned_convs rows");
  EXPECT_THROW(tune::parse_record(bad, "test"), Error);
}

TEST(TuneRecord, DamagedTextIsAnErrorNamingTheLine) {
  const std::string good = tune::save_record(sample_record());
  auto refused = [](const std::string& text, const std::string& says) {
    try {
      tune::parse_record(text, "rec");
      ADD_FAILURE() << "read a damaged record: " << says;
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(says), std::string::npos) << e.what();
      EXPECT_EQ(std::string(e.what()).find('\n'), std::string::npos) << e.what();
    }
  };
  refused("", "line 0");
  refused("not a record\n", "first line");
  refused(good.substr(0, good.find("choices ")), "ends before 'choices'");
  refused(good.substr(0, good.find("precision ") + 5), "expected 'precision ...'");
  // The good text with one piece replaced.
  auto with = [&](const std::string& from, const std::string& to) {
    std::string text = good;
    return text.replace(text.find(from), from.size(), to);
  };
  refused(with("choices 3", "choices 9"), "ends before 'choice'");
  refused(with("choices 3", "choices 99999999999999"), "not a count");
  refused(with("default_ms 48.5", "default_ms nan"), "not a number");
  refused(with("precision fp32", "precision int4"), "int4");
  refused(with(" plain\n", "\n"), "line 10");
}

TEST(TuneRecord, FitsOnlyItsOwnModelMachineThreadsAndPrecision) {
  const tune::TuningRecord r = sample_record();
  EXPECT_EQ(tune::record_mismatch(r, r.model, 2, "fp32"), "");
  EXPECT_NE(tune::record_mismatch(r, "fedcba9876543210", 2, "fp32").find("another model"), std::string::npos);
  EXPECT_NE(tune::record_mismatch(r, r.model, 1, "fp32").find("2 threads"), std::string::npos);
  EXPECT_NE(tune::record_mismatch(r, r.model, 2, "bf16").find("fp32"), std::string::npos);
  tune::TuningRecord elsewhere = r;
  elsewhere.machine = "Some Other CPU | avx2";
  EXPECT_NE(tune::record_mismatch(elsewhere, r.model, 2, "fp32").find("another machine"), std::string::npos);
}

TestModel small_conv(uint32_t weight_seed, int64_t channels) {
  OnnxBuilder b(13);
  b.input("x", kF32, {1, 8, 16, 16}).output("y", kF32, {1, channels, 16, 16});
  weight(b, "w", {channels, 8, 3, 3}, weight_seed);
  OnnxBuilder::attr_ints(b.node("Conv", {"x", "w"}, {"y"}, "conv"), "pads", {1, 1, 1, 1});
  return {"small_conv", b.bytes(), {{"x", seeded_tensor({1, 8, 16, 16}, 9)}}};
}

TEST(TuneRecord, ModelKeyFollowsStructureNotWeights) {
  const std::string a = tune::model_key(unfused_graph(small_conv(1, 16)));
  EXPECT_EQ(a.size(), 16u);
  EXPECT_EQ(a, tune::model_key(unfused_graph(small_conv(2, 16))));  // other weights
  EXPECT_NE(a, tune::model_key(unfused_graph(small_conv(1, 24))));  // other shapes
}

TEST(TuneRecord, PlanWithARecordFileAppliesItsChoicesOrSaysWhyNot) {
  const Graph g = unfused_graph(small_conv(1, 16));
  const std::filesystem::path dir = std::filesystem::temp_directory_path() / ("grove_tune_record_" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  tune::TuningRecord r;
  r.machine = kernels::machine_key();
  r.model = tune::model_key(g);
  r.threads = 2;
  r.precision = "fp32";
  r.choices = {{"conv", "gemm", {1, 0, 8, 0}}};
  r.node_us = {1};
  r.rule_us = {2};
  const std::string path = (dir / "r.record").string();
  tune::write_record_file(r, path);
  PlanOptions po;
  po.threads = 2;
  auto plan = tune::plan_with_tuning(g, po, path, {});
  EXPECT_EQ(plan->options.choices.size(), 1u);
  EXPECT_NE(plan->options.choices_source.find("1 choices"), std::string::npos) << plan->options.choices_source;
  EXPECT_EQ(plan->tiles.tile_count[0], 2);
  EXPECT_TRUE(tune::plan_with_tuning(g, po, "off", {})->options.choices.empty());

  po.threads = 1;  // the record is for 2 threads: named explicitly, that is an error
  EXPECT_THROW(tune::plan_with_tuning(g, po, path, {}), Error);
  po.threads = 2;
  r.choices = {{"no_such_node", "gemm", {}}};
  tune::write_record_file(r, path);
  EXPECT_THROW(tune::plan_with_tuning(g, po, path, {}), Error);
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace grove
