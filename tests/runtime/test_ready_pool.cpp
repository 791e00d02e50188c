#include <gtest/gtest.h>

#include <thread>
#include <vector>

#include "graph/error.h"
#include "runtime/ready_pool.h"

namespace grove {
namespace {

TEST(ReadyPool, OwnRowFirstByPriorityThenSteals) {
  ReadyPool pool(3, PriorityPolicy{4, column_by_depth});
  // Column 0 is the urgent jobs'; the policy's columns follow.
  EXPECT_EQ(pool.column_for(0, 10), 1);
  EXPECT_EQ(pool.column_for(2, 10), 3);
  EXPECT_EQ(pool.column_for(9, 10), 4);
  std::vector<ReadyTile> row1 = {{nullptr, 10, 3}, {nullptr, 11, 1}, {nullptr, 12, 3}, {nullptr, 13, 2}};
  std::vector<ReadyTile> row2 = {{nullptr, 20, 1}};
  pool.push(1, row1);
  pool.push(2, row2);
  std::vector<int32_t> order;
  ReadyTile t;
  while (pool.try_pop(1, t)) order.push_back(t.tile);
  EXPECT_EQ(order, (std::vector<int32_t>{11, 13, 10, 12, 20}));  // FIFO within a column
  EXPECT_FALSE(pool.try_pop(0, t));
}

TEST(ReadyPool, UrgentTilesOfAnyRowComeFirst) {
  ReadyPool pool(3, PriorityPolicy{4, column_by_depth});
  EXPECT_EQ(pool.column_for(9, 10, true), 0);
  std::vector<ReadyTile> own = {{nullptr, 1, 1}, {nullptr, 2, 2}};
  std::vector<ReadyTile> other = {{nullptr, 3, 4}, {nullptr, 30, 0}, {nullptr, 31, 0}};
  pool.push(0, own);
  pool.push(2, other);
  std::vector<int32_t> order;
  ReadyTile t;
  while (pool.try_pop(0, t)) order.push_back(t.tile);
  // Urgent tiles are stolen from row 2 before row 0's own tiles are taken.
  EXPECT_EQ(order, (std::vector<int32_t>{30, 31, 1, 2, 3}));
}

TEST(ReadyPool, PopOrderOffsetsAndNewestFirst) {
  ReadyPool pool(2, PriorityPolicy{2, column_by_depth});
  std::vector<ReadyTile> a = {{nullptr, 1, 1}, {nullptr, 2, 1}, {nullptr, 3, 2}};
  std::vector<ReadyTile> b = {{nullptr, 4, 1}};
  pool.push(0, a);
  pool.push(1, b);
  ReadyTile t;
  ASSERT_TRUE(pool.try_pop(0, t, PopOrder{1, 0, false}));  // start at row 1
  EXPECT_EQ(t.tile, 4);
  ASSERT_TRUE(pool.try_pop(0, t, PopOrder{0, 1, false}));  // start at the second policy column
  EXPECT_EQ(t.tile, 3);
  ASSERT_TRUE(pool.try_pop(0, t, PopOrder{0, 0, true}));
  EXPECT_EQ(t.tile, 2);
  ASSERT_TRUE(pool.try_pop(0, t));
  EXPECT_EQ(t.tile, 1);
}

TEST(ReadyPool, ColumnsAreClampedAndValidated) {
  ReadyPool pool(1, PriorityPolicy{3, [](int32_t d, int32_t, int) { return d - 5; }});
  EXPECT_EQ(pool.column_for(0, 0), 1);
  EXPECT_EQ(pool.column_for(100, 0), 3);
  EXPECT_THROW(ReadyPool(0, PriorityPolicy{}), Error);
  EXPECT_THROW(ReadyPool(1, PriorityPolicy{64, column_by_depth}), Error);
  EXPECT_THROW(ReadyPool(1, PriorityPolicy{4, nullptr}), Error);
}

TEST(ReadyPool, ConcurrentPushAndPopLoseNothing) {
  constexpr int kThreads = 4, kPerThread = 20000;
  ReadyPool pool(kThreads, PriorityPolicy{4, column_by_depth});
  std::vector<std::atomic<int>> seen(kThreads * kPerThread);
  std::vector<std::thread> threads;
  std::atomic<int> popped{0};
  for (int w = 0; w < kThreads; ++w) {
    threads.emplace_back([&, w] {
      std::vector<ReadyTile> batch;
      for (int i = 0; i < kPerThread; ++i) {
        batch.push_back({nullptr, w * kPerThread + i, i % 4});
        if (batch.size() == 3 || i + 1 == kPerThread) {
          pool.push(w, batch);
          batch.clear();
        }
        ReadyTile t;
        if (i % 2 && pool.try_pop(w, t)) {
          seen[static_cast<size_t>(t.tile)].fetch_add(1);
          popped.fetch_add(1);
        }
      }
    });
  }
  for (auto& t : threads) t.join();
  ReadyTile t;
  while (pool.try_pop(0, t)) {
    seen[static_cast<size_t>(t.tile)].fetch_add(1);
    popped.fetch_add(1);
  }
  EXPECT_EQ(popped.load(), kThreads * kPerThread);
  for (auto& s : seen) ASSERT_EQ(s.load(), 1);
}

}  // namespace
}  // namespace grove
