#pragma once
// Synthetic tile DAGs for the runtime tests: built from an edge list into the CSR form the
// engine reads, with depths and sources derived the way the planner derives them.
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <random>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "runtime/engine.h"

namespace grove::test {

struct TestDag {
  std::string name;
  std::vector<int32_t> n_parents;
  std::vector<int64_t> child_begin;
  std::vector<int32_t> children;
  std::vector<int32_t> depth;
  std::vector<int32_t> sources;
  std::vector<std::vector<int32_t>> parents;  // per tile, ascending: for the tests' checks
  std::vector<uint16_t> place;                // DagView::place, or empty

  int32_t size() const { return static_cast<int32_t>(n_parents.size()); }
  DagView view() const { return {n_parents, child_begin, children, depth, sources, place}; }
};

// Edges (from, to) must go from a lower to a higher tile index (a topological numbering).
inline TestDag make_dag(std::string name, int32_t tiles, std::vector<std::pair<int32_t, int32_t>> edges) {
  std::sort(edges.begin(), edges.end());
  edges.erase(std::unique(edges.begin(), edges.end()), edges.end());
  TestDag d;
  d.name = std::move(name);
  d.n_parents.assign(static_cast<size_t>(tiles), 0);
  d.child_begin.assign(static_cast<size_t>(tiles) + 1, 0);
  d.depth.assign(static_cast<size_t>(tiles), 0);
  d.parents.resize(static_cast<size_t>(tiles));
  for (auto [from, to] : edges) {
    ++d.child_begin[static_cast<size_t>(from) + 1];
    ++d.n_parents[static_cast<size_t>(to)];
    d.parents[static_cast<size_t>(to)].push_back(from);
  }
  for (int32_t t = 0; t < tiles; ++t) d.child_begin[t + 1] += d.child_begin[t];
  for (auto [from, to] : edges) d.children.push_back(to);  // edges are sorted by `from`
  for (int32_t t = 0; t < tiles; ++t) {
    for (int32_t p : d.parents[static_cast<size_t>(t)]) d.depth[t] = std::max(d.depth[t], d.depth[p] + 1);
    if (d.n_parents[t] == 0) d.sources.push_back(t);
  }
  return d;
}

inline TestDag single_tile() { return make_dag("single", 1, {}); }

inline TestDag chain(int32_t n) {
  std::vector<std::pair<int32_t, int32_t>> e;
  for (int32_t i = 0; i + 1 < n; ++i) e.emplace_back(i, i + 1);
  return make_dag("chain" + std::to_string(n), n, e);
}

inline TestDag diamond() { return make_dag("diamond", 4, {{0, 1}, {0, 2}, {1, 3}, {2, 3}}); }

// One source, `width` middle tiles, one sink.
inline TestDag fan_out_in(int32_t width) {
  std::vector<std::pair<int32_t, int32_t>> e;
  for (int32_t i = 1; i <= width; ++i) {
    e.emplace_back(0, i);
    e.emplace_back(i, width + 1);
  }
  return make_dag("fan" + std::to_string(width), width + 2, e);
}

// `layers` layers of `width` tiles; each tile depends on 1..fan_in random tiles of the layer
// before (and sometimes on one from two layers back, like a residual connection).
inline TestDag random_layered(uint32_t seed, int32_t layers, int32_t width, int32_t fan_in) {
  std::mt19937 rng(seed);
  std::vector<std::pair<int32_t, int32_t>> e;
  for (int32_t l = 1; l < layers; ++l) {
    for (int32_t i = 0; i < width; ++i) {
      int32_t tile = l * width + i;
      int32_t parents = 1 + static_cast<int32_t>(rng() % static_cast<uint32_t>(fan_in));
      for (int32_t k = 0; k < parents; ++k) e.emplace_back((l - 1) * width + static_cast<int32_t>(rng() % static_cast<uint32_t>(width)), tile);
      if (l >= 2 && rng() % 4 == 0) e.emplace_back((l - 2) * width + static_cast<int32_t>(rng() % static_cast<uint32_t>(width)), tile);
    }
  }
  return make_dag("layered" + std::to_string(seed), layers * width, e);
}

inline std::vector<TestDag> all_shapes() {
  return {single_tile(), chain(50), diamond(), fan_out_in(64), random_layered(1, 12, 16, 3),
          random_layered(2, 30, 5, 2), random_layered(3, 4, 40, 6), make_dag("empty", 0, {})};
}

// A job that checks the engine's promises: each tile runs exactly once and only after all its
// parents finished. Violations are counted, not asserted, so worker threads never throw.
class CheckingJob : public Job {
 public:
  explicit CheckingJob(const TestDag& dag, int worker_slots, bool urgent = false)
      : dag_(dag), worker_slots_(worker_slots), urgent_(urgent), runs_(new std::atomic<int32_t>[dag.n_parents.size()]()),
        finished_(new std::atomic<bool>[dag.n_parents.size()]()) {}

  DagView dag() const override { return dag_.view(); }
  bool urgent() const override { return urgent_; }
  void run_tile(int32_t tile, int worker) override {
    if (tile < 0 || tile >= dag_.size() || worker < 0 || worker >= worker_slots_) {
      bad_arguments_.fetch_add(1);
      return;
    }
    for (int32_t p : dag_.parents[static_cast<size_t>(tile)])
      if (!finished_[p].load(std::memory_order_acquire)) early_.fetch_add(1);
    runs_[tile].fetch_add(1);
    finished_[tile].store(true, std::memory_order_release);
  }

  int32_t tiles_not_run_once() const {
    int32_t wrong = 0;
    for (int32_t t = 0; t < dag_.size(); ++t) wrong += runs_[t].load() != 1;
    return wrong;
  }
  int32_t early() const { return early_.load(); }
  int32_t bad_arguments() const { return bad_arguments_.load(); }

 private:
  const TestDag& dag_;
  int worker_slots_;
  bool urgent_;
  std::unique_ptr<std::atomic<int32_t>[]> runs_;
  std::unique_ptr<std::atomic<bool>[]> finished_;
  std::atomic<int32_t> early_{0};
  std::atomic<int32_t> bad_arguments_{0};
};

// Counts how many threads are inside run_tile at once.
class ConcurrencyJob : public Job {
 public:
  explicit ConcurrencyJob(const TestDag& dag) : dag_(dag) {}
  DagView dag() const override { return dag_.view(); }
  void run_tile(int32_t, int) override {
    int32_t now = inside_.fetch_add(1) + 1;
    int32_t seen = most_.load();
    while (now > seen && !most_.compare_exchange_weak(seen, now)) {
    }
    std::this_thread::sleep_for(std::chrono::microseconds(500));
    inside_.fetch_sub(1);
  }
  int32_t most() const { return most_.load(); }

 private:
  const TestDag& dag_;
  std::atomic<int32_t> inside_{0}, most_{0};
};

}  // namespace grove::test
