// A performance model's plan on trial against the rules' (runtime/plan_trial.h): the two take
// turns, the first runs of each are untimed, the model's is kept unless its median is more
// than 1.05x the rules'; a Session settles it before its first run of a shape and keeps the
// verdict as the machine's record, which later sessions plan by.
#include <gtest/gtest.h>

#include <atomic>
#include <cstring>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <thread>

#include "onnx/import.h"
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
  EXPECT_EQ(order, (std::vector<int>{kTrialModel, kTrialRules, kTrialModel, kTrialRules, kTrialModel, kTrialRules}));
}

TEST(PlanTrial, TheFasterPlanIsKeptOnTimedRunsOnly) {
  // The first run of each is untimed: a slow first run of the rules' plan changes nothing.
  int runs[2] = {0, 0};
  const PlanTrialVerdict v = run_plan_trial(
      [&](int plan) {
        const bool first = runs[plan]++ == 0;
        return plan == kTrialModel ? 2.0 : first ? 100.0 : 1.0;
      },
      1, 5);
  EXPECT_EQ(runs[kTrialModel], 6);
  EXPECT_EQ(runs[kTrialRules], 6);
  EXPECT_FALSE(v.model_kept);
  EXPECT_EQ(v.model_ms, 2.0);
  EXPECT_EQ(v.rules_ms, 1.0);
  EXPECT_NE(v.line.find("the rules' plan kept: 1.000 ms against 2.000 ms for the model's (medians of 5 runs each)"),
            std::string::npos)
      << v.line;
}

// The model's plan stays on a tie and when it is slower by 5% or less (interleaved medians
// hold their ratio to a few percent), and goes when it is slower by more.
TEST(PlanTrial, ANearTieKeepsTheModelsPlan) {
  for (double model_ms : {1.5, 1.55, 1.575})
    EXPECT_TRUE(decide_plan_trial({model_ms, model_ms, 9.0}, {1.5, 1.5, 0.1}).model_kept) << model_ms << " ms against 1.5";
  EXPECT_FALSE(decide_plan_trial({1.6, 1.6, 1.6}, {1.5, 1.5, 1.5}).model_kept) << "1.6 ms against 1.5";
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

}  // namespace
}  // namespace grove
