// PBQP by graph reduction (Scholz & Eckstein; Hames & Scholz). Nodes of degree 0, 1 and 2 are
// folded into their neighbours without losing optimality (R0, RI, RII). Where every node left
// has degree 3 or more, one node is fixed (RN). The RN heuristic gives it its locally best
// choice; when that run needed few enough choices (exact_limit), the stuck node's choices are
// instead tried one by one, with the heuristic's cost and a relaxed lower bound pruning them
// (branch and bound). Each reduction leaves a Step that recovers the node's choice from its
// neighbours', so choices are read back in reverse order.
#include "tune/pbqp.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <string>
#include <utility>

namespace grove::tune {
namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();

// What is left of `bound` after spending `spent`; never inf - inf.
double left_of(double bound, double spent) { return bound == kInf ? kInf : bound - spent; }

// The least f(i) for i in [0, n) and the first i that gives it; (inf, 0) when all are inf.
template <class F>
std::pair<double, int> least(int n, F f) {
  std::pair<double, int> best{f(0), 0};
  for (int i = 1; i < n; ++i) {
    double v = f(i);
    if (v < best.first) best = {v, i};
  }
  return best;
}

struct Edge {
  int a = -1, b = -1;     // a < 0: removed
  std::vector<double> m;  // [size(a) x size(b)], row-major
};

// How to recover a reduced node's choice once the neighbours it was folded into have theirs.
struct Step {
  int node = 0;            // ids are the problem's, not a CostGraph's
  int y = -1, z = -1;      // the neighbours, or -1
  int z_size = 0;
  std::vector<int> pick{};  // the node's choice per choice of y (times z); one entry when fixed
};

// The working graph. Local node indices; `ids` maps them to the problem's. Parallel edges are
// merged on insertion, so a node's degree is its number of neighbours.
class CostGraph {
 public:
  std::vector<int> ids;
  std::vector<std::vector<double>> cost;  // emptied when the node is reduced
  std::vector<std::vector<int>> adj;      // live edges at each node
  std::vector<Edge> edges;

  int add_node(int id, std::vector<double> c) {
    ids.push_back(id);
    cost.push_back(std::move(c));
    adj.emplace_back();
    return static_cast<int>(ids.size()) - 1;
  }
  bool live(int x) const { return !cost[x].empty(); }
  int size(int x) const { return static_cast<int>(cost[x].size()); }
  int degree(int x) const { return static_cast<int>(adj[x].size()); }
  bool empty() const {
    return std::none_of(cost.begin(), cost.end(), [](const auto& c) { return !c.empty(); });
  }
  int other(const Edge& e, int x) const { return e.a == x ? e.b : e.a; }
  // Edge cost with x at choice i and the other end at choice j.
  double at(const Edge& e, int x, int i, int j) const {
    return e.a == x ? e.m[static_cast<size_t>(i) * size(e.b) + j] : e.m[static_cast<size_t>(j) * size(e.b) + i];
  }

  void add_edge(int a, int b, std::vector<double> m);
  double reduce(std::vector<Step>& steps);
  double fix(int x, int i, std::vector<Step>& steps);
  std::vector<double> scores(int x) const;
  int rn_node() const;
  double lower_bound() const;
  std::vector<std::vector<int>> components() const;
  CostGraph extract(const std::vector<int>& nodes) const;

 private:
  void remove_node(int x);
  std::vector<double> rows(const Edge& e, int x) const;
  double reduce_node(int x, std::vector<Step>& steps);
};

void CostGraph::add_edge(int a, int b, std::vector<double> m) {
  for (int id : degree(a) <= degree(b) ? adj[a] : adj[b]) {
    Edge& e = edges[id];
    if (e.a == a && e.b == b) {
      for (size_t k = 0; k < m.size(); ++k) e.m[k] += m[k];
      return;
    }
    if (e.a == b && e.b == a) {
      for (int i = 0; i < size(a); ++i)
        for (int j = 0; j < size(b); ++j)
          e.m[static_cast<size_t>(j) * size(a) + i] += m[static_cast<size_t>(i) * size(b) + j];
      return;
    }
  }
  int id = static_cast<int>(edges.size());
  edges.push_back({a, b, std::move(m)});
  adj[a].push_back(id);
  adj[b].push_back(id);
}

void CostGraph::remove_node(int x) {
  for (int id : adj[x]) {
    Edge& e = edges[id];
    std::vector<int>& at_other = adj[other(e, x)];
    at_other.erase(std::find(at_other.begin(), at_other.end(), id));
    e = Edge{};
  }
  adj[x].clear();
  cost[x] = {};
}

// Edge e as [size(x) x size(other end)], so the loops below run along contiguous rows.
std::vector<double> CostGraph::rows(const Edge& e, int x) const {
  if (e.a == x) return e.m;
  const int n = size(x), m = size(e.a);
  std::vector<double> t(e.m.size());
  for (int j = 0; j < m; ++j)
    for (int i = 0; i < n; ++i) t[static_cast<size_t>(i) * m + j] = e.m[static_cast<size_t>(j) * n + i];
  return t;
}

// R0, RI or RII on x (degree <= 2); returns the cost it leaves outside the graph. The loops
// keep the first least choice, as least() does, so ties resolve the same way everywhere.
double CostGraph::reduce_node(int x, std::vector<Step>& steps) {
  const std::vector<double>& c = cost[x];
  const int n = size(x);
  Step s{ids[x]};
  if (degree(x) == 0) {
    auto [v, i] = least(n, [&](int j) { return c[j]; });
    s.pick = {i};
    remove_node(x);
    steps.push_back(std::move(s));
    return v;
  }
  const int y = other(edges[adj[x][0]], x);
  const int ny = size(y);
  const std::vector<double> ey = rows(edges[adj[x][0]], x);
  s.y = ids[y];
  if (degree(x) == 1) {
    std::vector<double> best(ny, kInf);
    s.pick.assign(ny, 0);
    for (int i = 0; i < n; ++i)
      for (int j = 0; j < ny; ++j)
        if (double v = c[i] + ey[static_cast<size_t>(i) * ny + j]; v < best[j]) best[j] = v, s.pick[j] = i;
    for (int j = 0; j < ny; ++j) cost[y][j] += best[j];
    remove_node(x);
    steps.push_back(std::move(s));
    return 0;
  }
  const int z = other(edges[adj[x][1]], x);
  const int nz = size(z);
  const std::vector<double> ez = rows(edges[adj[x][1]], x);
  s.z = ids[z];
  s.z_size = nz;
  std::vector<double> m(static_cast<size_t>(ny) * nz, kInf);
  s.pick.assign(m.size(), 0);
  for (int i = 0; i < n; ++i)
    for (int j = 0; j < ny; ++j) {
      const double base = c[i] + ey[static_cast<size_t>(i) * ny + j];
      double* row = &m[static_cast<size_t>(j) * nz];
      int* pick = &s.pick[static_cast<size_t>(j) * nz];
      const double* ez_row = &ez[static_cast<size_t>(i) * nz];
      for (int k = 0; k < nz; ++k)
        if (double v = base + ez_row[k]; v < row[k]) row[k] = v, pick[k] = i;
    }
  remove_node(x);
  add_edge(y, z, std::move(m));
  steps.push_back(std::move(s));
  return 0;
}

// Applies R0, RI and RII until every node left has degree 3 or more.
double CostGraph::reduce(std::vector<Step>& steps) {
  double constant = 0;
  std::vector<int> work;
  for (int x = 0; x < static_cast<int>(cost.size()); ++x)
    if (live(x) && degree(x) <= 2) work.push_back(x);
  std::vector<int> neighbours;
  while (!work.empty()) {
    int x = work.back();
    work.pop_back();
    if (!live(x) || degree(x) > 2) continue;
    neighbours.clear();
    for (int id : adj[x]) neighbours.push_back(other(edges[id], x));
    constant += reduce_node(x, steps);
    for (int y : neighbours)
      if (degree(y) <= 2) work.push_back(y);
  }
  return constant;
}

// RN with x at choice i: x's edges become costs of its neighbours' choices.
double CostGraph::fix(int x, int i, std::vector<Step>& steps) {
  double constant = cost[x][i];
  for (int id : adj[x]) {
    const Edge& e = edges[id];
    int y = other(e, x);
    for (int j = 0; j < size(y); ++j) cost[y][j] += at(e, x, i, j);
  }
  steps.push_back({ids[x], -1, -1, 0, {i}});
  remove_node(x);
  return constant;
}

// Per choice of x: its cost plus, per edge, the neighbour's best reply. The RN heuristic's
// measure, and the order in which exact RN tries the choices.
std::vector<double> CostGraph::scores(int x) const {
  std::vector<double> s = cost[x];
  for (int id : adj[x]) {
    const Edge& e = edges[id];
    int y = other(e, x);
    for (int i = 0; i < size(x); ++i) s[i] += least(size(y), [&](int j) { return at(e, x, i, j); }).first;
  }
  return s;
}

// Highest degree first: fixing it removes the most edges. Fewer choices break ties, since
// they cost less to try.
int CostGraph::rn_node() const {
  int best = -1;
  for (int x = 0; x < static_cast<int>(cost.size()); ++x) {
    if (!live(x)) continue;
    if (best < 0 || degree(x) > degree(best) || (degree(x) == degree(best) && size(x) < size(best))) best = x;
  }
  return best;
}

// A bound no assignment beats, so a branch that cannot beat the best found so far is skipped.
// The exact reductions run as usual; where they get stuck, a node of least degree d is
// relaxed instead of fixed: each neighbour gets min over its choices of (cost / d + edge),
// which sums to at most what the node adds to any assignment (a min of a sum is at least the
// sum of the mins).
double CostGraph::lower_bound() const {
  CostGraph g = *this;
  std::vector<Step> unused;
  double total = 0;
  for (;;) {
    total += g.reduce(unused);
    int x = -1;
    for (int y = 0; y < static_cast<int>(g.cost.size()); ++y)
      if (g.live(y) && (x < 0 || g.degree(y) < g.degree(x))) x = y;
    if (x < 0) return total;
    const double share = 1.0 / g.degree(x);
    for (int id : g.adj[x]) {
      const Edge& e = g.edges[id];
      int y = g.other(e, x);
      for (int j = 0; j < g.size(y); ++j)
        g.cost[y][j] += least(g.size(x), [&](int i) { return g.cost[x][i] * share + g.at(e, x, i, j); }).first;
    }
    g.remove_node(x);
  }
}

std::vector<std::vector<int>> CostGraph::components() const {
  std::vector<std::vector<int>> comps;
  std::vector<char> seen(cost.size(), 0);
  for (int start = 0; start < static_cast<int>(cost.size()); ++start) {
    if (!live(start) || seen[start]) continue;
    std::vector<int> comp{start};
    seen[start] = 1;
    for (size_t k = 0; k < comp.size(); ++k)
      for (int id : adj[comp[k]]) {
        int y = other(edges[id], comp[k]);
        if (!seen[y]) {
          seen[y] = 1;
          comp.push_back(y);
        }
      }
    comps.push_back(std::move(comp));
  }
  return comps;
}

// A compact copy of a component: branching copies the graph per choice, so it should hold
// only what is left.
CostGraph CostGraph::extract(const std::vector<int>& nodes) const {
  CostGraph g;
  std::vector<int> local(cost.size(), -1);
  for (int x : nodes) local[x] = g.add_node(ids[x], cost[x]);
  for (int x : nodes)
    for (int id : adj[x])
      if (edges[id].a == x) {
        int e = static_cast<int>(g.edges.size());
        g.edges.push_back({local[x], local[edges[id].b], edges[id].m});
        g.adj[local[x]].push_back(e);
        g.adj[local[edges[id].b]].push_back(e);
      }
  return g;
}

// The cost of a graph's best assignment found and the steps that recover it. found is false
// when the search proved that nothing there beats the bound it was given.
struct Result {
  double cost = 0;
  std::vector<Step> steps{};
  bool found = true;
  bool proven = true;
  int rn = 0;
  // Product of the choice counts of the nodes RN fixed one after another; of independent parts
  // only the largest counts, as they are searched apart.
  double space = 1;
};

Result not_found() {
  Result r;
  r.found = false;
  return r;
}

// Appends a solved part of the graph to r; the caller combines their space.
void add(Result& r, Result&& part) {
  r.cost += part.cost;
  r.proven = r.proven && part.proven;
  r.rn += part.rn;
  std::move(part.steps.begin(), part.steps.end(), std::back_inserter(r.steps));
}

Result solve(CostGraph g, double product, double bound, double exact_limit);

// Independent parts are solved apart, each to its own best, so exact branching in one does
// not multiply the work of the others.
Result solve_parts(const CostGraph& g, const std::vector<std::vector<int>>& comps, double product, double exact_limit) {
  Result r;
  for (const auto& comp : comps) {
    Result part = solve(g.extract(comp), product, kInf, exact_limit);
    r.space = std::max(r.space, part.space);
    add(r, std::move(part));
  }
  return r;
}

// Exact RN: every choice of x, the most promising first, each solved on its own copy. `best`
// is an assignment already known (the heuristic's); the result is proven optimal when every
// choice was either solved exactly or bounded away.
Result branch(const CostGraph& g, int x, double product, double bound, double exact_limit, Result best) {
  std::vector<double> scores = g.scores(x);
  std::vector<int> order(scores.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](int i, int j) { return scores[i] < scores[j]; });
  bool proven = true;
  for (int i : order) {
    CostGraph child = g;
    Result r;
    r.cost = child.fix(x, i, r.steps);
    r.rn = 1;
    Result sub = solve(std::move(child), product, left_of(std::min(bound, best.cost), r.cost), exact_limit);
    if (!sub.found) continue;
    r.space = g.size(x) * sub.space;
    add(r, std::move(sub));
    proven = proven && r.proven;
    if (r.cost < best.cost) best = std::move(r);
  }
  best.proven = proven;
  return best;
}

// Solves g, bound is the cost to beat (+inf: none). Reduces, and where the reductions get
// stuck first runs the RN heuristic on a copy: if it needed few enough RN choices, its cost
// bounds an exact search, else its assignment is the answer.
Result solve(CostGraph g, double product, double bound, double exact_limit) {
  Result r;
  std::vector<std::vector<int>> comps;
  for (;;) {
    r.cost += g.reduce(r.steps);
    if (g.empty()) return r;
    if (bound < kInf && r.cost + g.lower_bound() >= bound) return not_found();
    comps = g.components();
    if (comps.size() > 1) break;
    int x = g.rn_node();
    int k = g.size(x);
    if (k > 1 && product * k <= exact_limit) break;
    std::vector<double> scores = g.scores(x);
    r.cost += g.fix(x, least(k, [&](int i) { return scores[i]; }).second, r.steps);
    r.proven = r.proven && k == 1;  // a node with one choice loses nothing by being fixed
    ++r.rn;
    r.space *= k;
  }
  Result rest;
  if (comps.size() > 1) {
    rest = solve_parts(g, comps, product, exact_limit);
  } else {
    Result guess = solve(g, product, kInf, 0);
    if (product * guess.space <= exact_limit) {
      int x = g.rn_node();
      rest = branch(g, x, product * g.size(x), left_of(bound, r.cost), exact_limit, std::move(guess));
    } else {
      rest = std::move(guess);
    }
  }
  if (!rest.found) return rest;
  r.space *= rest.space;
  add(r, std::move(rest));
  return r;
}

std::string edge_name(size_t e, const PbqpEdge& edge) {
  return "pbqp: edge " + std::to_string(e) + " (" + std::to_string(edge.a) + " -> " + std::to_string(edge.b) + ")";
}

// +inf is a forbidden choice; NaN and -inf would make inf - inf somewhere downstream.
bool valid_cost(double c) { return !std::isnan(c) && c != -kInf; }

void validate(const PbqpProblem& p) {
  const size_t n = p.node_costs.size();
  for (size_t x = 0; x < n; ++x) {
    if (p.node_costs[x].empty()) throw Error("pbqp: node " + std::to_string(x) + " has no choices");
    if (!std::all_of(p.node_costs[x].begin(), p.node_costs[x].end(), valid_cost))
      throw Error("pbqp: node " + std::to_string(x) + " has a NaN or -infinity cost");
  }
  for (size_t e = 0; e < p.edges.size(); ++e) {
    const PbqpEdge& edge = p.edges[e];
    if (edge.a < 0 || edge.b < 0 || static_cast<size_t>(edge.a) >= n || static_cast<size_t>(edge.b) >= n)
      throw Error(edge_name(e, edge) + " names a node outside 0.." + std::to_string(static_cast<long>(n) - 1));
    if (edge.a == edge.b) throw Error(edge_name(e, edge) + " joins a node to itself");
    size_t rows = p.node_costs[edge.a].size(), cols = p.node_costs[edge.b].size();
    if (edge.costs.size() != rows * cols)
      throw Error(edge_name(e, edge) + " has " + std::to_string(edge.costs.size()) + " costs, expected " +
                  std::to_string(rows) + " x " + std::to_string(cols));
    if (!std::all_of(edge.costs.begin(), edge.costs.end(), valid_cost))
      throw Error(edge_name(e, edge) + " has a NaN or -infinity cost");
  }
}

double cost_of(const PbqpProblem& p, std::span<const int> choice) {
  double total = 0;
  for (size_t x = 0; x < p.node_costs.size(); ++x) total += p.node_costs[x][choice[x]];
  for (const PbqpEdge& e : p.edges)
    total += e.costs[static_cast<size_t>(choice[e.a]) * p.node_costs[e.b].size() + choice[e.b]];
  return total;
}

}  // namespace

PbqpSolution solve_pbqp(const PbqpProblem& p, const PbqpOptions& o) {
  validate(p);
  CostGraph g;
  for (size_t x = 0; x < p.node_costs.size(); ++x) g.add_node(static_cast<int>(x), p.node_costs[x]);
  for (const PbqpEdge& e : p.edges) g.add_edge(e.a, e.b, e.costs);

  Result r = solve(std::move(g), 1, kInf, o.exact_limit);
  PbqpSolution s;
  s.choice.assign(p.node_costs.size(), 0);
  for (auto it = r.steps.rbegin(); it != r.steps.rend(); ++it) {
    size_t k = 0;
    if (it->y >= 0) k = s.choice[it->y];
    if (it->z >= 0) k = k * it->z_size + s.choice[it->z];
    s.choice[it->node] = it->pick[k];
  }
  // Summed afresh so the cost is exactly pbqp_cost's, whatever order the reductions added in.
  s.cost = cost_of(p, s.choice);
  s.proven_optimal = r.proven;
  s.rn_reductions = r.rn;
  return s;
}

double pbqp_cost(const PbqpProblem& p, std::span<const int> choice) {
  validate(p);
  if (choice.size() != p.node_costs.size())
    throw Error("pbqp: " + std::to_string(choice.size()) + " choices for " + std::to_string(p.node_costs.size()) +
                " nodes");
  for (size_t x = 0; x < choice.size(); ++x)
    if (choice[x] < 0 || static_cast<size_t>(choice[x]) >= p.node_costs[x].size())
      throw Error("pbqp: choice " + std::to_string(choice[x]) + " of node " + std::to_string(x) + " is out of range");
  return cost_of(p, choice);
}

PbqpSolution solve_pbqp_brute_force(const PbqpProblem& p, double max_space) {
  validate(p);
  double space = 1;
  for (const auto& c : p.node_costs) space *= static_cast<double>(c.size());
  if (space > max_space)
    throw Error("pbqp: " + std::to_string(space) + " assignments is more than the brute-force limit of " +
                std::to_string(max_space));
  PbqpSolution best{.choice = std::vector<int>(p.node_costs.size(), 0), .cost = kInf, .proven_optimal = true};
  std::vector<int> choice(p.node_costs.size(), 0);
  for (;;) {
    double c = cost_of(p, choice);
    if (c < best.cost) best.choice = choice, best.cost = c;
    size_t x = 0;
    while (x < choice.size() && ++choice[x] == static_cast<int>(p.node_costs[x].size())) choice[x++] = 0;
    if (x == choice.size()) break;
  }
  return best;
}

}  // namespace grove::tune
