#pragma once
// Two plans of the same input shapes on trial before a session's first run of those shapes:
// they take turns on inputs of those shapes, timed, and the first is kept unless it is
// clearly slower. Two trials use it (Session::Impl::make_plan):
// - A performance model's conv choices against the rules' plan. A model is a guess: one
//   trained on another CPU, or before a kernel got faster, can price a layer 2x off
//   (docs/tuning.md has a plan predicted to save 17% that ran 2.3x slower).
// - Pruned convs kept on Winograd against the pruned GEMM, where cores share an image
//   (Session::Impl::settle_pruning, docs/tuning.md "The pruning trial").
// The session writes each verdict as a record on this machine (tune/tuned_plan.h), so every
// run and every later process plans the model alike and their outputs stay the same bits.
#include <functional>
#include <string>
#include <vector>

namespace grove {

inline constexpr int kTrialFirst = 0, kTrialSecond = 1;

// What the two plans are called in the verdict's line, and how much slower than the second
// the first may measure and still be kept.
struct TrialTerms {
  std::string first = "model's", second = "rules'";
  // The model trial's: the two plans' medians come from runs taken in turns in one process,
  // so the machine's drift reaches both alike and their ratio holds to a few percent; within
  // that the two are a tie, and the plan the model predicted faster is kept. (On the
  // Fashion-MNIST sub-nets, Zen 5, the model's plans measured 0.92-1.24x the rules' where no
  // large loss was at stake, and 1.3-2.3x where one was; docs/tuning.md.)
  double overturn = 1.05;
};

struct PlanTrialVerdict {
  bool first_kept = true;
  double first_ms = 0, second_ms = 0;  // each plan's median timed run
  std::string line;                    // for reports: "the rules' plan kept: 1.000 ms against ..."
};

// Keeps the first plan unless its median is more than terms.overturn times the second's.
PlanTrialVerdict decide_plan_trial(const std::vector<double>& first_ms, const std::vector<double>& second_ms,
                                   const TrialTerms& terms = {});

// The trial: `run(kTrialFirst)` and `run(kTrialSecond)` in turns, the first plan's first, each
// returning its run's milliseconds; each plan's first `warm_runs` are untimed (they fill its
// buffers and caches), then `timed_runs` timed. Whatever `run` throws goes to the caller.
PlanTrialVerdict run_plan_trial(const std::function<double(int)>& run, int warm_runs, int timed_runs,
                                const TrialTerms& terms = {});

}  // namespace grove
