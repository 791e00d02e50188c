#include "runtime/plan_trial.h"

#include <algorithm>
#include <cstdio>

namespace grove {

namespace {
double median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}
}  // namespace

PlanTrialVerdict decide_plan_trial(const std::vector<double>& first_runs, const std::vector<double>& second_runs,
                                   const TrialTerms& terms) {
  PlanTrialVerdict v;
  v.first_ms = median(first_runs);
  v.second_ms = median(second_runs);
  v.first_kept = v.first_ms <= terms.overturn * v.second_ms;
  char line[300];
  std::snprintf(line, sizeof line, "the %s plan kept: %.3f ms against %.3f ms for the %s (medians of %zu runs each)",
                (v.first_kept ? terms.first : terms.second).c_str(), v.first_kept ? v.first_ms : v.second_ms,
                v.first_kept ? v.second_ms : v.first_ms, (v.first_kept ? terms.second : terms.first).c_str(),
                std::min(first_runs.size(), second_runs.size()));
  v.line = line;
  return v;
}

PlanTrialVerdict run_plan_trial(const std::function<double(int)>& run, int warm_runs, int timed_runs,
                                const TrialTerms& terms) {
  warm_runs = std::max(0, warm_runs);
  timed_runs = std::max(1, timed_runs);
  std::vector<double> times[2];
  for (int turn = 0; turn < 2 * (warm_runs + timed_runs); ++turn) {
    const int plan = turn % 2 == 0 ? kTrialFirst : kTrialSecond;
    const double ms = run(plan);
    if (turn / 2 >= warm_runs) times[plan].push_back(ms);  // a plan's first runs fill its buffers and caches
  }
  return decide_plan_trial(times[kTrialFirst], times[kTrialSecond], terms);
}

}  // namespace grove
