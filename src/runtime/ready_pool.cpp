#include "runtime/ready_pool.h"

#include <algorithm>
#include <string>

#include "graph/error.h"

namespace grove {

ReadyPool::ReadyPool(int rows, PriorityPolicy policy)
    : rows_(rows), columns_(policy.columns), column_fn_(policy.column) {
  if (rows < 1) throw Error("ready pool: needs at least one row, got " + std::to_string(rows));
  // One more column for urgent jobs; push() keeps a 64-bit mask of columns.
  if (columns_ < 1 || columns_ > 63)
    throw Error("ready pool: priority columns must be in 1..63, got " + std::to_string(columns_));
  if (!column_fn_) throw Error("ready pool: the priority policy has no column function");
  queues_ = std::make_unique<Queue[]>(static_cast<size_t>(rows_) * (columns_ + 1));
}

int ReadyPool::column_for(int32_t depth, int32_t max_depth, bool urgent) const {
  return urgent ? 0 : 1 + std::clamp(column_fn_(depth, max_depth, columns_), 0, columns_ - 1);
}

void ReadyPool::push(int row, std::span<const ReadyTile> tiles) {
  if (tiles.empty()) return;
  // One lock per distinct column in the batch; batches are small, so a mask beats sorting.
  uint64_t pending = 0;
  for (const ReadyTile& t : tiles) pending |= uint64_t{1} << t.column;
  while (pending != 0) {
    int column = __builtin_ctzll(pending);
    pending &= pending - 1;
    Queue& q = queue(row, column);
    std::lock_guard lock(q.mutex);
    int64_t added = 0;
    for (const ReadyTile& t : tiles)
      if (t.column == column) {
        q.tiles.push_back(t);
        ++added;
      }
    if (column == 0) urgent_waiting_.fetch_add(added, std::memory_order_relaxed);
    q.size.store(static_cast<int64_t>(q.tiles.size()), std::memory_order_relaxed);
  }
  parker_.notify(static_cast<int>(std::min<size_t>(tiles.size(), 1 << 20)));
}

bool ReadyPool::try_pop_queue(Queue& q, ReadyTile& out, bool newest_first) {
  if (q.size.load(std::memory_order_relaxed) == 0) return false;
  std::lock_guard lock(q.mutex);
  if (q.tiles.empty()) return false;
  if (newest_first) {
    out = q.tiles.back();
    q.tiles.pop_back();
  } else {
    out = q.tiles.front();
    q.tiles.pop_front();
  }
  q.size.store(static_cast<int64_t>(q.tiles.size()), std::memory_order_relaxed);
  return true;
}

bool ReadyPool::try_pop(int row, ReadyTile& out, const PopOrder& order) {
  if (urgent_waiting())
    for (int r = 0; r < rows_; ++r)
      if (try_pop_queue(queue((row + order.row_offset + r) % rows_, 0), out, order.newest_first)) {
        urgent_waiting_.fetch_sub(1, std::memory_order_relaxed);
        return true;
      }
  for (int r = 0; r < rows_; ++r) {
    int victim = (row + order.row_offset + r) % rows_;
    for (int c = 0; c < columns_; ++c) {
      int column = 1 + (order.column_offset + c) % columns_;
      if (try_pop_queue(queue(victim, column), out, order.newest_first)) return true;
    }
  }
  return false;
}

}  // namespace grove
