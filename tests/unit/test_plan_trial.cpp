// A performance model's plan on trial against the rules' (runtime/plan_trial.h): the two take
// turns, the first runs of each are untimed, the faster by median is kept (the model's on a
// tie) and the other released; a Session runs its first runs of a shape so, on both plans,
// with the same numbers, and then keeps to the one the trial kept.
#include <gtest/gtest.h>

#include <atomic>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <thread>

#include "onnx/import.h"
#include "runtime/plan_trial.h"
#include "runtime/session.h"
#include "taught_perf_model.h"

namespace grove {
namespace {

PlanTrial::Candidate candidate() { return {std::make_shared<const Plan>(), nullptr}; }

// Runs `trial` to its verdict: each turn's run takes what `ms` says for its plan.
void run_trial(PlanTrial& trial, double model_ms, double rules_ms, int runs) {
  for (int i = 0; i < runs; ++i) {
    const PlanTrial::Turn turn = trial.next();
    if (turn.index >= 0) trial.record(turn.index, turn.index == PlanTrial::kModel ? model_ms : rules_ms);
  }
}

TEST(PlanTrial, TurnsAlternateFromTheModelsPlan) {
  const PlanTrial::Candidate model = candidate(), rules = candidate();
  PlanTrial trial(model, rules, 1, 2);
  for (int i = 0; i < 6; ++i) {
    const PlanTrial::Turn turn = trial.next();
    EXPECT_EQ(turn.index, i % 2 == 0 ? PlanTrial::kModel : PlanTrial::kRules) << "turn " << i;
    EXPECT_EQ(turn.candidate.plan, i % 2 == 0 ? model.plan : rules.plan);
  }
  // Every trial run started, none ended: the model's plan, untimed.
  const PlanTrial::Turn waiting = trial.next();
  EXPECT_EQ(waiting.index, -1);
  EXPECT_EQ(waiting.candidate.plan, model.plan);
  EXPECT_FALSE(trial.decided());
  EXPECT_TRUE(trial.verdict().empty());
}

TEST(PlanTrial, TheFasterPlanIsKeptAndTheOtherReleased) {
  std::weak_ptr<const Plan> model_plan, rules_plan;
  {
    PlanTrial::Candidate model = candidate(), rules = candidate();
    model_plan = model.plan, rules_plan = rules.plan;
    PlanTrial trial(std::move(model), std::move(rules), 1, 5);
    // Warm runs are not timed: a slow first run of the rules' plan changes nothing.
    {
      const int first = trial.next().index, second = trial.next().index;
      trial.record(first, 1.0);
      trial.record(second, 100.0);
    }
    run_trial(trial, 2.0, 1.0, 9);
    EXPECT_FALSE(trial.decided()) << "decided before each plan had five timed runs";
    run_trial(trial, 2.0, 1.0, 1);
    ASSERT_TRUE(trial.decided());
    EXPECT_EQ(trial.current().plan, rules_plan.lock());
    EXPECT_TRUE(model_plan.expired()) << "the plan not kept is still held";
    EXPECT_NE(trial.verdict().find("the rules' plan kept: 1.000 ms against 2.000 ms"), std::string::npos)
        << trial.verdict();
    const PlanTrial::Turn after = trial.next();
    EXPECT_EQ(after.index, -1);
    EXPECT_EQ(after.candidate.plan, rules_plan.lock());
    trial.record(PlanTrial::kModel, 0.1);  // a late run changes nothing
    EXPECT_EQ(trial.current().plan, rules_plan.lock());
  }
  EXPECT_TRUE(rules_plan.expired());
}

TEST(PlanTrial, ATieKeepsTheModelsPlan) {
  const PlanTrial::Candidate model = candidate(), rules = candidate();
  PlanTrial trial(model, rules, 0, 3);
  run_trial(trial, 1.5, 1.5, 6);
  ASSERT_TRUE(trial.decided());
  EXPECT_EQ(trial.current().plan, model.plan);
}

// Runs in flight side by side (a server's): turns and records from several threads decide
// once, on each plan's timed runs.
TEST(PlanTrial, RunsFromSeveralThreadsDecideOnce) {
  const PlanTrial::Candidate model = candidate(), rules = candidate();
  PlanTrial trial(model, rules, 1, 5);
  std::atomic<int> model_runs{0}, rules_runs{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t)
    threads.emplace_back([&] {
      for (int i = 0; i < 50; ++i) {
        const PlanTrial::Turn turn = trial.next();
        (turn.candidate.plan == model.plan ? model_runs : rules_runs).fetch_add(1);
        if (turn.index >= 0) trial.record(turn.index, turn.index == PlanTrial::kModel ? 3.0 : 1.0);
      }
    });
  for (std::thread& t : threads) t.join();
  ASSERT_TRUE(trial.decided());
  EXPECT_EQ(trial.current().plan, rules.plan);
  EXPECT_EQ(rules_runs.load(), 200 - model_runs.load());
  EXPECT_GE(rules_runs.load(), 6);  // its trial runs, then every run after the verdict
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

// A machine whose performance model says the rule's primitive for one_conv's conv is ten
// times slower than another: the session plans that choice and tries it against the rules'
// plan over its first runs, every run with the reference's numbers, and then runs the plan
// it kept (a plan without choices when the rules' won).
TEST(PlanTrial, ASessionTriesAModelsChoicesAgainstTheRules) {
  TuneDir dir;
  const TestModel m = one_conv();
  const Graph g = unfused_graph(m);
  PlanOptions structure;
  structure.debug.prepare_weights = false;
  const std::string rule = tune::rule_choice(*make_plan(g, structure), 0).primitive;
  std::vector<double> factor(kPrimitives.size(), 1.0);
  for (size_t k = 0; k < kPrimitives.size(); ++k)
    if (kPrimitives[k] == rule) factor[k] = 10.0;
  const std::string path = tune::perf_model_path();
  std::filesystem::create_directories(std::filesystem::path(path).parent_path());
  std::ofstream(path) << taught(factor).save();

  Engine engine({.threads = 1, .pin = false});
  Session session(engine, model_from_graph(load_onnx_bytes(m.bytes, m.name + ".onnx")));
  ShapeMap shapes;
  for (const auto& [name, t] : m.inputs) shapes[name] = t.shape();
  const std::shared_ptr<const Plan> first = plan_for(session, shapes);
  ASSERT_FALSE(first->options.choices.empty()) << "the taught model chose nothing: " << first->options.choices_source;
  EXPECT_EQ(plan_trial_verdict(session), "on trial against the rules' plan");
  EXPECT_TRUE(plan_on_trial(session));
  const TensorMap want = model_from_graph(load_onnx_bytes(m.bytes, m.name + ".onnx")).run_reference(m.inputs);
  for (int run = 0; run < 12; ++run) expect_close(session.run(m.inputs), want, 1e-4, "run " + std::to_string(run));
  EXPECT_FALSE(plan_on_trial(session));
  const std::string verdict = plan_trial_verdict(session);
  ASSERT_NE(verdict.find("plan kept"), std::string::npos) << verdict;
  const std::shared_ptr<const Plan> kept = plan_for(session, shapes);
  EXPECT_EQ(verdict.find("the model's plan kept") != std::string::npos, !kept->options.choices.empty()) << verdict;
  EXPECT_EQ(verdict.find("the model's plan kept") != std::string::npos, kept == first) << verdict;
  expect_close(session.run(m.inputs), want, 1e-4, "after the trial");

  // Asked for by name, the model's choices run without a trial.
  Session asked(engine, model_from_graph(load_onnx_bytes(m.bytes, m.name + ".onnx")), {.tuning = "model"});
  expect_close(asked.run(m.inputs), want, 1e-4, "--tuning model");
  EXPECT_EQ(plan_trial_verdict(asked), "");
}

}  // namespace
}  // namespace grove
