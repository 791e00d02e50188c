#include "runtime/worker.h"

#include <algorithm>
#include <chrono>
#include <utility>

#include "runtime/job_state.h"

namespace grove {

namespace {

using Clock = std::chrono::steady_clock;

// Runs `work` (a tile, or a piece of one) as this worker: traced, stretched by its slowdown.
template <class Work>
void timed(WorkerContext& w, JobState& job, int32_t tile, Work&& work) {
  const bool tracing = w.tracer.on();
  const bool slowed = w.slowdown > 1.0;
  Tracer::Clock::time_point start;
  if (tracing || slowed) start = Tracer::Clock::now();
  try {
    work();
  } catch (...) {
    job.fail(std::current_exception());
  }
  if (slowed) {
    auto until = start + (Tracer::Clock::now() - start) * w.slowdown;
    while (Tracer::Clock::now() < until) cpu_relax();
  }
  if (tracing) w.tracer.record(w.id, job, tile, start, Tracer::Clock::now());
}

void run_pieces(WorkerContext& w, JobState& job, int32_t tile, const HelpClaim& c) {
  if constexpr (kAdversarial) w.adversary.delay();
  if (!job.cancelled()) timed(w, job, tile, [&] { job.job->run_pieces(tile, c.first, c.end, c.pieces, w.id); });
  HelpBoard::done(c);
}

// A tile in pieces: offered on this worker's slot, its pieces run here until none is left to
// take, then a wait for those other workers took (the last takes are one piece each, a few
// microseconds).
void run_in_pieces(WorkerContext& w, JobState& job, int32_t tile, int pieces) {
  try {
    job.job->begin_pieces(tile, w.id);
  } catch (...) {
    job.fail(std::current_exception());
    return;
  }
  HelpSlot& slot = w.help->slot(w.id);
  HelpBoard::offer(slot, ++w.help_generation, &job, tile, pieces);
  HelpClaim c;
  while (HelpBoard::take(slot, c)) run_pieces(w, job, tile, c);
  while (!HelpBoard::all_done(slot, pieces)) cpu_relax();
  HelpBoard::withdraw(slot);
  try {
    job.job->end_pieces(tile, w.id);
  } catch (...) {
    job.fail(std::current_exception());
  }
}

void run_one(WorkerContext& w, JobState& job, int32_t tile) {
  if constexpr (kAdversarial) w.adversary.delay();
  const int pieces = w.help && !job.cancelled() ? std::min(job.job->pieces(tile), kMaxTilePieces) : 1;
  if (pieces > 1) run_in_pieces(w, job, tile, pieces);
  else timed(w, job, tile, [&] { job.job->run_tile(tile, w.id); });
  if constexpr (kAdversarial) w.adversary.delay();
}

// With nothing in the pool: a piece of a tile another worker is running, if one is offered.
bool help_once(WorkerContext& w) {
  if (!w.help || (w.roster && w.roster->benched(w.id))) return false;
  const int slots = w.help->size();
  for (int i = 1; i < slots; ++i) {
    HelpSlot& slot = w.help->slot((w.id + i) % slots);
    HelpClaim c;
    if (!HelpBoard::take(slot, c)) continue;
    // The offer's fields are stable until this piece is done (help_board.h).
    JobState& job = *slot.job;
    const int32_t tile = slot.tile;
    Clock::time_point start = w.counters ? Clock::now() : Clock::time_point{};
    run_pieces(w, job, tile, c);
    if (w.counters) {
      auto ns = std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now() - start).count();
      w.counters->busy_ns.store(w.counters->busy_ns.load(std::memory_order_relaxed) + static_cast<uint64_t>(ns),
                                std::memory_order_relaxed);
    }
    return true;
  }
  return false;
}

// Algorithm 1, lines 11-20: runs `ready` (unless its job failed or was cancelled), releases its
// children, and returns true with `next` set to a child this worker should run now.
bool run_and_release(WorkerContext& w, const ReadyTile& ready, ReadyTile& next) {
  JobState& job = *ready.job;
  if (!job.cancelled()) run_one(w, job, ready.tile);

  const DagView& dag = job.dag;
  const size_t t = static_cast<size_t>(ready.tile);
  const bool placed = !dag.place.empty() && w.shares;
  int32_t follow = -1;
  bool follow_is_mine = false;
  w.batch.clear();
  auto ready_tile = [&](int32_t child) {
    return ReadyTile{&job, child, w.pool.column_for(dag.depth[static_cast<size_t>(child)], job.max_depth, job.urgent)};
  };
  for (int64_t e = dag.child_begin[t]; e < dag.child_begin[t + 1]; ++e) {
    int32_t child = dag.children[static_cast<size_t>(e)];
    if (!job.parent_finished(child)) continue;
    // Follow the first child in this worker's share of the places, else the first child.
    const bool mine = placed && w.shares->place_is_mine(dag.place[static_cast<size_t>(child)], w.row, w.caller_row);
    if (follow < 0 || (mine && !follow_is_mine)) {
      if (follow >= 0) w.batch.push_back(ready_tile(follow));
      follow = child;
      follow_is_mine = mine;
    } else {
      w.batch.push_back(ready_tile(child));
    }
  }
  if constexpr (kAdversarial) {
    if (!w.batch.empty() && (w.adversary.next() & 1)) {
      std::swap(follow, w.batch[w.adversary.below(static_cast<uint32_t>(w.batch.size()))].tile);
      for (ReadyTile& r : w.batch)
        r.column = w.pool.column_for(dag.depth[static_cast<size_t>(r.tile)], job.max_depth, job.urgent);
    }
  }
  if (placed) {
    // Each child to its share's row, one push per row.
    for (ReadyTile& r : w.batch) r.row = w.shares->row_for_place(dag.place[static_cast<size_t>(r.tile)], w.caller_row);
    std::sort(w.batch.begin(), w.batch.end(), [](const ReadyTile& a, const ReadyTile& b) { return a.row < b.row; });
    for (size_t i = 0; i < w.batch.size();) {
      size_t j = i;
      while (j < w.batch.size() && w.batch[j].row == w.batch[i].row) ++j;
      w.pool.push(w.batch[i].row, std::span<const ReadyTile>(w.batch.data() + i, j - i));
      i = j;
    }
  } else {
    w.pool.push(w.row, w.batch);
  }
  // A followed child is unfinished, so this cannot be the job's last tile when follow >= 0.
  if (job.tile_finished()) JobState::complete(&job);
  if (follow < 0) return false;
  next = ReadyTile{&job, follow, 0};
  return true;
}

bool try_pop(WorkerContext& w, ReadyTile& out) {
  if constexpr (kAdversarial) return w.pool.try_pop(w.row, out, w.adversary.pop_order(w.pool.rows(), w.pool.columns()));
  return w.pool.try_pop(w.row, out);
}

// A popped tile this worker may run. benched() was read before the spin began, and run()'s
// caller may have taken this worker's place since: then the tile goes back to the pool (N
// threads, not N + 1, share N cores).
bool keep_popped(WorkerContext& w, ReadyTile& out) {
  if (!w.roster || !w.roster->benched(w.id)) return true;
  w.pool.push(w.row, {&out, 1});
  return false;
}

// Algorithm 1, line 9, with idling: spin a little, then park until a push or `quit`.
bool acquire(WorkerContext& w, ReadyTile& out, const std::atomic<bool>& quit) {
  using Clock = std::chrono::steady_clock;
  Parker& parker = w.pool.parker();
  Clock::time_point idle_since{};  // the first empty spin while a job is in flight
  for (;;) {
    if (w.roster && w.roster->benched(w.id)) {
      // A push may have woken this worker rather than another: pass the wake on first.
      parker.notify(1);
      w.roster->wait_while_benched(w.id, quit);
      if (quit.load(std::memory_order_acquire)) return false;
      continue;
    }
    // quit before pop: run()'s caller must return once its job is done, even while other
    // jobs keep the pool busy.
    bool put_back = false;
    for (int scan = 0; scan < kSpinScans && !put_back; ++scan) {
      if (quit.load(std::memory_order_acquire)) return false;
      if (try_pop(w, out)) {
        if (keep_popped(w, out)) return true;
        put_back = true;
        continue;
      }
      if (help_once(w)) {
        idle_since = {};
        scan = -1;  // busy again: a full spin before parking
        continue;
      }
      for (int i = 0; i < kPausesPerScan; ++i) cpu_relax();
    }
    if (put_back) continue;  // benched: wait at the top
    // A job in flight pushes its next tiles within microseconds, sooner than a parked core
    // wakes up: keep spinning (benched and quit are checked on each round).
    if (w.busy_spin_ns > 0 && w.jobs && w.jobs->busy()) {
      const Clock::time_point now = Clock::now();
      if (idle_since == Clock::time_point{}) idle_since = now;
      if (now - idle_since < std::chrono::nanoseconds(w.busy_spin_ns)) continue;
    }
    idle_since = {};
    uint32_t epoch = parker.prepare();
    if (quit.load(std::memory_order_acquire)) {
      parker.cancel();
      return false;
    }
    if (try_pop(w, out)) {
      parker.cancel();
      if (keep_popped(w, out)) return true;
      continue;
    }
    parker.wait(epoch);
  }
}

}  // namespace

void work_until(WorkerContext& w, const std::atomic<bool>& quit) {
  using Clock = std::chrono::steady_clock;
  ReadyTile tile;
  while (acquire(w, tile, quit)) {
    // One clock read per pop, not per tile: a followed chain is timed as one busy stretch.
    Clock::time_point start = w.counters ? Clock::now() : Clock::time_point{};
    uint64_t tiles = 1;
    ReadyTile next;
    while (run_and_release(w, tile, next)) {
      // Benched mid-path (set_workers shrank the engine), or an urgent job's tiles wait while
      // this path is an ordinary job's: the child goes back to the pool, and the next pop
      // takes the urgent tiles first.
      if ((w.roster && w.roster->benched(w.id)) || (!next.job->urgent && w.pool.urgent_waiting())) {
        next.column = w.pool.column_for(next.job->dag.depth[static_cast<size_t>(next.tile)], next.job->max_depth,
                                        next.job->urgent);
        w.pool.push(w.row, {&next, 1});
        break;
      }
      tile = next;
      ++tiles;
    }
    if (w.counters) {
      auto ns = std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now() - start).count();
      // A slot has one writer at a time: no read-modify-write needed.
      w.counters->tiles.store(w.counters->tiles.load(std::memory_order_relaxed) + tiles, std::memory_order_relaxed);
      w.counters->busy_ns.store(w.counters->busy_ns.load(std::memory_order_relaxed) + static_cast<uint64_t>(ns),
                                std::memory_order_relaxed);
    }
  }
}

namespace {

// Runs urgent tiles from the pool, each with the path it readies, while any wait.
void run_urgent(WorkerContext& w) {
  ReadyTile tile;
  while (w.pool.urgent_waiting() && try_pop(w, tile)) {
    ReadyTile next;
    while (run_and_release(w, tile, next)) tile = next;
  }
}

}  // namespace

void run_alone(WorkerContext& w, JobState& job) {
  const DagView& dag = job.dag;
  const int64_t tiles = static_cast<int64_t>(dag.n_parents.size());
  std::vector<int32_t>& ready = w.alone_ready;
  ready.assign(dag.sources.rbegin(), dag.sources.rend());  // the first source on top
  Clock::time_point start = w.counters ? Clock::now() : Clock::time_point{};
  while (!ready.empty()) {
    // Urgent jobs' tiles go first, as the pool would hand them out (Job::urgent): this thread
    // runs them, and the paths they ready, between its own tiles. On one thread no one else
    // would until the job ends.
    if (!job.urgent && w.pool.urgent_waiting()) run_urgent(w);
    const int32_t tile = ready.back();
    ready.pop_back();
    if (!job.cancelled()) run_one(w, job, tile);
    const size_t t = static_cast<size_t>(tile);
    // Children readied here go on top in reverse, so the first runs next.
    const size_t first_ready = ready.size();
    for (int64_t e = dag.child_begin[t]; e < dag.child_begin[t + 1]; ++e) {
      const int32_t child = dag.children[static_cast<size_t>(e)];
      if (job.parent_finished(child)) ready.push_back(child);
    }
    std::reverse(ready.begin() + static_cast<std::ptrdiff_t>(first_ready), ready.end());
    if (job.tile_finished()) {
      JobState::complete(&job);  // the last tile: nothing is left on `ready`
      break;
    }
  }
  if (w.counters) {
    auto ns = std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now() - start).count();
    w.counters->tiles.store(w.counters->tiles.load(std::memory_order_relaxed) + static_cast<uint64_t>(tiles),
                            std::memory_order_relaxed);
    w.counters->busy_ns.store(w.counters->busy_ns.load(std::memory_order_relaxed) + static_cast<uint64_t>(ns),
                              std::memory_order_relaxed);
  }
}

}  // namespace grove
