#pragma once
// MT-Graph inside the server (thesis 004, chapter 4.1): requests of two different models that
// arrive together run as one compound task, their tile DAGs side by side in one job with stage
// gates where the pointer matrix puts them (runtime/staged_job.h). For each pair of plans the
// schedule is searched on live traffic: the coordinate descent of mt_graph_search.h, whose
// every cost is the median latency of a few live pair runs under the candidate matrix. Its
// start, every pointer at the end, is plain co-execution as the server does it without
// MT-Graph: the two requests apart, each its own job in the ready pool, their latencies its
// cost. The winner is verified against that on live traffic, alternately, and kept only if it
// still wins; where none wins, the two models' requests run apart from then on (a pair ends
// when its slower run does, which costs the faster one).
#include <chrono>
#include <condition_variable>
#include <deque>
#include <future>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "runtime/staged_job.h"
#include "serve/model_repository.h"
#include "serve/mt_graph_search.h"

namespace grove::serve {

struct MtGraphPairsOptions {
  // How long a request waits for a request of another model to pair with: an unpaired request
  // runs alone after it. 0: MT-Graph off (every request runs alone at once).
  double pair_window_ms = 1.0;
  int profile_runs = 8;  // live pair runs (or requests apart) per candidate schedule: their median is its cost
  MtGraphSearchOptions search{.pointers = 2, .rounds = 2, .candidates = 6, .verify = 3, .seed = 1};
};

// One pair of plans and the schedule found for it, for /metrics and GET /v2/mtgraph.
struct MtGraphPairState {
  std::vector<std::string> models;  // the two models' names, in the order of the pointer rows
  // "searching", "in force" (a staged schedule won), or "alone" (none beat plain co-execution:
  // the two models' requests run apart again).
  std::string phase;
  PointerMatrix rho;                // the schedule pairs run under now
  int64_t pair_runs = 0;            // compound tasks run for this pair
  int schedules_profiled = 0;
  double plain_ms = 0, staged_ms = 0;  // the verification's medians: requests apart, pairs staged (0 until it ran)
  double gain = 1;                     // plain_ms / staged_ms where a staged schedule is in force
};

class MtGraphPairs {
 public:
  MtGraphPairs(Engine& engine, MtGraphPairsOptions options);
  ~MtGraphPairs();  // stops the searches; waits for the pair runs in flight

  // Runs `inputs` on `model` (a plain single-plan session, no batcher): paired with another
  // model's request waiting within the window, or alone. A request waits for a partner only
  // while another model has had a request within the last second. The future is ready when the outputs
  // are (or with the run's error). Throws Error as Session::submit does for inputs that do
  // not fit.
  std::future<TensorMap> submit(ServedModel& model, TensorMap inputs, const CancelToken& cancel);

  std::vector<MtGraphPairState> pairs() const;
  bool enabled() const { return options_.pair_window_ms > 0; }

 private:
  struct Request;
  struct Pair;
  std::shared_ptr<Pair> pair_for(const Request& a, const Request& b);
  // False once the search for the pair of these plans found no staged schedule that wins.
  bool pairs_well(const Plan* a, const Plan* b) const;  // under mutex_
  void run_pair(Request& a, Request& b);
  void run_alone(Request& r);
  void search(std::shared_ptr<Pair> pair);

  Engine& engine_;
  const MtGraphPairsOptions options_;
  std::shared_ptr<WorkerScratch> scratch_;  // per worker slot, shared by every compound job on the engine
  mutable std::mutex mutex_;
  std::condition_variable changed_;  // a waiting request taken, a pair run done, stop
  bool stop_ = false;
  std::deque<std::shared_ptr<Request>> waiting_;  // requests waiting for a partner, oldest first
  std::map<std::pair<const Plan*, const Plan*>, std::shared_ptr<Pair>> pairs_;
  // One pool per plan, as a Session keeps, with the plan it is for (not kept alive by it).
  std::map<const Plan*, std::pair<std::weak_ptr<const Plan>, std::shared_ptr<BufferPool>>> buffers_;
  // Each model's latest request and its plan.
  std::map<const ServedModel*, std::pair<std::chrono::steady_clock::time_point, const Plan*>> last_seen_;
  std::vector<std::thread> searches_;
};

}  // namespace grove::serve
