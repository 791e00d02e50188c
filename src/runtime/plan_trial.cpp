#include "runtime/plan_trial.h"

#include <algorithm>
#include <cstdio>

namespace grove {

namespace {
// The model's plan stays unless it measured this much slower than the rules'. The two plans'
// medians come from runs taken in turns in one process, so the machine's drift reaches both
// alike and their ratio holds to a few percent; within that the two are a tie, and the plan
// the model predicted faster is kept. (On the Fashion-MNIST sub-nets, Zen 5, the model's
// plans measured 0.92-1.24x the rules' where no large loss was at stake, and 1.3-2.3x where
// one was; docs/tuning.md.)
constexpr double kOverturn = 1.05;

double median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}
}  // namespace

PlanTrialVerdict decide_plan_trial(const std::vector<double>& model_runs, const std::vector<double>& rules_runs) {
  PlanTrialVerdict v;
  v.model_ms = median(model_runs);
  v.rules_ms = median(rules_runs);
  v.model_kept = v.model_ms <= kOverturn * v.rules_ms;
  char line[200];
  std::snprintf(line, sizeof line, "the %s plan kept: %.3f ms against %.3f ms for the %s (medians of %zu runs each)",
                v.model_kept ? "model's" : "rules'", v.model_kept ? v.model_ms : v.rules_ms,
                v.model_kept ? v.rules_ms : v.model_ms, v.model_kept ? "rules'" : "model's",
                std::min(model_runs.size(), rules_runs.size()));
  v.line = line;
  return v;
}

PlanTrialVerdict run_plan_trial(const std::function<double(int)>& run, int warm_runs, int timed_runs) {
  warm_runs = std::max(0, warm_runs);
  timed_runs = std::max(1, timed_runs);
  std::vector<double> times[2];
  for (int turn = 0; turn < 2 * (warm_runs + timed_runs); ++turn) {
    const int plan = turn % 2 == 0 ? kTrialModel : kTrialRules;
    const double ms = run(plan);
    if (turn / 2 >= warm_runs) times[plan].push_back(ms);  // a plan's first runs fill its buffers and caches
  }
  return decide_plan_trial(times[kTrialModel], times[kTrialRules]);
}

}  // namespace grove
