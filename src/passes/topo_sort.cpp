// Orders a graph's nodes so every value is produced before it is read. Exporters do not all
// write nodes in order (onnxconverter-common's float16 conversion appends the input Casts at
// the end), so import sorts: stably, keeping the file's order wherever it is already valid.
#include <map>
#include <queue>
#include <set>

#include "passes/passes.h"

namespace grove {
namespace {

// A node's inputs and the outer-scope values its subgraphs read: it runs after all of them.
std::vector<std::string> reads(const Node& n) {
  std::vector<std::string> names = n.inputs;
  names.insert(names.end(), n.captures.begin(), n.captures.end());
  return names;
}

// Names the nodes of one cycle among `stuck` (nodes whose inputs never became available),
// following, from any stuck node, an input made by another stuck node until one repeats.
std::string describe_cycle(const Graph& g, const std::map<std::string, size_t>& producer,
                           const std::vector<bool>& stuck) {
  size_t start = 0;
  while (!stuck[start]) ++start;
  std::vector<size_t> path;
  std::map<size_t, size_t> position;  // node -> index in path
  size_t at = start;
  while (!position.count(at)) {
    position[at] = path.size();
    path.push_back(at);
    size_t next = at;
    for (const auto& in : reads(g.nodes[at])) {
      auto it = producer.find(in);
      if (it != producer.end() && stuck[it->second]) {
        next = it->second;
        break;
      }
    }
    at = next;  // a stuck node always reads some stuck node's output
  }
  std::string msg;
  for (size_t i = position[at]; i < path.size(); ++i) msg += "'" + g.nodes[path[i]].name + "' -> ";
  return msg + "'" + g.nodes[at].name + "'";
}

}  // namespace

void sort_topologically(Graph& g) {
  const size_t n = g.nodes.size();
  std::map<std::string, size_t> producer;
  for (size_t i = 0; i < n; ++i)
    for (const auto& out : g.nodes[i].outputs) {
      if (out.empty()) continue;
      auto [it, fresh] = producer.emplace(out, i);
      if (!fresh)
        throw Error(g.path + ": " + g.nodes[i].describe() + ": output '" + out + "' is also produced by " +
                    g.nodes[it->second].describe() + " (a value must have one producer)");
    }
  // waiting[i]: how many distinct producing nodes i still waits for. Values nobody produces
  // (graph inputs, initializers, names bind_shapes will report) do not hold a node back.
  std::vector<int> waiting(n, 0);
  std::vector<std::vector<size_t>> readers(n);
  for (size_t i = 0; i < n; ++i) {
    std::set<size_t> deps;
    for (const auto& in : reads(g.nodes[i])) {
      auto it = producer.find(in);
      if (it != producer.end()) deps.insert(it->second);
    }
    waiting[i] = static_cast<int>(deps.size());
    for (size_t d : deps) readers[d].push_back(i);
  }
  // Always emit the ready node that comes first in the file: an ordered file stays as it is.
  std::priority_queue<size_t, std::vector<size_t>, std::greater<>> ready;
  for (size_t i = 0; i < n; ++i)
    if (waiting[i] == 0) ready.push(i);
  std::vector<size_t> order;
  order.reserve(n);
  while (!ready.empty()) {
    size_t i = ready.top();
    ready.pop();
    order.push_back(i);
    for (size_t r : readers[i])
      if (--waiting[r] == 0) ready.push(r);
  }
  if (order.size() != n) {
    std::vector<bool> stuck(n, true);
    for (size_t i : order) stuck[i] = false;
    throw Error(g.path + ": the graph has a cycle: " + describe_cycle(g, producer, stuck));
  }
  bool in_order = true;
  for (size_t i = 0; i < n; ++i) in_order = in_order && order[i] == i;
  if (in_order) return;
  std::vector<Node> sorted;
  sorted.reserve(n);
  for (size_t i : order) sorted.push_back(std::move(g.nodes[i]));
  g.nodes = std::move(sorted);
}

}  // namespace grove
