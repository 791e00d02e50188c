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
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}
}  // namespace

PlanTrial::PlanTrial(Candidate model, Candidate rules, int warm_runs, int timed_runs)
    : candidates_{std::move(model), std::move(rules)},
      warm_runs_(std::max(0, warm_runs)),
      timed_runs_(std::max(1, timed_runs)) {}

PlanTrial::Turn PlanTrial::next() {
  std::lock_guard<std::mutex> lock(mutex_);
  if (kept_ >= 0) return {-1, candidates_[kept_]};
  // The one with fewer runs started, the model's first: runs in flight side by side (a
  // server's) still split evenly.
  const int index = started_[kModel] <= started_[kRules] ? kModel : kRules;
  // Every trial run started but not every one ended: the model's plan meanwhile, untimed.
  if (started_[index] >= warm_runs_ + timed_runs_) return {-1, candidates_[kModel]};
  ++started_[index];
  return {index, candidates_[index]};
}

void PlanTrial::record(int index, double ms) {
  if (index != kModel && index != kRules) return;
  std::lock_guard<std::mutex> lock(mutex_);
  if (kept_ >= 0) return;
  // A plan's first runs fill its buffer pool and caches: untimed.
  if (++ended_[index] <= warm_runs_) return;
  timed_[index].push_back(ms);
  if (static_cast<int>(timed_[kModel].size()) >= timed_runs_ && static_cast<int>(timed_[kRules].size()) >= timed_runs_)
    decide_locked();
}

void PlanTrial::decide_locked() {
  const double model_ms = median(timed_[kModel]), rules_ms = median(timed_[kRules]);
  kept_ = model_ms <= kOverturn * rules_ms ? kModel : kRules;
  char line[200];
  std::snprintf(line, sizeof line, "the %s plan kept: %.3f ms against %.3f ms for the %s (medians of %d runs each)",
                kept_ == kModel ? "model's" : "rules'", kept_ == kModel ? model_ms : rules_ms,
                kept_ == kModel ? rules_ms : model_ms, kept_ == kModel ? "rules'" : "model's", timed_runs_);
  verdict_ = line;
  candidates_[1 - kept_] = {};  // its plan and the weights only it packed go with its last run
}

bool PlanTrial::decided() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return kept_ >= 0;
}

PlanTrial::Candidate PlanTrial::current() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return candidates_[kept_ >= 0 ? kept_ : kModel];
}

int PlanTrial::kept() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return kept_;
}

double PlanTrial::median_ms(int index) const {
  std::lock_guard<std::mutex> lock(mutex_);
  if (index != kModel && index != kRules || timed_[index].empty()) return 0;
  return median(timed_[index]);
}

std::string PlanTrial::verdict() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return verdict_;
}

}  // namespace grove
