#pragma once
// BufferPool: the activation buffers of one model's runs, kept across inferences so a warm
// run takes memory the process already touched instead of fresh pages from the OS. (Without
// it, ResNet-50 B8 took ~20k page faults per run from glibc unmapping and re-mapping its
// 25 MB activations: ~10% of the run.)
//
// A buffer taken from the pool is a Tensor whose storage goes back to the pool's free list
// when the last Tensor sharing it is dropped (an output the caller holds comes back when the
// caller drops it). The free list is searched best fit: the smallest free block that holds
// the request and wastes at most a quarter of it. Exact sizes alone thrash, because the
// barrier-free schedule takes and returns blocks in a different order every run.
//
// Thread-safe: one mutex around the free list, taken once per value per run, not per tile.
// Bounded: free bytes never exceed kFreePerPeak times the most bytes ever in use at once (the
// largest free blocks go first). Blocks of one size serve only requests near that size, so a
// model needs more than its peak in the pool to stop allocating: ResNet-50 B8 settles at 225 MB
// of blocks for a 148 MB peak; a bound of 1x the peak evicted blocks every run and thrashed,
// and so did 2x for SqueezeNet and GoogLeNet, whose largest block (the stem's output) was
// evicted after every run and allocated and zeroed again at the next (docs/runtime.md).
//
// Reused blocks hold an earlier run's bytes, not zeros: take them only for values whose
// producer writes every element before anyone reads it (PlannedRun zeroes the others).
#include "grove/buffer_stats.h"
#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <vector>

#include "graph/tensor.h"

namespace grove {

class BufferPool : public std::enable_shared_from_this<BufferPool> {
 public:
  // Create pools with std::make_shared: taken buffers keep their pool alive.
  // Free bytes kept, at most, per byte of the most ever in use at once.
  static constexpr int64_t kFreePerPeak = 4;

  BufferPool() = default;
  BufferPool(const BufferPool&) = delete;
  BufferPool& operator=(const BufferPool&) = delete;
  ~BufferPool();

  // A tensor over a pooled buffer; its contents are unspecified (a fresh block is zeroed).
  Tensor take(DType dtype, Shape shape);

  // Frees every block on the free list (blocks in use come back later as usual): for a
  // server that wants the memory back while a model is idle.
  void trim();

  using Stats = BufferStats;
  Stats stats() const;

 private:
  void give_back(std::byte* block, size_t bytes);

  mutable std::mutex mutex_;
  std::map<size_t, std::vector<std::byte*>> free_;  // block bytes -> free blocks of that size
  size_t free_blocks_ = 0;                          // blocks in free_
  Stats stats_;
};

}  // namespace grove
