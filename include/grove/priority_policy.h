#pragma once
// How the ready pool orders ready tiles: the column a tile goes to in its worker's row of
// queues. Workers scan columns from 0 up, so a smaller column runs sooner. The paper keys it on
// depth, shallower first, which lets workers follow long paths instead of fanning out.
#include <cstdint>

namespace grove {

// Column for a tile at `depth` in a DAG whose deepest tile is at `max_depth` (both >= 0).
// Results outside [0, columns) are clamped by the pool.
using PriorityColumnFn = int (*)(int32_t depth, int32_t max_depth, int columns);

// Default: depth relative to the job's own depth range, so jobs of very different depth
// (a 3-layer model next to a 150-layer one) share the columns fairly.
inline int column_by_relative_depth(int32_t depth, int32_t max_depth, int columns) {
  return static_cast<int>(static_cast<int64_t>(depth) * columns / (static_cast<int64_t>(max_depth) + 1));
}

// Absolute depth, one column per depth level; deeper levels share the last column.
inline int column_by_depth(int32_t depth, int32_t /*max_depth*/, int columns) {
  return depth < columns ? static_cast<int>(depth) : columns - 1;
}

struct PriorityPolicy {
  int columns = 8;  // 1..63 (the pool adds one for urgent jobs)
  PriorityColumnFn column = column_by_relative_depth;
};

}  // namespace grove
