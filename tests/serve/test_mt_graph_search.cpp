// The coordinate descent over pointer matrices, on made-up costs.
#include <gtest/gtest.h>

#include <cmath>

#include "serve/mt_graph_search.h"

namespace grove::serve {
namespace {

TEST(MtGraphSearch, FindsABetterMatrixAndRecordsEveryProfile) {
  // Cost: distance of every pointer from 5 (model 0) or 20 (model 1), plus 100 for no split.
  const std::vector<int32_t> ops = {10, 40};
  auto cost = [&](const PointerMatrix& rho) {
    double c = 0;
    for (size_t i = 0; i < rho.size(); ++i)
      for (int32_t p : rho[i]) c += std::abs(p - (i ? 20 : 5)) + (p == ops[i] ? 100 : 0);
    return c;
  };
  MtGraphResult r = search_pointer_matrix(ops, {.pointers = 2, .rounds = 3, .candidates = 20, .seed = 7}, cost);
  EXPECT_EQ(r.start.rho, (PointerMatrix{{10, 10}, {40, 40}}));
  EXPECT_EQ(r.start.cost, cost(r.start.rho));
  EXPECT_LT(r.best.cost, r.start.cost / 5);
  EXPECT_TRUE(r.verified);
  for (const MtGraphRecord& rec : r.records) {
    EXPECT_GE(rec.cost, r.best.cost);
    EXPECT_EQ(rec.rho.size(), 2u);
    for (size_t i = 0; i < 2; ++i) {
      EXPECT_TRUE(std::is_sorted(rec.rho[i].begin(), rec.rho[i].end()));
      EXPECT_LE(rec.rho[i].back(), ops[i]);
    }
  }
}

TEST(MtGraphSearch, KeepsPlainCoExecutionWhenTheWinnerWasLuck) {
  // The first profile of every staged matrix is cheap, every later one dear: verification
  // must see through it and keep plain co-execution.
  std::map<PointerMatrix, int> calls;
  const PointerMatrix plain = {{6}, {6}};
  auto cost = [&](const PointerMatrix& rho) { return rho == plain ? 10.0 : (calls[rho]++ == 0 ? 1.0 : 50.0); };
  MtGraphResult r = search_pointer_matrix({6, 6}, {.pointers = 1, .rounds = 1, .candidates = 4}, cost);
  EXPECT_EQ(r.best.rho, plain);
  EXPECT_FALSE(r.verified);
}

}  // namespace
}  // namespace grove::serve
