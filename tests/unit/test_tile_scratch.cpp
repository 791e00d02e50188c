// A worker's tile scratch (ops/tile_scratch.h): one object per workspace type, kept across
// calls; slots per worker, and a clear error for a worker id past them.
#include <gtest/gtest.h>

#include <vector>

#include "ops/tile_scratch.h"
#include "op_test_util.h"

namespace grove {
namespace {

struct FirstWorkspace {
  std::vector<float> rows;
};
struct SecondWorkspace {
  std::vector<float> rows;
};

TEST(TileScratch, EachTypeKeepsOneObjectAcrossCalls) {
  TileScratch scratch;
  FirstWorkspace& a = scratch.get<FirstWorkspace>();
  a.rows.assign(100, 1.0f);
  EXPECT_EQ(&scratch.get<FirstWorkspace>(), &a);
  EXPECT_EQ(scratch.get<FirstWorkspace>().rows.size(), 100u);
  SecondWorkspace& b = scratch.get<SecondWorkspace>();  // same members, another type: its own object
  EXPECT_TRUE(b.rows.empty());
  EXPECT_NE(static_cast<void*>(&b), static_cast<void*>(&a));
}

TEST(TileScratch, WorkersHaveTheirOwnSlots) {
  WorkerScratch workers(3);
  workers.of(0).get<FirstWorkspace>().rows.assign(5, 0.0f);
  EXPECT_TRUE(workers.of(2).get<FirstWorkspace>().rows.empty());
  EXPECT_EQ(workers.of(0).get<FirstWorkspace>().rows.size(), 5u);
  optest::expect_error([&] { workers.of(3); }, "worker 3 has no scratch");
  optest::expect_error([&] { workers.of(-1); }, "worker -1 has no scratch");
}

}  // namespace
}  // namespace grove
