#pragma once
// Ops whose inputs or outputs are sequences or optionals (grove/value.h): SequenceEmpty,
// SequenceConstruct, SequenceInsert, SequenceAt, SequenceErase, SequenceLength,
// SplitToSequence, ConcatFromSequence, Optional, OptionalHasElement, OptionalGetElement.
// They move whole tensors and decide sizes from data, so they are never tiled: the reference
// executor and the segmented runner (runtime/segmented_graph.h) run them between planned
// segments, as they run If and Loop. SequenceMap holds a subgraph and is control flow
// (ops/control_flow/control_flow.h).
#include <span>
#include <vector>

#include "graph/graph.h"

namespace grove {

// Whether the node is one of the ops above.
bool is_sequence_op(const Node& node);
// Whether a node reading these values must run on them as values: a sequence op, or an
// Identity passing a sequence or an empty optional along.
bool runs_on_values(const Node& node, std::span<const Value* const> in);

// Runs a sequence op (or a value-passing Identity). in[i] is nullptr for a missing optional
// input. Errors name the node.
std::vector<Value> run_sequence_op(const Node& node, std::span<const Value* const> in);

}  // namespace grove
