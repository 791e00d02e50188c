// The PBQP solver (tune/pbqp.h): hand-built cases with known optima, random problems against
// brute force (exact where the reductions or exact branching decide, a valid assignment no
// better than the optimum where the RN heuristic does), network-shaped graphs and bad input.
#include "tune/pbqp.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <limits>
#include <random>
#include <string>

using namespace grove;
using namespace grove::tune;

namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();

double uniform(std::mt19937& rng, double lo, double hi) { return std::uniform_real_distribution<double>(lo, hi)(rng); }
int uniform_int(std::mt19937& rng, int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng); }

// Random costs in [0, 10); with forbid > 0, that share of them is +infinity.
std::vector<double> random_costs(std::mt19937& rng, size_t n, double forbid = 0) {
  std::vector<double> c(n);
  for (double& v : c) v = uniform(rng, 0, 1) < forbid ? kInf : uniform(rng, 0, 10);
  return c;
}

PbqpProblem random_nodes(std::mt19937& rng, int n, int min_choices, int max_choices, double forbid = 0) {
  PbqpProblem p;
  for (int x = 0; x < n; ++x)
    p.node_costs.push_back(random_costs(rng, uniform_int(rng, min_choices, max_choices), forbid));
  return p;
}

void add_edge(std::mt19937& rng, PbqpProblem& p, int a, int b, double forbid = 0) {
  p.edges.push_back({a, b, random_costs(rng, p.node_costs[a].size() * p.node_costs[b].size(), forbid)});
}

// Costs of a few levels plus a little noise: many assignments then lie within a small gap of
// the optimum, and a bound that prunes a little too eagerly loses it.
void make_near_ties(std::mt19937& rng, PbqpProblem& p) {
  auto coarsen = [&](double& v) { v = std::floor(v / 2.5) + uniform(rng, 0, 1e-3); };
  for (auto& c : p.node_costs) std::for_each(c.begin(), c.end(), coarsen);
  for (auto& e : p.edges) std::for_each(e.costs.begin(), e.costs.end(), coarsen);
}

bool valid_assignment(const PbqpProblem& p, const std::vector<int>& choice) {
  if (choice.size() != p.node_costs.size()) return false;
  for (size_t x = 0; x < choice.size(); ++x)
    if (choice[x] < 0 || static_cast<size_t>(choice[x]) >= p.node_costs[x].size()) return false;
  return true;
}

// Equal costs, infinite ones included (inf - inf is NaN, so they are compared apart).
void expect_same_cost(double got, double want, const std::string& what) {
  if (std::isinf(want)) {
    EXPECT_EQ(got, want) << what;
  } else {
    EXPECT_NEAR(got, want, 1e-9) << what;
  }
}

std::string error_of(const PbqpProblem& p) {
  try {
    solve_pbqp(p);
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

TEST(Pbqp, SingleNodeTakesItsCheapestChoice) {
  PbqpProblem p{.node_costs = {{3, 1, 2}}, .edges = {}};
  PbqpSolution s = solve_pbqp(p);
  EXPECT_EQ(s.choice, std::vector<int>{1});
  EXPECT_EQ(s.cost, 1);
  EXPECT_TRUE(s.proven_optimal);
  EXPECT_EQ(s.rn_reductions, 0);
}

TEST(Pbqp, EmptyProblemCostsNothing) {
  PbqpSolution s = solve_pbqp({});
  EXPECT_TRUE(s.choice.empty());
  EXPECT_EQ(s.cost, 0);
  EXPECT_TRUE(s.proven_optimal);
}

// Layers 0 -> 1 -> 2, two layouts each; a switch of layout costs 5. Node 1 is much faster in
// layout 1, which is worth switching everything for: all 1 costs 4 + 1 + 4 = 9, against 13 for
// all 0, 11 for 0,1,1 and 12 for 1,1,0. At a switch cost of 1, 0,1,0 wins: 1 + 1 + 2 + 2 = 6.
TEST(Pbqp, ChainOfThreeHasItsKnownOptimum) {
  std::vector<double> layout_switch{0, 5, 5, 0};
  PbqpProblem p{.node_costs = {{1, 4}, {10, 1}, {2, 4}}, .edges = {{0, 1, layout_switch}, {1, 2, layout_switch}}};
  PbqpSolution s = solve_pbqp(p);
  EXPECT_EQ(s.choice, (std::vector<int>{1, 1, 1}));
  EXPECT_EQ(s.cost, 9);
  EXPECT_TRUE(s.proven_optimal);
  EXPECT_EQ(s.rn_reductions, 0);

  std::vector<double> cheap_switch{0, 1, 1, 0};
  p.edges = {{0, 1, cheap_switch}, {1, 2, cheap_switch}};
  s = solve_pbqp(p);
  EXPECT_EQ(s.choice, (std::vector<int>{0, 1, 0}));
  EXPECT_EQ(s.cost, 6);
}

// A triangle is still reducible (RII folds one corner into the opposite edge), so it is solved
// exactly without RN: each node wants choice 0 alone, but every edge forbids two equal choices.
TEST(Pbqp, TriangleIsExactWithoutRn) {
  std::vector<double> differ{kInf, 0, 0, 0, kInf, 0, 0, 0, kInf};  // 3 choices, must differ
  PbqpProblem p{.node_costs = {{0, 1, 2}, {0, 2, 1}, {0, 5, 5}},
                .edges = {{0, 1, differ}, {1, 2, differ}, {0, 2, differ}}};
  PbqpSolution s = solve_pbqp(p);
  EXPECT_EQ(s.cost, solve_pbqp_brute_force(p).cost);
  EXPECT_EQ(s.choice, (std::vector<int>{1, 2, 0}));  // 1 + 1 + 0
  EXPECT_EQ(s.cost, 2);
  EXPECT_TRUE(s.proven_optimal);
  EXPECT_EQ(s.rn_reductions, 0);
}

// K4: every node has degree 3, so RN is needed. Node 0 (fewest choices, fixed first) looks
// best at choice 0, where each neighbour alone has a free reply (choice 0), but the neighbours
// may not all take it: two of them then pay 5. Choice 1 costs 1 per neighbour and frees them.
TEST(Pbqp, CompleteGraphNeedsRn) {
  PbqpProblem p;
  p.node_costs = {{0, 0}, {0, 0, 0}, {0, 0, 0}, {0, 0, 0}};
  const std::vector<double> from_0{0, 5, 5, 1, 1, 1};
  const std::vector<double> not_both_0{10, 0, 0, 0, 0, 0, 0, 0, 0};
  p.edges = {{0, 1, from_0},     {0, 2, from_0},     {0, 3, from_0},
             {1, 2, not_both_0}, {1, 3, not_both_0}, {2, 3, not_both_0}};
  PbqpSolution exact = solve_pbqp(p);
  EXPECT_EQ(exact.cost, 3);
  EXPECT_EQ(exact.choice[0], 1);
  EXPECT_EQ(exact.cost, solve_pbqp_brute_force(p).cost);
  EXPECT_TRUE(exact.proven_optimal);
  EXPECT_EQ(exact.rn_reductions, 1);

  PbqpSolution heuristic = solve_pbqp(p, {.exact_limit = 0});
  EXPECT_EQ(heuristic.choice[0], 0);
  EXPECT_EQ(heuristic.cost, 10);
  EXPECT_FALSE(heuristic.proven_optimal);
  EXPECT_EQ(heuristic.rn_reductions, 1);
  EXPECT_EQ(heuristic.cost, pbqp_cost(p, heuristic.choice));

  // Trying node 0's 2 choices fits a limit of 2, not of 1.
  EXPECT_TRUE(solve_pbqp(p, {.exact_limit = 2}).proven_optimal);
  EXPECT_FALSE(solve_pbqp(p, {.exact_limit = 1}).proven_optimal);
}

TEST(Pbqp, InfiniteCostsForbidChoices) {
  // Node 0's cheapest choice is forbidden outright, node 1's cheapest pairing by the edge.
  PbqpProblem p{.node_costs = {{kInf, 5, 6}, {0, 1}}, .edges = {{0, 1, {0, 0, kInf, 3, 0, 0}}}};
  PbqpSolution s = solve_pbqp(p);
  EXPECT_EQ(s.choice, (std::vector<int>{2, 0}));
  EXPECT_EQ(s.cost, 6);
  EXPECT_EQ(s.cost, solve_pbqp_brute_force(p).cost);

  // Same under RN (K4), exact and heuristic: the forbidden choice is never taken.
  PbqpProblem q;
  for (int x = 0; x < 4; ++x) q.node_costs.push_back({kInf, 1, 2});
  for (int a = 0; a < 4; ++a)
    for (int b = a + 1; b < 4; ++b) q.edges.push_back({a, b, std::vector<double>(9, 1)});
  for (double limit : {1e5, 0.0}) {
    PbqpSolution t = solve_pbqp(q, {.exact_limit = limit});
    EXPECT_EQ(t.cost, 4 + 6);
    for (int c : t.choice) EXPECT_EQ(c, 1);
  }
}

TEST(Pbqp, EverythingForbiddenCostsInfinity) {
  PbqpProblem p{.node_costs = {{kInf, kInf}, {0, 0, 0}, {1}, {0, 0}},
                .edges = {{0, 1, std::vector<double>(6, 0)}, {1, 2, std::vector<double>(3, kInf)},
                          {2, 3, {0, 0}}, {3, 0, std::vector<double>(4, kInf)}, {1, 3, std::vector<double>(6, kInf)}}};
  for (double limit : {1e5, 0.0}) {
    PbqpSolution s = solve_pbqp(p, {.exact_limit = limit});
    EXPECT_EQ(s.cost, kInf);
    EXPECT_TRUE(valid_assignment(p, s.choice));
  }
  // Dense and all forbidden, so RN runs on infinite scores.
  PbqpProblem q;
  for (int x = 0; x < 6; ++x) q.node_costs.push_back({kInf, kInf, kInf});
  for (int a = 0; a < 6; ++a)
    for (int b = a + 1; b < 6; ++b) q.edges.push_back({a, b, std::vector<double>(9, kInf)});
  for (double limit : {1e5, 0.0}) {
    PbqpSolution s = solve_pbqp(q, {.exact_limit = limit});
    EXPECT_EQ(s.cost, kInf);
    EXPECT_TRUE(valid_assignment(q, s.choice));
  }
}

TEST(Pbqp, ParallelEdgesAdd) {
  // Edge 0 alone makes (0, 0) best and edge 1 alone (0, 2); together only (1, 1) is cheap.
  // Edge 1 runs the other way round, so its matrix is [3 x 2].
  PbqpProblem p{.node_costs = {{0, 0}, {0, 0, 0}},
                .edges = {{0, 1, {0, 5, 5, 5, 2, 5}}, {1, 0, {5, 5, 5, 1, 0, 5}}}};
  PbqpSolution s = solve_pbqp(p);
  EXPECT_EQ(s.choice, (std::vector<int>{1, 1}));
  EXPECT_EQ(s.cost, 3);
  EXPECT_EQ(pbqp_cost(p, std::vector<int>{0, 0}), 5);
  EXPECT_EQ(pbqp_cost(p, std::vector<int>{0, 2}), 5);

  PbqpProblem first{.node_costs = p.node_costs, .edges = {p.edges[0]}};
  PbqpProblem second{.node_costs = p.node_costs, .edges = {p.edges[1]}};
  EXPECT_EQ(solve_pbqp(first).choice, (std::vector<int>{0, 0}));
  EXPECT_EQ(solve_pbqp(second).choice, (std::vector<int>{0, 2}));
}

// Trees and chains need only R0, RI and RII, so the result is optimal whatever the options.
TEST(Pbqp, RandomTreesAndChainsAreOptimal) {
  std::mt19937 rng(7);
  for (int trial = 0; trial < 300; ++trial) {
    const int n = uniform_int(rng, 1, 8);
    PbqpProblem p = random_nodes(rng, n, 1, 4, trial % 5 == 0 ? 0.2 : 0);
    const bool chain = trial % 2 == 0;
    for (int x = 1; x < n; ++x) {
      int parent = chain ? x - 1 : uniform_int(rng, 0, x - 1);
      if (uniform_int(rng, 0, 1)) add_edge(rng, p, parent, x);
      else add_edge(rng, p, x, parent);
    }
    PbqpSolution want = solve_pbqp_brute_force(p);
    for (double limit : {1e5, 0.0}) {
      PbqpSolution got = solve_pbqp(p, {.exact_limit = limit});
      const std::string what = "trial " + std::to_string(trial);
      EXPECT_TRUE(got.proven_optimal) << what;
      EXPECT_EQ(got.rn_reductions, 0) << what;
      ASSERT_TRUE(valid_assignment(p, got.choice)) << what;
      expect_same_cost(got.cost, want.cost, what);
      EXPECT_EQ(got.cost, pbqp_cost(p, got.choice)) << what;
    }
  }
}

// Random graphs from sparse to complete, with parallel edges and forbidden choices.
PbqpProblem random_graph(std::mt19937& rng) {
  const int n = uniform_int(rng, 3, 9);
  const double forbid = uniform_int(rng, 0, 4) == 0 ? 0.15 : 0;
  PbqpProblem p = random_nodes(rng, n, 1, 4, forbid);
  const double density = uniform(rng, 0.2, 1.0);
  for (int a = 0; a < n; ++a)
    for (int b = a + 1; b < n; ++b) {
      if (uniform(rng, 0, 1) >= density) continue;
      add_edge(rng, p, a, b, forbid);
      if (uniform_int(rng, 0, 9) == 0) add_edge(rng, p, b, a, forbid);
    }
  return p;
}

TEST(Pbqp, RandomGraphsMatchBruteForce) {
  std::mt19937 rng(2024);
  int needed_rn = 0;
  for (int trial = 0; trial < 500; ++trial) {
    PbqpProblem p = random_graph(rng);
    if (trial % 2) make_near_ties(rng, p);
    PbqpSolution want = solve_pbqp_brute_force(p);
    PbqpSolution got = solve_pbqp(p);
    const std::string what = "trial " + std::to_string(trial);
    ASSERT_TRUE(valid_assignment(p, got.choice)) << what;
    expect_same_cost(got.cost, want.cost, what);
    EXPECT_EQ(got.cost, pbqp_cost(p, got.choice)) << what;
    EXPECT_TRUE(got.proven_optimal) << what;
    needed_rn += got.rn_reductions > 0;
  }
  EXPECT_GT(needed_rn, 100) << "too few random problems exercise exact branching";
}

TEST(Pbqp, HeuristicGivesValidAssignmentsNoBetterThanOptimum) {
  std::mt19937 rng(99);
  int suboptimal = 0;
  for (int trial = 0; trial < 500; ++trial) {
    PbqpProblem p = random_graph(rng);
    PbqpSolution want = solve_pbqp_brute_force(p);
    PbqpSolution got = solve_pbqp(p, {.exact_limit = 0});
    const std::string what = "trial " + std::to_string(trial);
    ASSERT_TRUE(valid_assignment(p, got.choice)) << what;
    EXPECT_EQ(got.cost, pbqp_cost(p, got.choice)) << what;
    if (std::isinf(want.cost)) {
      EXPECT_EQ(got.cost, kInf) << what;
      continue;
    }
    EXPECT_GE(got.cost, want.cost - 1e-9) << what;
    if (got.proven_optimal) expect_same_cost(got.cost, want.cost, what);
    suboptimal += got.cost > want.cost + 1e-9;
  }
  // Otherwise the random problems would not show that exact branching is worth anything.
  EXPECT_GT(suboptimal, 0);
}

// Larger graphs, where exact branching nests and bounds prune. Half have near ties.
TEST(Pbqp, MediumRandomGraphsMatchBruteForce) {
  std::mt19937 rng(5);
  int nested = 0;
  for (int trial = 0; trial < 40; ++trial) {
    const int n = 12;
    PbqpProblem p = random_nodes(rng, n, 2, 3);
    const double density = uniform(rng, 0.2, 0.5);
    for (int a = 0; a < n; ++a)
      for (int b = a + 1; b < n; ++b)
        if (uniform(rng, 0, 1) < density) add_edge(rng, p, a, b);
    if (trial % 2) make_near_ties(rng, p);
    PbqpSolution want = solve_pbqp_brute_force(p);
    PbqpSolution got = solve_pbqp(p);
    const std::string what = "trial " + std::to_string(trial);
    EXPECT_NEAR(got.cost, want.cost, 1e-9) << what;
    EXPECT_TRUE(got.proven_optimal) << what;
    nested += got.rn_reductions >= 2;
  }
  EXPECT_GT(nested, 10) << "too few problems need more than one RN";
}

// Two dense parts (K5s), apart or joined only through a hub node that RN fixes first: the parts
// are then searched apart, each within exact_limit, though the product of all the RN choice
// counts (3 for the hub times 3 * 3 per part) is not.
TEST(Pbqp, PartsAreSolvedApart) {
  std::mt19937 rng(17);
  for (int trial = 0; trial < 16; ++trial) {
    PbqpProblem p = random_nodes(rng, 11, 3, 3);
    for (int first : {1, 6})
      for (int a = first; a < first + 5; ++a)
        for (int b = a + 1; b < first + 5; ++b) add_edge(rng, p, a, b);
    const bool hub = trial % 2;
    if (hub)
      for (int x = 1; x < 11; ++x) add_edge(rng, p, 0, x);
    if (trial % 4 >= 2) make_near_ties(rng, p);
    PbqpSolution want = solve_pbqp_brute_force(p);
    PbqpSolution got = solve_pbqp(p, {.exact_limit = 27});
    const std::string what = "trial " + std::to_string(trial);
    EXPECT_NEAR(got.cost, want.cost, 1e-9) << what;
    EXPECT_TRUE(got.proven_optimal) << what;
    EXPECT_EQ(got.rn_reductions, hub ? 5 : 4) << what;
  }
}

// Layers in a chain, with a residual edge from every third layer to the third after it.
// Series-parallel, so reductions alone solve it; checked against a dynamic program over
// (choice at the block's input, choice at the current layer).
TEST(Pbqp, ResNetShapedGraphIsExact) {
  const int n = 60, k = 8;
  std::mt19937 rng(3);
  PbqpProblem p = random_nodes(rng, n, k, k);
  for (int x = 0; x + 1 < n; ++x) add_edge(rng, p, x, x + 1);
  for (int x = 0; x + 3 < n; x += 3) add_edge(rng, p, x, x + 3);

  auto t0 = std::chrono::steady_clock::now();
  PbqpSolution s = solve_pbqp(p);
  double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  EXPECT_TRUE(s.proven_optimal);
  EXPECT_EQ(s.rn_reductions, 0);
  EXPECT_LT(ms, 1000);  // a sanity bound only; it takes well under a millisecond

  // dp[c] is the best cost of layers 0..x with layer x (a block input) at choice c.
  auto edge = [&](size_t e, int i, int j) { return p.edges[e].costs[i * k + j]; };
  auto skip_edge = [](int x) { return static_cast<size_t>(n - 1 + x / 3); };  // skips follow the chain
  std::vector<double> dp(p.node_costs[0]);
  int x = 0;
  for (; x + 3 < n; x += 3) {
    std::vector<double> next(k, kInf);
    for (int c0 = 0; c0 < k; ++c0) {
      std::vector<double> cur(k);  // best over layers x+1.. with layer x at c0
      for (int j = 0; j < k; ++j) cur[j] = dp[c0] + edge(x, c0, j) + p.node_costs[x + 1][j];
      for (int y = x + 2; y <= x + 3; ++y) {
        std::vector<double> nxt(k, kInf);
        for (int i = 0; i < k; ++i)
          for (int j = 0; j < k; ++j) nxt[j] = std::min(nxt[j], cur[i] + edge(y - 1, i, j) + p.node_costs[y][j]);
        cur = nxt;
      }
      for (int j = 0; j < k; ++j) next[j] = std::min(next[j], cur[j] + edge(skip_edge(x), c0, j));
    }
    dp = next;
  }
  for (; x + 1 < n; ++x) {  // the tail after the last skip
    std::vector<double> nxt(k, kInf);
    for (int i = 0; i < k; ++i)
      for (int j = 0; j < k; ++j) nxt[j] = std::min(nxt[j], dp[i] + edge(x, i, j) + p.node_costs[x + 1][j]);
    dp = nxt;
  }
  EXPECT_NEAR(s.cost, *std::min_element(dp.begin(), dp.end()), 1e-9);
  EXPECT_EQ(s.cost, pbqp_cost(p, s.choice));
}

// Planner-sized DAGs: 200 layers with 12 primitives each, the chain plus `extra` edges from a
// layer to one 2..span layers on.
PbqpProblem layer_dag(std::mt19937& rng, int extra, int span) {
  const int n = 200, k = 12;
  PbqpProblem p = random_nodes(rng, n, k, k);
  for (int x = 0; x + 1 < n; ++x) add_edge(rng, p, x, x + 1);
  for (int e = 0; e < extra; ++e) {
    int a = uniform_int(rng, 0, n - 3);
    add_edge(rng, p, a, std::min(n - 1, a + uniform_int(rng, 2, span)));
  }
  return p;
}

double solve_ms(const PbqpProblem& p, PbqpSolution& s) {
  auto t0 = std::chrono::steady_clock::now();
  s = solve_pbqp(p);
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
}

// About 300 edges of short skips that cross each other: the RN heuristic needs more choices
// than exact_limit allows, so its assignment is the answer.
TEST(Pbqp, PlannerSizedDagSolves) {
  std::mt19937 rng(11);
  PbqpProblem p = layer_dag(rng, 100, 4);
  PbqpSolution s;
  double ms = solve_ms(p, s);
  EXPECT_TRUE(valid_assignment(p, s.choice));
  EXPECT_EQ(s.cost, pbqp_cost(p, s.choice));
  EXPECT_GT(s.rn_reductions, 0);
  EXPECT_FALSE(s.proven_optimal);
  EXPECT_LT(ms, 1000);  // a sanity bound only; it takes about a millisecond
  std::printf("200 layers, %zu edges: %d RN (heuristic), %.2f ms\n", p.edges.size(), s.rn_reductions, ms);
}

// A few long edges: RN is needed a few times, within exact_limit, so the result is proven; on
// this DAG it beats the heuristic's.
TEST(Pbqp, PlannerSizedDagWithFewCrossingsIsExact) {
  std::mt19937 rng(7);
  PbqpProblem p = layer_dag(rng, 12, 150);
  PbqpSolution s;
  double ms = solve_ms(p, s);
  EXPECT_TRUE(s.proven_optimal);
  EXPECT_GE(s.rn_reductions, 1);
  EXPECT_EQ(s.cost, pbqp_cost(p, s.choice));
  PbqpSolution heuristic = solve_pbqp(p, {.exact_limit = 0});
  EXPECT_FALSE(heuristic.proven_optimal);
  EXPECT_LT(s.cost, heuristic.cost - 1);
  EXPECT_LT(ms, 2000);  // a sanity bound only
  std::printf("200 layers, %zu edges: %d RN (exact), cost %.4f vs heuristic %.4f, %.2f ms\n", p.edges.size(),
              s.rn_reductions, s.cost, heuristic.cost, ms);
}

TEST(Pbqp, MalformedProblemsThrow) {
  auto expect_error = [](const PbqpProblem& p, const std::string& part) {
    std::string msg = error_of(p);
    EXPECT_NE(msg.find(part), std::string::npos) << "'" << part << "' not in: '" << msg << "'";
  };
  expect_error({.node_costs = {{1}, {}}, .edges = {}}, "node 1 has no choices");
  expect_error({.node_costs = {{1}, {1}}, .edges = {{0, 2, {0}}}}, "edge 0 (0 -> 2)");
  expect_error({.node_costs = {{1}, {1}}, .edges = {{0, 1, {0}}, {-1, 1, {0}}}}, "edge 1 (-1 -> 1)");
  expect_error({.node_costs = {{1}, {1}}, .edges = {{1, 1, {0}}}}, "itself");
  expect_error({.node_costs = {{1, 2}, {1, 2, 3}}, .edges = {{0, 1, {0, 0, 0, 0, 0}}}}, "has 5 costs, expected 2 x 3");
  expect_error({.node_costs = {{1, std::nan("")}}, .edges = {}}, "node 0 has a NaN");
  expect_error({.node_costs = {{1}, {1}}, .edges = {{0, 1, {-kInf}}}}, "edge 0 (0 -> 1) has a NaN or -infinity");

  PbqpProblem ok{.node_costs = {{1, 2}, {3}}, .edges = {}};
  EXPECT_THROW(pbqp_cost(ok, std::vector<int>{0}), Error);
  EXPECT_THROW(pbqp_cost(ok, std::vector<int>{2, 0}), Error);
  PbqpProblem big;
  for (int x = 0; x < 30; ++x) big.node_costs.push_back({0, 1});
  EXPECT_THROW(solve_pbqp_brute_force(big), Error);
}

}  // namespace
