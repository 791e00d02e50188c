#pragma once
// A plan whose conv choices a performance model predicted, on trial against the rules' plan
// of the same input shapes. A model is a guess: one trained on another CPU, or before a
// kernel got faster, can price a layer 2x off (docs/tuning.md has a plan predicted to save
// 17% that ran 2.3x slower). So before a session's first run of those shapes the two plans
// take turns on inputs of those shapes, timed, and the model's is kept unless it is clearly
// slower (Session::Impl::settle). The session writes the verdict as the model's tuning record
// on this machine (tune/tuned_plan.h), so every run and every later process plans the model
// alike and their outputs stay the same bits.
#include <functional>
#include <string>
#include <vector>

namespace grove {

inline constexpr int kTrialModel = 0, kTrialRules = 1;

struct PlanTrialVerdict {
  bool model_kept = true;
  double model_ms = 0, rules_ms = 0;  // each plan's median timed run
  std::string line;                   // for reports: "the rules' plan kept: 1.000 ms against ..."
};

// Keeps the model's plan unless its median is more than 1.05x the rules' (plan_trial.cpp says
// why 1.05).
PlanTrialVerdict decide_plan_trial(const std::vector<double>& model_ms, const std::vector<double>& rules_ms);

// The trial: `run(kTrialModel)` and `run(kTrialRules)` in turns, the model's first, each
// returning its run's milliseconds; each plan's first `warm_runs` are untimed (they fill its
// buffers and caches), then `timed_runs` timed. Whatever `run` throws goes to the caller.
PlanTrialVerdict run_plan_trial(const std::function<double(int)>& run, int warm_runs, int timed_runs);

}  // namespace grove
