#pragma once
// PBQP (partitioned boolean quadratic problem): pick one choice per node so that the node
// costs plus the edge costs between the picked choices are least. The planner uses it to pick
// one primitive per layer, with data-layout transitions priced on the edges (paper 003, after
// Hames & Scholz, "Nearly optimal register allocation with PBQP").
//
// Costs are finite or +infinity; +infinity forbids a choice or a pair of choices. When every
// assignment is forbidden the solution costs +infinity and still names a choice per node.
#include <span>
#include <vector>

#include "graph/error.h"

namespace grove::tune {

// Cost of each pair of choices of nodes a and b, row-major [choices(a) x choices(b)].
struct PbqpEdge {
  int a = 0, b = 0;
  std::vector<double> costs;
};

struct PbqpProblem {
  std::vector<std::vector<double>> node_costs;  // per node, one cost per choice
  std::vector<PbqpEdge> edges;                   // parallel edges add; a != b
};

struct PbqpOptions {
  // Where the reductions get stuck (RN), the RN heuristic runs first. If the product of the
  // choice counts of the nodes it fixed is at most this, the stuck nodes' choices are tried
  // one by one instead (branch and bound, each independent part of the graph on its own), so
  // the result is proven optimal; otherwise the heuristic's assignment stands. The bound
  // holds on every path of the search: a path that would exceed it falls back to the
  // heuristic. 0: heuristic only.
  double exact_limit = 1e5;
};

struct PbqpSolution {
  std::vector<int> choice;       // per node
  double cost = 0;               // pbqp_cost(problem, choice)
  bool proven_optimal = false;   // no heuristic RN step decided the result
  int rn_reductions = 0;         // RN steps (exact or heuristic) on the way to this assignment
};

// Throws Error naming the node or edge when the problem is malformed.
PbqpSolution solve_pbqp(const PbqpProblem& p, const PbqpOptions& o = {});

// Sum of the node and edge costs of an assignment.
double pbqp_cost(const PbqpProblem& p, std::span<const int> choice);

// Tries every assignment (for tests); throws Error when there are more than max_space.
PbqpSolution solve_pbqp_brute_force(const PbqpProblem& p, double max_space = 1e7);

}  // namespace grove::tune
