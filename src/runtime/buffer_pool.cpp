#include "runtime/buffer_pool.h"

#include <algorithm>
#include <cstring>
#include <new>
#include <vector>

namespace grove {
namespace {

constexpr size_t kAlign = 64;  // as Tensor's own buffers: one cache line, AVX-512 loads

std::byte* new_block(size_t bytes) {
  auto* p = static_cast<std::byte*>(::operator new[](bytes, std::align_val_t(kAlign)));
  std::memset(p, 0, bytes);
  return p;
}

void delete_block(std::byte* p) { ::operator delete[](p, std::align_val_t(kAlign)); }

}  // namespace

BufferPool::~BufferPool() {
  for (auto& [bytes, blocks] : free_)
    for (std::byte* block : blocks) delete_block(block);
}

Tensor BufferPool::take(DType dtype, Shape shape) {
  for (int64_t d : shape)
    if (d < 0) return Tensor(dtype, std::move(shape));  // throws the usual error
  size_t bytes = static_cast<size_t>(grove::numel(shape)) * dtype_size(dtype);
  if (bytes == 0) return Tensor(dtype, std::move(shape));
  bytes = (bytes + kAlign - 1) / kAlign * kAlign;
  std::byte* block = nullptr;
  {
    std::lock_guard lock(mutex_);
    for (auto it = free_.lower_bound(bytes); it != free_.end() && it->first <= bytes + bytes / 4; ++it) {
      if (it->second.empty()) continue;
      block = it->second.back();
      it->second.pop_back();
      --free_blocks_;
      bytes = it->first;  // the block goes back under its own size
      stats_.free_bytes -= static_cast<int64_t>(bytes);
      ++stats_.reused_blocks;
      break;
    }
    if (!block) ++stats_.fresh_blocks;
    stats_.in_use_bytes += static_cast<int64_t>(bytes);
    stats_.high_water_bytes = std::max(stats_.high_water_bytes, stats_.in_use_bytes);
  }
  if (!block) block = new_block(bytes);
  std::shared_ptr<std::byte[]> storage(block, [pool = shared_from_this(), bytes](std::byte* p) { pool->give_back(p, bytes); });
  return Tensor(dtype, std::move(shape), std::move(storage));
}

void BufferPool::give_back(std::byte* block, size_t bytes) {
  std::vector<std::byte*> evicted;
  {
    std::lock_guard lock(mutex_);
    stats_.in_use_bytes -= static_cast<int64_t>(bytes);
    stats_.free_bytes += static_cast<int64_t>(bytes);
    free_[bytes].push_back(block);
    ++free_blocks_;
    for (auto it = free_.rbegin(); it != free_.rend() && stats_.free_bytes > kFreePerPeak * stats_.high_water_bytes; ++it)
      while (!it->second.empty() && stats_.free_bytes > kFreePerPeak * stats_.high_water_bytes) {
        stats_.free_bytes -= static_cast<int64_t>(it->first);
        evicted.push_back(it->second.back());
        it->second.pop_back();
        --free_blocks_;
      }
    // Sizes with no block left stay listed (so a run's take and give back allocate nothing),
    // until they are most of the list: shapes that keep changing leave many behind.
    if (free_.size() > 2 * free_blocks_ + 64) std::erase_if(free_, [](const auto& entry) { return entry.second.empty(); });
  }
  for (std::byte* p : evicted) delete_block(p);  // outside the lock: large frees unmap pages
}

void BufferPool::trim() {
  std::map<size_t, std::vector<std::byte*>> blocks;
  {
    std::lock_guard lock(mutex_);
    blocks.swap(free_);
    free_blocks_ = 0;
    stats_.free_bytes = 0;
  }
  for (auto& [bytes, list] : blocks)
    for (std::byte* block : list) delete_block(block);
}

BufferPool::Stats BufferPool::stats() const {
  std::lock_guard lock(mutex_);
  return stats_;
}

}  // namespace grove
