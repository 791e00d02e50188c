// BufferPool: blocks come back and are reused best fit, the free list stays bounded, a block
// is never handed to two holders at once (threads writing patterns), and buffers outlive the
// pool's last other owner.
#include <gtest/gtest.h>

#include <random>
#include <thread>

#include "graph/error.h"
#include "runtime/buffer_pool.h"

namespace grove {
namespace {

Tensor take_bytes(BufferPool& pool, int64_t bytes) { return pool.take(DType::u8, {bytes}); }

TEST(BufferPool, ADroppedBufferIsTakenAgain) {
  auto pool = std::make_shared<BufferPool>();
  const void* first;
  {
    Tensor t = pool->take(DType::f32, {1000});
    first = t.raw();
    EXPECT_EQ(reinterpret_cast<uintptr_t>(first) % 64, 0u);
    EXPECT_EQ(pool->stats().in_use_bytes, 4032);  // rounded up to whole cache lines
  }
  EXPECT_EQ(pool->stats().in_use_bytes, 0);
  EXPECT_EQ(pool->stats().free_bytes, 4032);
  Tensor again = pool->take(DType::f32, {1000});
  EXPECT_EQ(again.raw(), first);
  EXPECT_EQ(pool->stats().fresh_blocks, 1);
  EXPECT_EQ(pool->stats().reused_blocks, 1);
}

TEST(BufferPool, BestFitWithinAQuarter) {
  auto pool = std::make_shared<BufferPool>();
  const void* small_block;
  const void* large_block;
  {
    Tensor small = take_bytes(*pool, 1024);
    Tensor large = take_bytes(*pool, 4096);
    small_block = small.raw();
    large_block = large.raw();
  }
  EXPECT_EQ(take_bytes(*pool, 900).raw(), small_block);   // 960 bytes fit in 1024 (+6%)
  EXPECT_EQ(take_bytes(*pool, 3500).raw(), large_block);  // 3520 in 4096 (+16%)
  Tensor half = take_bytes(*pool, 2048);                   // 4096 would waste half: a new block
  EXPECT_NE(half.raw(), large_block);
  EXPECT_EQ(pool->stats().fresh_blocks, 3);
}

TEST(BufferPool, FreeBytesStayWithinTheBound) {
  auto pool = std::make_shared<BufferPool>();
  // One at a time, each too big for the blocks before it (a quarter larger): the peak is the
  // largest, the free list would be their sum, which passes the bound (nearly 5x the largest).
  int64_t bytes = 64 * 1024, taken = 0;
  for (int i = 0; i < 16; ++i, bytes = bytes * 5 / 4) {
    take_bytes(*pool, bytes);
    taken += bytes;
    BufferPool::Stats s = pool->stats();
    EXPECT_LE(s.free_bytes, BufferPool::kFreePerPeak * s.high_water_bytes) << i;
    EXPECT_EQ(s.in_use_bytes, 0);
  }
  EXPECT_EQ(pool->stats().fresh_blocks, 16);
  EXPECT_LT(pool->stats().free_bytes, taken);  // some blocks were evicted
}

TEST(BufferPool, TrimFreesTheFreeListOnly) {
  auto pool = std::make_shared<BufferPool>();
  Tensor kept = take_bytes(*pool, 4096);
  take_bytes(*pool, 8192);
  EXPECT_EQ(pool->stats().free_bytes, 8192);
  pool->trim();
  EXPECT_EQ(pool->stats().free_bytes, 0);
  EXPECT_EQ(pool->stats().in_use_bytes, 4096);
  kept = Tensor();  // still comes back after a trim
  EXPECT_EQ(pool->stats().free_bytes, 4096);
  take_bytes(*pool, 4096);
  EXPECT_EQ(pool->stats().fresh_blocks, 2);
}

TEST(BufferPool, BuffersOutliveThePool) {
  auto pool = std::make_shared<BufferPool>();
  Tensor t = pool->take(DType::f32, {256});
  t.data<float>()[255] = 7.f;
  pool.reset();  // the tensor keeps it alive; dropping the tensor frees both
  EXPECT_EQ(t.data<float>()[255], 7.f);
}

TEST(BufferPool, EmptyAndBadShapes) {
  auto pool = std::make_shared<BufferPool>();
  EXPECT_EQ(pool->take(DType::f32, {0, 4}).numel(), 0);
  EXPECT_THROW(pool->take(DType::f32, {-1}), Error);
  EXPECT_EQ(pool->stats().fresh_blocks, 0);
}

// Threads take blocks of random sizes, fill them with their own pattern, yield, and check the
// pattern before dropping them: a block given to two holders at once shows up as a mismatch
// (and as a race under ThreadSanitizer).
TEST(BufferPool, ConcurrentHoldersNeverShareABlock) {
  auto pool = std::make_shared<BufferPool>();
  constexpr int kThreads = 4;
  std::atomic<int> mismatches{0};
  std::vector<std::thread> threads;
  for (int id = 0; id < kThreads; ++id)
    threads.emplace_back([&, id] {
      std::mt19937 rng(id);
      std::vector<Tensor> held;
      for (int i = 0; i < 400; ++i) {
        int64_t n = 16 << (rng() % 8);
        Tensor t = pool->take(DType::i32, {n});
        for (int32_t& v : t.span<int32_t>()) v = id * 100000 + i;
        held.push_back(std::move(t));
        if (held.size() > 3 || rng() % 2) {
          size_t k = rng() % held.size();
          std::this_thread::yield();
          for (int32_t v : held[k].span<int32_t>())
            if (v / 100000 != id) {
              ++mismatches;
              break;
            }
          held.erase(held.begin() + static_cast<std::ptrdiff_t>(k));
        }
      }
    });
  for (auto& t : threads) t.join();
  EXPECT_EQ(mismatches.load(), 0);
  BufferPool::Stats s = pool->stats();
  EXPECT_EQ(s.in_use_bytes, 0);
  EXPECT_LE(s.free_bytes, BufferPool::kFreePerPeak * s.high_water_bytes);
  EXPECT_GT(s.reused_blocks, s.fresh_blocks);
}

}  // namespace
}  // namespace grove
