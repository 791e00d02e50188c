// Two plans on trial before a session's first run of a shape (runtime/plan_trial.h): the two
// take turns, the first runs of each are untimed, the first plan is kept unless its median is
// more than the terms allow over the second's; a Session settles a performance model's plan
// against the rules', and pruned Winograd convs whose cores share an image against the pruned
// GEMM, and keeps each verdict as the machine's record, which later sessions plan by.
#include <gtest/gtest.h>

#include <atomic>
#include <cstring>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <thread>

#include "onnx/import.h"
#include "pruned_winograd_model.h"
#include "runtime/plan_trial.h"
#include "runtime/session.h"
#include "tune/record.h"
#include "tune/tuned_plan.h"
#include "taught_perf_model.h"

namespace grove {
namespace {

TEST(PlanTrial, TurnsAlternateFromTheModelsPlan) {
  std::vector<int> order;
  run_plan_trial(
      [&](int plan) {
        order.push_back(plan);
        return 1.0;
      },
      1, 2);
  EXPECT_EQ(order, (std::vector<int>{kTrialFirst, kTrialSecond, kTrialFirst, kTrialSecond, kTrialFirst, kTrialSecond}));
}

TEST(PlanTrial, TheFasterPlanIsKeptOnTimedRunsOnly) {
  // The first run of each is untimed: a slow first run of the rules' plan changes nothing.
  int runs[2] = {0, 0};
  const PlanTrialVerdict v = run_plan_trial(
      [&](int plan) {
        const bool first = runs[plan]++ == 0;
        return plan == kTrialFirst ? 2.0 : first ? 100.0 : 1.0;
      },
      1, 5);
  EXPECT_EQ(runs[kTrialFirst], 6);
  EXPECT_EQ(runs[kTrialSecond], 6);
  EXPECT_FALSE(v.first_kept);
  EXPECT_EQ(v.first_ms, 2.0);
  EXPECT_EQ(v.second_ms, 1.0);
  EXPECT_NE(v.line.find("the rules' plan kept: 1.000 ms against 2.000 ms for the model's (medians of 5 runs each)"),
            std::string::npos)
      << v.line;
}

// The model's plan stays on a tie and when it is slower by 5% or less (interleaved medians
// hold their ratio to a few percent), and goes when it is slower by more.
TEST(PlanTrial, ANearTieKeepsTheModelsPlan) {
  for (double model_ms : {1.5, 1.55, 1.575})
    EXPECT_TRUE(decide_plan_trial({model_ms, model_ms, 9.0}, {1.5, 1.5, 0.1}).first_kept) << model_ms << " ms against 1.5";
  EXPECT_FALSE(decide_plan_trial({1.6, 1.6, 1.6}, {1.5, 1.5, 1.5}).first_kept) << "1.6 ms against 1.5";
}

// GROVE_TUNE_DIR at a fresh directory for one test (plans read this machine's models there).
class TuneDir {
 public:
  TuneDir() : path_(std::filesystem::temp_directory_path() / ("grove_trial_" + std::to_string(::getpid()))) {
    if (const char* old = std::getenv("GROVE_TUNE_DIR")) old_ = old;
    std::filesystem::remove_all(path_);
    ::setenv("GROVE_TUNE_DIR", path_.c_str(), 1);
  }
  ~TuneDir() {
    if (old_) ::setenv("GROVE_TUNE_DIR", old_->c_str(), 1);
    else ::unsetenv("GROVE_TUNE_DIR");
    std::filesystem::remove_all(path_);
  }

 private:
  std::filesystem::path path_;
  std::optional<std::string> old_;
};

// Installs, as this machine's performance model, one that prices the rule's primitive for
// `g`'s first conv ten times slower than the others, so a plan of `g` takes a model's choice.
void install_model_against_the_rule(const Graph& g) {
  PlanOptions structure;
  structure.debug.prepare_weights = false;
  const std::string rule = tune::rule_choice(*make_plan(g, structure), 0).primitive;
  std::vector<double> factor(kPrimitives.size(), 1.0);
  for (size_t k = 0; k < kPrimitives.size(); ++k)
    if (kPrimitives[k] == rule) factor[k] = 10.0;
  const std::string path = tune::perf_model_path();
  std::filesystem::create_directories(std::filesystem::path(path).parent_path());
  std::ofstream(path) << taught(factor).save();
}

// A machine whose performance model says the rule's primitive for one_conv's conv is ten
// times slower than another: the session plans that choice, tries it against the rules' plan
// before its first run and keeps one; every run then gives the reference's numbers, the same
// bits each time, and the plan it reports is the kept one (a plan without choices when the
// rules' won).
TEST(PlanTrial, ASessionTriesAModelsChoicesBeforeItsFirstRun) {
  TuneDir dir;
  const TestModel m = one_conv();
  const Graph g = unfused_graph(m);
  install_model_against_the_rule(g);
  const TensorMap want = model_from_graph(load_onnx_bytes(m.bytes, m.name + ".onnx")).run_reference(m.inputs);

  // Asked for by name, the model's choices run untried: they are what the model chose.
  Engine engine({.threads = 1, .pin = false});
  Session asked(engine, model_from_graph(load_onnx_bytes(m.bytes, m.name + ".onnx")), {.tuning = "model"});
  ShapeMap shapes;
  for (const auto& [name, t] : m.inputs) shapes[name] = t.shape();
  ASSERT_FALSE(plan_for(asked, shapes)->options.choices.empty()) << "the taught model chose nothing";
  EXPECT_EQ(plan_trial_verdict(asked), "");

  Session session(engine, model_from_graph(load_onnx_bytes(m.bytes, m.name + ".onnx")));
  const std::shared_ptr<const Plan> kept = plan_for(session, shapes);
  const std::string verdict = plan_trial_verdict(session);
  ASSERT_NE(verdict.find("plan kept"), std::string::npos) << verdict;
  EXPECT_EQ(verdict.find("the model's plan kept") != std::string::npos, !kept->options.choices.empty()) << verdict;
  const TensorMap first = session.run(m.inputs);
  expect_close(first, want, 1e-4, "first run");
  for (int run = 0; run < 5; ++run) {
    const TensorMap again = session.run(m.inputs);
    for (const auto& [name, t] : first)
      EXPECT_EQ(std::memcmp(t.raw(), again.at(name).raw(), t.bytes()), 0) << "run " << run << " changed " << name;
  }
  EXPECT_EQ(plan_for(session, shapes), kept);

  // The verdict is this machine's record of the model now: a later session (another process
  // alike) plans by it without a trial, the same plan, so its outputs are the same bits.
  std::vector<std::string> records;
  for (const auto& entry : std::filesystem::directory_iterator(tune::machine_tuning_dir()))
    if (entry.path().extension() == ".record") records.push_back(entry.path().string());
  ASSERT_EQ(records.size(), 1u) << "the trial left no record, or several";
  const std::string& record = records[0];
  const tune::TuningRecord r = tune::load_record_file(record);
  EXPECT_EQ(r.measured_by, tune::kMeasuredByTrial);
  EXPECT_EQ(r.choices.size(), kept->options.choices.size());
  Engine engine2({.threads = 1, .pin = false});
  Session later(engine2, model_from_graph(load_onnx_bytes(m.bytes, m.name + ".onnx")));
  const std::shared_ptr<const Plan> replanned = plan_for(later, shapes);
  EXPECT_EQ(plan_trial_verdict(later), "") << "tried again with a verdict on record";
  EXPECT_EQ(replanned->options.choices_from, DecisionSource::record);
  EXPECT_NE(replanned->options.choices_source.find("a plan trial kept"), std::string::npos)
      << replanned->options.choices_source;
  ASSERT_EQ(replanned->options.choices.size(), kept->options.choices.size());
  for (size_t i = 0; i < kept->options.choices.size(); ++i) {
    EXPECT_EQ(replanned->options.choices[i].node, kept->options.choices[i].node);
    EXPECT_EQ(replanned->options.choices[i].primitive, kept->options.choices[i].primitive);
    EXPECT_EQ(replanned->options.choices[i].extent, kept->options.choices[i].extent);
  }
  const TensorMap later_out = later.run(m.inputs);
  for (const auto& [name, t] : first)
    EXPECT_EQ(std::memcmp(t.raw(), later_out.at(name).raw(), t.bytes()), 0) << "a later session changed " << name;
}

// Sessions planning one model side by side, in one process or several, try it once: while
// one tries it, the others wait on the record's lock and then plan by the verdict it leaves.
// Here the test holds the lock, as a process mid-trial would, and leaves a verdict for the
// rules' plan: no session may try the model again.
TEST(PlanTrial, SessionsWaitingOnATrialPlanByItsVerdict) {
  TuneDir dir;
  const TestModel m = one_conv();
  const Graph g = unfused_graph(m);
  install_model_against_the_rule(g);
  ShapeMap shapes;
  for (const auto& [name, t] : m.inputs) shapes[name] = t.shape();

  constexpr int kSessions = 3;
  std::vector<std::unique_ptr<Engine>> engines;
  std::vector<std::unique_ptr<Session>> sessions;
  for (int i = 0; i < kSessions; ++i) {
    engines.push_back(std::make_unique<Engine>(EngineOptions{.threads = 1, .pin = false}));
    sessions.push_back(std::make_unique<Session>(*engines.back(), model_from_graph(load_onnx_bytes(m.bytes, m.name + ".onnx"))));
  }
  std::vector<std::shared_ptr<const Plan>> plans(kSessions);
  std::vector<std::string> verdicts(kSessions);
  std::vector<std::thread> threads;
  {
    const std::shared_ptr<const Plan> model_plan = tune::plan_with_tuning(g, {}, "model", {});
    ASSERT_FALSE(model_plan->options.choices.empty()) << "the taught model chose nothing";
    std::optional<tune::RecordLock> trying;
    trying.emplace(tune::record_path(g, {}));
    for (int i = 0; i < kSessions; ++i)
      threads.emplace_back([&, i] {
        plans[i] = plan_for(*sessions[i], shapes);
        verdicts[i] = plan_trial_verdict(*sessions[i]);
      });
    std::this_thread::sleep_for(std::chrono::milliseconds(300));  // the sessions reach the lock
    ASSERT_EQ(tune::keep_trial_verdict(g, {}, model_plan->options.choices, false, 9.0, 1.0), "");
  }
  for (std::thread& t : threads) t.join();
  for (int i = 0; i < kSessions; ++i) {
    EXPECT_EQ(verdicts[i], "") << "session " << i << " tried the model again";
    EXPECT_TRUE(plans[i]->options.choices.empty()) << "session " << i << " kept the model's plan";
    EXPECT_NE(plans[i]->options.choices_source.find("kept the rules' plan"), std::string::npos)
        << plans[i]->options.choices_source;
  }
}

std::vector<std::string> record_files() {
  std::vector<std::string> records;
  for (const auto& entry : std::filesystem::directory_iterator(tune::machine_tuning_dir()))
    if (entry.path().extension() == ".record") records.push_back(entry.path().string());
  return records;
}

// Where two cores share one image, a pruned conv that the one-thread probe put on Winograd is
// tried against the same plan with it on the pruned GEMM before the first run. The faster is
// kept, its runs give the reference's numbers, the verdict becomes the machine's record, and
// later sessions plan by the record (edited here to the other plan, so both ways are seen)
// without a trial. With a core per image, or one thread, nothing is tried.
TEST(PruningTrial, PrunedWinogradConvsSharingAnImageAreTriedAgainstThePrunedGemm) {
  TuneDir dir;
  test::store_probes_for_winograd();
  const std::string bytes = test::pruned_winograd_model(1);
  auto model = [&] { return model_from_graph(load_onnx_bytes(bytes, "pruned.onnx")); };
  const Tensor x = [] {
    Tensor t(DType::f32, {1, 32, 14, 14});
    for (int64_t i = 0; i < t.numel(); ++i) t.data<float>()[i] = float(i % 97) / 48.0f - 1.0f;
    return t;
  }();
  const ShapeMap shapes{{"x", x.shape()}};

  Engine engine({.threads = 2, .pin = false});
  Session untried(engine, model(), {.tuning = "off"});
  const std::shared_ptr<const Plan> priced = plan_for(untried, shapes);
  ASSERT_EQ(priced->pruning.winograd_sharing_images, 1) << "the probes did not put the pruned conv on Winograd";
  EXPECT_EQ(plan_trial_verdict(untried), "");

  Session session(engine, model());
  const std::shared_ptr<const Plan> kept = plan_for(session, shapes);
  const std::string verdict = plan_trial_verdict(session);
  ASSERT_NE(verdict.find("pruned convs on Winograd tried against the pruned GEMM"), std::string::npos) << verdict;
  const bool on_winograd = verdict.find("the Winograd plan kept") != std::string::npos;
  EXPECT_EQ(kept->pruning.pruned_winograd, on_winograd ? 1 : 0) << verdict;
  const Tensor want = model_from_graph(kept->graph).run_reference({{"x", x}}).at("y");
  const Tensor first = session.run({{"x", x}}).at("y");
  for (int64_t i = 0; i < want.numel(); ++i) ASSERT_NEAR(first.data<float>()[i], want.data<float>()[i], 1e-3) << i;
  for (int run = 0; run < 3; ++run)
    EXPECT_EQ(std::memcmp(first.raw(), session.run({{"x", x}}).at("y").raw(), first.bytes()), 0) << "run " << run;

  const std::vector<std::string> records = record_files();
  ASSERT_EQ(records.size(), 1u) << "the trial left no record, or several";
  tune::TuningRecord r = tune::load_record_file(records[0]);
  EXPECT_EQ(r.measured_by, tune::kMeasuredByPruningTrial);
  EXPECT_EQ(r.pruned_convs, on_winograd ? "winograd" : "gemm");
  Engine engine2({.threads = 2, .pin = false});
  Session later(engine2, model());
  EXPECT_EQ(plan_for(later, shapes)->pruning.pruned_winograd, kept->pruning.pruned_winograd);
  EXPECT_EQ(plan_trial_verdict(later), "") << "tried again with a verdict on record";
  EXPECT_EQ(std::memcmp(first.raw(), later.run({{"x", x}}).at("y").raw(), first.bytes()), 0) << "a later session's bits";
  r.pruned_convs = on_winograd ? "gemm" : "winograd";
  tune::write_record_file(r, records[0]);
  Session edited(engine2, model());
  EXPECT_EQ(plan_for(edited, shapes)->pruning.pruned_winograd, on_winograd ? 0 : 1) << "the record was not followed";
  EXPECT_EQ(plan_trial_verdict(edited), "");

  // A core per image, or one core: the probe's price holds, and nothing is tried.
  const std::string pair = test::pruned_winograd_model(2);
  Session images(engine, model_from_graph(load_onnx_bytes(pair, "pair.onnx")));
  EXPECT_EQ(plan_for(images, {{"x", {2, 32, 14, 14}}})->pruning.pruned_winograd, 1);
  EXPECT_EQ(plan_trial_verdict(images), "");
  Engine one({.threads = 1, .pin = false});
  Session alone(one, model());
  EXPECT_EQ(plan_for(alone, shapes)->pruning.pruned_winograd, 1);
  EXPECT_EQ(plan_trial_verdict(alone), "");
}

}  // namespace
}  // namespace grove
