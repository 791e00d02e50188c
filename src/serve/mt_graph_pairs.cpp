#include "serve/mt_graph_pairs.h"

#include <algorithm>

#include "runtime/session.h"

namespace grove::serve {
namespace {

using Clock = std::chrono::steady_clock;

// Thrown out of a search's cost when the server stops.
struct Stopping {};

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : v[v.size() / 2];
}

}  // namespace

struct MtGraphPairs::Request {
  ServedModel* model = nullptr;
  std::shared_ptr<const Plan> plan;
  std::shared_ptr<PlannedRun> run;  // checked against the plan when made
  std::future<TensorMap> result;    // the run's
  CancelToken cancel;
  bool taken = false;  // a request of another model took it into a pair
};

struct MtGraphPairs::Pair {
  // Not owned: a model unloaded or reloaded lets its plans go, and with them this pair (a new
  // plan at the same address is another pair: `alive` tells them apart).
  std::weak_ptr<const Plan> plans[2];
  int32_t ops[2] = {0, 0};  // the plans' node counts, the pointers' range
  bool alive(const Plan* a, const Plan* b) const { return plans[0].lock().get() == a && plans[1].lock().get() == b; }
  bool gone() const { return plans[0].expired() || plans[1].expired(); }
  MtGraphPairState state;
  // The search's request: pair runs use `candidate` until `samples` has profile_runs latencies.
  // The search's start, every pointer at the end (one stage), is plain co-execution: the two
  // models' requests run apart, each its own job in the pool, as without MT-Graph; its
  // samples are those requests' latencies.
  bool profiling = false;
  PointerMatrix apart;
  PointerMatrix candidate;
  std::vector<double> samples;
  std::map<PointerMatrix, std::shared_ptr<const StagedDag>> dags;
};

MtGraphPairs::MtGraphPairs(Engine& engine, MtGraphPairsOptions options)
    : engine_(engine),
      options_(std::move(options)),
      scratch_(std::make_shared<WorkerScratch>(static_cast<size_t>(worker_slots(engine)))) {}

MtGraphPairs::~MtGraphPairs() {
  {
    std::lock_guard lock(mutex_);
    stop_ = true;
    changed_.notify_all();
  }
  for (std::thread& t : searches_) t.join();
}

std::future<TensorMap> MtGraphPairs::submit(ServedModel& model, TensorMap inputs, const CancelToken& cancel) {
  ShapeMap shapes;
  for (const auto& [name, t] : inputs) shapes[name] = t.shape();
  // Only requests that feed every input, of models that plan as one tile graph: the others take
  // the session's own paths (defaults, control flow).
  std::shared_ptr<const Plan> plan =
      enabled() && inputs.size() == model.inputs.size() ? plan_for(*model.session, shapes, cancel) : nullptr;
  if (!plan) return model.session->submit(std::move(inputs), cancel);
  auto me = std::make_shared<Request>();
  me->model = &model;
  me->plan = plan;
  me->cancel = cancel;
  std::shared_ptr<BufferPool> buffers;
  {
    std::lock_guard lock(mutex_);
    auto& [owner, pool] = buffers_[plan.get()];
    if (!pool || owner.lock() != plan) {  // new, or a plan since freed whose address came back
      owner = plan;
      pool = std::make_shared<BufferPool>();
      std::erase_if(buffers_, [](const auto& b) { return b.second.first.expired(); });
      std::erase_if(pairs_, [](const auto& p) { return p.second->gone(); });
    }
    buffers = pool;
  }
  // Outside the lock: setting up a run binds its inputs and buffers, and other requests'
  // pairing should not wait on that.
  me->run = std::make_shared<PlannedRun>(plan, std::move(inputs),
                                         PlannedRunOptions{.buffers = buffers, .scratch = scratch_, .cancel = cancel});
  me->result = me->run->result();

  std::unique_lock lock(mutex_);
  const auto now = Clock::now();
  last_seen_[&model] = {now, plan.get()};
  // Another model seen lately whose pair with this one is still searched or staged: the mix
  // is co-served, so waiting for a partner can pay.
  bool mixed = false;
  for (const auto& [other, seen] : last_seen_)
    mixed = mixed || (other != &model && now - seen.first < std::chrono::seconds(1) && pairs_well(plan.get(), seen.second));
  for (auto it = waiting_.begin(); it != waiting_.end(); ++it) {
    if ((*it)->model == &model || !pairs_well(plan.get(), (*it)->plan.get())) continue;
    std::shared_ptr<Request> partner = *it;
    waiting_.erase(it);
    partner->taken = true;
    lock.unlock();
    run_pair(*partner, *me);
    return std::move(me->result);
  }
  if (!mixed) {
    lock.unlock();
    run_alone(*me);
    return std::move(me->result);
  }
  waiting_.push_back(me);
  const auto window = std::chrono::duration<double, std::milli>(options_.pair_window_ms);
  changed_.wait_for(lock, window, [&] { return me->taken || stop_; });
  if (me->taken) {
    // The partner's thread runs the pair; its end fulfils this run's future.
    changed_.wait(lock, [&] { return me->result.wait_for(std::chrono::seconds(0)) == std::future_status::ready; });
    return std::move(me->result);
  }
  waiting_.erase(std::find(waiting_.begin(), waiting_.end(), me));
  lock.unlock();
  run_alone(*me);
  return std::move(me->result);
}

void MtGraphPairs::run_alone(Request& r) {
  const auto t0 = Clock::now();
  std::future<void> done;
  try {
    done = submit_job(engine_, r.run);  // as the session would have run it; the run's future holds an error
  } catch (const Error&) {
    return;
  }
  // Where a search measures running apart (its plain co-execution), this request is a sample.
  std::unique_lock lock(mutex_);
  std::vector<std::shared_ptr<Pair>> measuring;
  for (auto& [key, pair] : pairs_)
    if (pair->profiling && pair->candidate == pair->apart && (key.first == r.plan.get() || key.second == r.plan.get()))
      measuring.push_back(pair);
  if (measuring.empty()) return;
  lock.unlock();
  done.wait();
  const double ms = std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
  lock.lock();
  for (const auto& pair : measuring)
    if (pair->profiling && pair->candidate == pair->apart) pair->samples.push_back(ms);
  changed_.notify_all();
}

bool MtGraphPairs::pairs_well(const Plan* a, const Plan* b) const {
  auto it = pairs_.find(a < b ? std::make_pair(a, b) : std::make_pair(b, a));
  if (it == pairs_.end() || !it->second->alive(it->first.first, it->first.second)) return true;
  const Pair& p = *it->second;
  return p.state.phase != "alone" && !(p.profiling && p.candidate == p.apart);
}

std::shared_ptr<MtGraphPairs::Pair> MtGraphPairs::pair_for(const Request& a, const Request& b) {
  const bool swap = a.plan.get() > b.plan.get();
  const Request &first = swap ? b : a, &second = swap ? a : b;
  std::lock_guard lock(mutex_);
  std::shared_ptr<Pair>& pair = pairs_[{first.plan.get(), second.plan.get()}];
  if (!pair || !pair->alive(first.plan.get(), second.plan.get())) {
    pair = std::make_shared<Pair>();
    pair->plans[0] = first.plan;
    pair->plans[1] = second.plan;
    pair->ops[0] = static_cast<int32_t>(first.plan->graph.nodes.size());
    pair->ops[1] = static_cast<int32_t>(second.plan->graph.nodes.size());
    pair->state.models = {first.model->name, second.model->name};
    pair->state.phase = "searching";
    pair->apart = {std::vector<int32_t>(static_cast<size_t>(options_.search.pointers), static_cast<int32_t>(first.plan->graph.nodes.size())),
                   std::vector<int32_t>(static_cast<size_t>(options_.search.pointers), static_cast<int32_t>(second.plan->graph.nodes.size()))};
    pair->state.rho = pair->apart;
    if (!stop_) searches_.emplace_back([this, p = pair] { search(p); });
  }
  return pair;
}

void MtGraphPairs::run_pair(Request& a, Request& b) {
  std::shared_ptr<Pair> pair = pair_for(a, b);
  const bool swap = a.plan.get() > b.plan.get();  // pair_for's order
  Request &first = swap ? b : a, &second = swap ? a : b;
  PointerMatrix rho;
  std::shared_ptr<const StagedDag> dag;
  {
    std::lock_guard lock(mutex_);
    rho = pair->profiling ? pair->candidate : pair->state.rho;
    dag = pair->dags[rho];
  }
  if (!dag) {
    try {
      dag = make_staged_dag({first.plan, second.plan}, rho);
    } catch (...) {  // never expected: the runs end with the error rather than never
      first.run->finished(std::current_exception());
      second.run->finished(std::current_exception());
      std::lock_guard lock(mutex_);
      changed_.notify_all();
      return;
    }
    std::lock_guard lock(mutex_);
    pair->dags[rho] = dag;
  }
  // The compound task stops at the later of the two deadlines (none if either has none):
  // neither request is stopped before its own; the earlier one answers 504 when its own wait
  // ends (InferenceServer::infer).
  const CancelToken cancel = first.cancel.deadline() > second.cancel.deadline() ? first.cancel : second.cancel;
  const auto t0 = Clock::now();
  try {
    submit_job(engine_, std::make_shared<StagedJob>(dag, std::vector<std::shared_ptr<PlannedRun>>{first.run, second.run}, cancel)).wait();
  } catch (...) {
    // Each run's future holds the error (StagedJob::finished).
  }
  const double ms = std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
  std::lock_guard lock(mutex_);
  ++pair->state.pair_runs;
  if (pair->profiling && rho == pair->candidate) pair->samples.push_back(ms);
  changed_.notify_all();
}

void MtGraphPairs::search(std::shared_ptr<Pair> pair) {
  const std::vector<int32_t> ops = {pair->ops[0], pair->ops[1]};
  auto cost = [&](const PointerMatrix& rho) {
    std::unique_lock lock(mutex_);
    pair->candidate = rho;
    pair->samples.clear();
    pair->profiling = true;
    changed_.wait(lock, [&] {
      return stop_ || pair->gone() || pair->samples.size() >= static_cast<size_t>(std::max(1, options_.profile_runs));
    });
    pair->profiling = false;
    if (stop_ || pair->gone()) throw Stopping{};  // the server stops, or a model of the pair was unloaded
    ++pair->state.schedules_profiled;
    return median(pair->samples);
  };
  try {
    const MtGraphResult found = search_pointer_matrix(ops, options_.search, cost);
    std::lock_guard lock(mutex_);
    MtGraphPairState& s = pair->state;
    s.rho = found.best.rho;
    s.phase = found.verified ? "in force" : "alone";
    s.plain_ms = found.plain_cost > 0 ? found.plain_cost : found.start.cost;
    s.staged_ms = found.verified_cost > 0 ? found.verified_cost : found.best.cost;
    s.gain = found.verified && s.staged_ms > 0 ? s.plain_ms / s.staged_ms : 1;
  } catch (const Stopping&) {
  }
}

std::vector<MtGraphPairState> MtGraphPairs::pairs() const {
  std::lock_guard lock(mutex_);
  std::vector<MtGraphPairState> out;
  for (const auto& [key, pair] : pairs_)
    if (!pair->gone()) out.push_back(pair->state);
  return out;
}

}  // namespace grove::serve
