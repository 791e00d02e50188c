#include "sim/simulator.h"

#include <algorithm>
#include <deque>
#include <limits>
#include <string>

#include "graph/error.h"

namespace grove {

namespace {

// The ready pool's queues, as in runtime/ready_pool.h, without the locks.
class SimPool {
 public:
  SimPool(int rows, int columns)
      : rows_(rows), columns_(columns), queues_(static_cast<size_t>(rows) * columns), row_size_(rows, 0) {}

  void push(int row, int column, int32_t tile) {
    queues_[static_cast<size_t>(row) * columns_ + column].push_back(tile);
    ++row_size_[row];
    ++size_;
  }

  // Own row first, then the next rows; within a row the lowest column, oldest first.
  bool pop(int row, int32_t& tile, bool& stolen) {
    if (size_ == 0) return false;
    for (int r = 0; r < rows_; ++r) {
      int victim = (row + r) % rows_;
      if (row_size_[victim] == 0) continue;
      for (int c = 0; c < columns_; ++c) {
        auto& q = queues_[static_cast<size_t>(victim) * columns_ + c];
        if (q.empty()) continue;
        tile = q.front();
        q.pop_front();
        --row_size_[victim];
        --size_;
        stolen = r != 0;
        return true;
      }
    }
    return false;
  }

 private:
  int rows_, columns_;
  std::vector<std::deque<int32_t>> queues_;
  std::vector<int64_t> row_size_;
  int64_t size_ = 0;
};

struct SimCore {
  int32_t tile = -1;        // running; -1: idle
  double overhead_left = 0; // pool time before the tile starts (no memory traffic)
  double cross = 0;         // then reading other cores' output, before the tile's own work
  double work_left = 0;     // the tile's time alone, still to run
  double demand = 0;        // bytes per ns while the tile runs alone
  double pending = 0;       // pool time owed by an idle core (its last push), paid before its next tile
  double idle_since = 0;
};

constexpr double kDone = 1e-9;  // ns: float leftovers below this count as finished

}  // namespace

SimResult simulate(const TileGraph& g, const std::vector<double>& tile_ns, const std::vector<double>& tile_bytes,
                   const SimMachine& m, const std::vector<double>& input_bytes) {
  const int32_t n = g.size();
  if (static_cast<int32_t>(tile_ns.size()) != n)
    throw Error("simulate: " + std::to_string(tile_ns.size()) + " tile times for a graph of " + std::to_string(n) + " tiles");
  const bool limited = m.bandwidth_bytes_per_ns > 0;
  if (limited && static_cast<int32_t>(tile_bytes.size()) != n)
    throw Error("simulate: " + std::to_string(tile_bytes.size()) + " tile byte counts for a graph of " + std::to_string(n) + " tiles");
  if (m.cores < 1) throw Error("simulate: cores must be at least 1");
  const bool crossing = m.cross_ns_per_byte > 0 && m.cores > 1 && !input_bytes.empty();
  if (crossing && static_cast<int32_t>(input_bytes.size()) != n)
    throw Error("simulate: " + std::to_string(input_bytes.size()) + " tile input byte counts for a graph of " + std::to_string(n) + " tiles");
  // Where each tile ran, as shares per core: all on its core for a tile with work; for a
  // no-work tile (a barrier, a view) the mean of its parents', so the tiles after a barrier
  // know where the op before it ran.
  std::vector<int32_t> parents_begin, parents;
  std::vector<std::vector<float>> ran_on;
  if (crossing) {
    std::vector<int32_t> at(static_cast<size_t>(n) + 1, 0);
    for (int32_t t = 0; t < n; ++t)
      for (int64_t e = g.child_begin[t]; e < g.child_begin[t + 1]; ++e) ++at[static_cast<size_t>(g.children[e]) + 1];
    for (int32_t t = 0; t < n; ++t) at[t + 1] += at[t];
    parents_begin = at;
    parents.resize(static_cast<size_t>(at[n]));
    for (int32_t t = 0; t < n; ++t)
      for (int64_t e = g.child_begin[t]; e < g.child_begin[t + 1]; ++e) parents[static_cast<size_t>(at[g.children[e]]++)] = t;
    ran_on.resize(static_cast<size_t>(n));
  }
  const int columns = std::clamp(m.priority.columns, 1, 64);
  int32_t max_depth = 0;
  for (int32_t d : g.depth) max_depth = std::max(max_depth, d);
  auto column_of = [&](int32_t t) {
    return std::clamp(m.priority.column(g.depth[static_cast<size_t>(t)], max_depth, columns), 0, columns - 1);
  };

  SimResult r;
  r.cores = m.cores;
  SimPool pool(m.cores, columns);
  std::vector<int32_t> parents_left(g.n_parents.begin(), g.n_parents.end());
  std::vector<SimCore> cores(static_cast<size_t>(m.cores));
  // Worker 0 is run()'s caller, awake at submit; the others have parked since the last run.
  for (size_t c = 1; c < cores.size(); ++c) cores[c].idle_since = -std::numeric_limits<double>::infinity();
  for (size_t i = 0; i < g.sources.size(); ++i)
    pool.push(static_cast<int>(i % static_cast<size_t>(m.cores)), column_of(g.sources[i]), g.sources[i]);

  double now = 0;
  int idle = m.cores;
  int64_t finished = 0;
  auto pool_cost = [&](double base) { return base * (1.0 + m.contention * std::max(0, idle - 1)); };
  auto start = [&](int c, int32_t tile, double overhead) {
    SimCore& core = cores[static_cast<size_t>(c)];
    if (core.tile < 0) --idle;
    core.tile = tile;
    core.overhead_left = overhead;
    core.work_left = tile_ns[static_cast<size_t>(tile)] * (c < m.slow_cores ? std::max(m.slow_factor, 1.0) : 1.0);
    core.demand = limited && core.work_left > 0 ? tile_bytes[static_cast<size_t>(tile)] / core.work_left : 0;
    core.cross = 0;
    if (!crossing) return;
    std::vector<float>& share = ran_on[static_cast<size_t>(tile)];
    share.assign(static_cast<size_t>(m.cores), 0.0f);
    const int32_t first = parents_begin[tile], last = parents_begin[tile + 1];
    if (tile_ns[static_cast<size_t>(tile)] <= 0) {
      for (int32_t k = first; k < last; ++k)
        for (int x = 0; x < m.cores; ++x)
          share[static_cast<size_t>(x)] += ran_on[static_cast<size_t>(parents[k])][static_cast<size_t>(x)] / static_cast<float>(last - first);
      return;
    }
    share[static_cast<size_t>(c)] = 1.0f;
    double here = 0;
    for (int32_t k = first; k < last; ++k) here += ran_on[static_cast<size_t>(parents[k])][static_cast<size_t>(c)];
    const double elsewhere = last > first ? 1.0 - here / (last - first) : 0.0;
    core.cross = elsewhere * input_bytes[static_cast<size_t>(tile)] * m.cross_ns_per_byte;
  };
  auto try_pop = [&](int c) {
    SimCore& core = cores[static_cast<size_t>(c)];
    int32_t tile;
    bool stolen = false;
    if (!pool.pop(c, tile, stolen)) return;
    ++r.pops;
    r.steals += stolen;
    double overhead = core.pending + pool_cost(m.pop_ns);
    if (now - core.idle_since > m.spin_ns) overhead += m.wake_ns;
    core.pending = 0;
    start(c, tile, overhead);
  };
  auto finish = [&](int c) {
    SimCore& core = cores[static_cast<size_t>(c)];
    const size_t t = static_cast<size_t>(core.tile);
    ++finished;
    int32_t follow = -1;
    bool pushed = false;
    for (int64_t e = g.child_begin[t]; e < g.child_begin[t + 1]; ++e) {
      int32_t child = g.children[static_cast<size_t>(e)];
      if (--parents_left[static_cast<size_t>(child)] != 0) continue;
      if (follow < 0) {
        follow = child;
      } else {
        pool.push(c, column_of(child), child);
        pushed = true;
      }
    }
    double push = pushed ? pool_cost(m.push_ns) : 0;
    if (follow >= 0) {
      ++r.follows;
      start(c, follow, push);
      return;
    }
    core.tile = -1;
    ++idle;
    core.pending = push;
    core.idle_since = now;
    try_pop(c);
  };

  for (;;) {
    for (int c = 0; c < m.cores && idle > 0; ++c)
      if (cores[static_cast<size_t>(c)].tile < 0) try_pop(c);
    if (idle == m.cores) break;
    double demand = 0;
    for (const SimCore& core : cores)
      if (core.tile >= 0 && core.overhead_left <= 0 && core.cross <= 0) demand += core.demand;
    const double speed = limited && demand > m.bandwidth_bytes_per_ns ? m.bandwidth_bytes_per_ns / demand : 1.0;
    double dt = std::numeric_limits<double>::infinity();
    for (const SimCore& core : cores) {
      if (core.tile < 0) continue;
      dt = std::min(dt, core.overhead_left > 0 ? core.overhead_left : core.cross > 0 ? core.cross : core.work_left / speed);
    }
    now += dt;
    for (SimCore& core : cores) {
      if (core.tile < 0) continue;
      if (core.overhead_left > 0) {
        core.overhead_left -= dt;
        r.pool_ns += dt;
      } else if (core.cross > 0) {
        core.cross = core.cross - dt <= kDone ? 0 : core.cross - dt;
        r.tile_ns += dt;
        r.cross_ns += dt;
      } else {
        core.work_left -= dt * speed;
        r.tile_ns += dt;
        r.stretch_ns += dt * (1.0 - speed);
      }
    }
    for (int c = 0; c < m.cores; ++c) {
      SimCore& core = cores[static_cast<size_t>(c)];
      if (core.tile < 0) continue;
      if (core.overhead_left > 0 && core.overhead_left <= kDone) core.overhead_left = 0;
      if (core.overhead_left <= 0 && core.cross <= 0 && core.work_left <= kDone) finish(c);
    }
  }
  if (finished != n)
    throw Error("simulate: " + std::to_string(n - finished) + " of " + std::to_string(n) +
                " tiles never became ready (the graph has a cycle or a wrong parent count)");
  r.makespan_ns = now;
  return r;
}

}  // namespace grove
