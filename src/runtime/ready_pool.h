#pragma once
// The ready pool (paper §3.3): a matrix of FIFO queues, one row per worker and one column per
// priority level. A worker pushes to its own row and pops from it first, lowest column first,
// then steals from the other rows; so workers rarely touch the same queue. Each queue has its
// own small lock (no global lock); an atomic size lets a scan skip empty queues unlocked.
// Idle workers park on the pool's Parker; pushes wake them.
#include <atomic>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <span>

#include "runtime/parker.h"
#include "grove/priority_policy.h"

namespace grove {

struct JobState;

// A tile whose parents have all finished, waiting for a worker. `column` is its priority
// column, computed by the pusher with ReadyPool::column_for(): column 0 holds urgent jobs'
// tiles, which every pop looks for in all rows first; the policy's columns follow.
struct ReadyTile {
  JobState* job = nullptr;
  int32_t tile = -1;
  int32_t column = 0;
  int32_t row = 0;  // the pool row a pusher sorts it to (DagView::place); not read by the pool
};

// Where a pop starts looking. The default (own row first, columns in priority order, oldest
// first) is the paper's policy; the adversarial test build randomises it.
struct PopOrder {
  int row_offset = 0;     // rows are scanned from (row + row_offset) on, wrapping around
  int column_offset = 0;  // columns are scanned from column_offset on, wrapping around
  bool newest_first = false;
};

class ReadyPool {
 public:
  ReadyPool(int rows, PriorityPolicy policy);

  int rows() const { return rows_; }
  int columns() const { return columns_; }
  // The column of a tile at `depth`: the policy's column, after the urgent column 0.
  int column_for(int32_t depth, int32_t max_depth, bool urgent = false) const;

  // Adds ready tiles to `row`, taking each touched queue's lock once, then wakes up to
  // tiles.size() parked workers.
  void push(int row, std::span<const ReadyTile> tiles);
  // Whether any urgent tile waits (a hint, which may be stale): one load, as workers ask
  // it on every followed tile.
  bool urgent_waiting() const { return urgent_waiting_.load(std::memory_order_relaxed) > 0; }
  // Takes one tile, scanning `row` first; false when every queue looked empty.
  bool try_pop(int row, ReadyTile& out, const PopOrder& order = {});

  Parker& parker() { return parker_; }

 private:
  struct alignas(64) Queue {
    std::mutex mutex;
    std::deque<ReadyTile> tiles;
    std::atomic<int64_t> size{0};  // a hint for unlocked scans; exact under the lock
  };
  Queue& queue(int row, int column) { return queues_[static_cast<size_t>(row) * (columns_ + 1) + column]; }
  bool try_pop_queue(Queue& q, ReadyTile& out, bool newest_first);

  std::atomic<int64_t> urgent_waiting_{0};  // tiles in column 0 of all rows
  int rows_;
  int columns_;
  PriorityColumnFn column_fn_;
  std::unique_ptr<Queue[]> queues_;
  Parker parker_;
};

}  // namespace grove
