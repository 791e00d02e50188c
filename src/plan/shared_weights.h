#pragma once
// One prepared copy of a weight that several nodes, or several plans, read the same way.
#include <memory>
#include <mutex>
#include <span>
#include <vector>

#include "graph/graph.h"
#include "ops/tiling.h"

namespace grove {

// A rule's prepare step (packed GEMM panels, Winograd transforms, ...) reads only its node's
// op, attributes and decisions, its inputs' dtypes and shapes, and its constant tensors (a
// rule with prepare_ignores_other_shapes: not the shapes of its other inputs). Nodes equal in
// all of those get one prepared copy:
// - within a plan: a weight that a chain of MatMuls shares (a looped or tied model) was packed
//   once per node, 1 MiB per 512x512 MatMul of a 1000-layer chain;
// - across a session's plans (PlanOptions::shared_prepared): each input shape's plan packed
//   the whole model again, so a decoder planned for 8 cache capacities held 8 copies of its
//   weights (4.4 GB for GPT-2's 0.5 GB) and spent most of each plan's time packing.
// Entries hold their constants (so a buffer's address cannot be reused by another tensor while
// an entry names it) but only weak references to what was prepared: a copy lives as long as a
// plan uses it. Thread-safe: a session plans several shapes side by side.
class SharedPrepared {
 public:
  struct Result {
    std::shared_ptr<const void> prepared;
    bool shared = false;  // made for an earlier node or plan
  };
  // What `rule` prepares for `node` (constants: its constant inputs, null for the others).
  Result prepare(const Node& node, const TileRule& rule, std::span<const ValueInfo> in,
                 const std::vector<const Tensor*>& constants);
  // Live entries (for tests).
  size_t size();

 private:
  struct Entry {
    Node node;  // a copy: the plan whose node it was may be gone
    const TileRule* rule;
    std::vector<ValueInfo> in;     // data pointers cleared; `constants` holds them
    std::vector<Tensor> constants;  // empty where the input is not constant
    std::weak_ptr<const void> prepared;
  };
  const Entry* find(const Node& node, const TileRule& rule, std::span<const ValueInfo> in,
                    const std::vector<const Tensor*>& constants) const;
  std::mutex mutex_;
  std::vector<Entry> entries_;  // only nodes with a constant input and a prepared result
};

}  // namespace grove
