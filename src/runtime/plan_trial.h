#pragma once
// A plan whose conv choices a performance model predicted, on trial against the rules' plan
// of the same input shapes. A model is a guess: one trained on another CPU, or before a
// kernel got faster, can price a layer 2x off (docs/tuning.md has a plan predicted to save
// 17% that ran 2.3x slower). So before a session's first run of those shapes the two plans
// take turns on inputs of those shapes, timed, and the model's is kept unless it is clearly
// slower; the other plan, and the weights only it packed, are released. The session writes
// the verdict as the model's tuning record on this machine (tune/tuned_plan.h), so every run
// and every later process plans the model alike and their outputs stay the same bits.
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

namespace grove {

struct Plan;
class BufferPool;

class PlanTrial {
 public:
  struct Candidate {
    std::shared_ptr<const Plan> plan;
    std::shared_ptr<BufferPool> buffers;
  };
  static constexpr int kModel = 0, kRules = 1;
  // Each candidate runs `warm_runs` untimed runs and then `timed_runs` timed ones.
  PlanTrial(Candidate model, Candidate rules, int warm_runs = 1, int timed_runs = 5);

  struct Turn {
    int index = -1;  // kModel or kRules; -1 once decided (the kept plan, not timed)
    Candidate candidate;
  };
  // The plan for the next run: the candidates in turn until both have their runs, then the kept one.
  Turn next();
  // A run of `index`'s plan ended after `ms`; decides once both have their timed runs.
  void record(int index, double ms);
  bool decided() const;
  // The kept candidate once decided, else the model's.
  Candidate current() const;
  // What was decided, for reports: empty while on trial.
  std::string verdict() const;
  // kModel or kRules once decided, else -1; and a candidate's median timed run.
  int kept() const;
  double median_ms(int index) const;

 private:
  void decide_locked();
  mutable std::mutex mutex_;
  Candidate candidates_[2];
  int warm_runs_, timed_runs_;
  int started_[2] = {0, 0}, ended_[2] = {0, 0};
  std::vector<double> timed_[2];
  int kept_ = -1;
  std::string verdict_;
};

}  // namespace grove
