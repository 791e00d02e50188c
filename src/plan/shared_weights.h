#pragma once
// One prepared copy of a weight that several nodes read the same way.
#include <cstddef>
#include <memory>
#include <unordered_map>
#include <vector>

#include "plan/plan_internal.h"

namespace grove::plan_detail {

// A rule's prepare step (packed GEMM panels, Winograd transforms, ...) reads only its node's
// op, attributes and decisions, its inputs' dtypes and shapes, and its constant tensors. Nodes
// equal in all of those get one prepared copy: a weight that a chain of MatMuls shares (a looped
// or tied model) was packed once per node, 1 MiB per 512x512 MatMul of a 1000-layer chain.
class SharedPrepared {
 public:
  struct Result {
    std::shared_ptr<const void> prepared;
    bool fresh = false;  // prepared for this node, not shared with an earlier one
  };
  // What `rule` prepares for `node` (constants: its constant inputs, null for the others).
  Result prepare(const Node& node, const TileRule& rule, const NodeInfos& infos,
                 const std::vector<const Tensor*>& constants);

 private:
  struct Entry {
    const Node* node;
    const TileRule* rule;
    std::vector<ValueInfo> in;
    std::shared_ptr<const void> prepared;
  };
  std::vector<Entry> entries_;  // only nodes with a constant input and a prepared result
  std::unordered_multimap<const std::byte*, size_t> by_first_constant_;  // buffer -> entries_ index
};

}  // namespace grove::plan_detail
