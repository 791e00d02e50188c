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
  for (auto& [bytes, block] : free_) delete_block(block);
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
    auto it = free_.lower_bound(bytes);
    if (it != free_.end() && it->first <= bytes + bytes / 4) {
      block = it->second;
      bytes = it->first;  // the block goes back under its own size
      free_.erase(it);
      stats_.free_bytes -= static_cast<int64_t>(bytes);
      ++stats_.reused_blocks;
    } else {
      ++stats_.fresh_blocks;
    }
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
    free_.emplace(bytes, block);
    while (stats_.free_bytes > kFreePerPeak * stats_.high_water_bytes) {
      auto largest = std::prev(free_.end());
      stats_.free_bytes -= static_cast<int64_t>(largest->first);
      evicted.push_back(largest->second);
      free_.erase(largest);
    }
  }
  for (std::byte* p : evicted) delete_block(p);  // outside the lock: large frees unmap pages
}

void BufferPool::trim() {
  std::multimap<size_t, std::byte*> blocks;
  {
    std::lock_guard lock(mutex_);
    blocks.swap(free_);
    stats_.free_bytes = 0;
  }
  for (auto& [bytes, block] : blocks) delete_block(block);
}

BufferPool::Stats BufferPool::stats() const {
  std::lock_guard lock(mutex_);
  return stats_;
}

}  // namespace grove
