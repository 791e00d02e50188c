#pragma once
// If, Loop, Scan and SequenceMap: nodes that hold subgraphs and decide at run time which subgraph runs
// and how often. What they compute is written once here, over a callback that runs one
// subgraph; the reference executor passes a callback that runs it naively, the segmented
// runner (runtime/segmented_graph.h) one that runs it on the tile runtime.
#include <functional>
#include <span>
#include <vector>

#include "graph/graph.h"
#include "grove/limits.h"

namespace grove {

bool is_control_flow(const Node& node);
// Whether `graph` cannot be one TileGraph: a top-level node is control flow or a sequence op
// (ops/control_flow/sequence.h), or an input or output is a sequence or an optional.
bool needs_segments(const Graph& graph);

// Structural checks that need no tensors (branch and body input/output counts against the
// node's); throws an Error naming the node. Run at import and before every run.
void check_control_flow(const Node& node);

// Runs `body` with its formal inputs given in order; returns its outputs in order. Values of
// enclosing graphs the body reads by name come from whatever scope the caller set up.
// `held_outside` is what the run holds around the body while it runs (the node's `held_bytes`
// and the outputs it has collected so far): the body's own control-flow nodes charge their
// collected outputs on top of it, so nested Loops share one memory limit.
using RunBody =
    std::function<std::vector<Value>(const Graph& body, std::vector<Value> formal_inputs, int64_t held_outside)>;

// Runs one If, Loop, Scan or SequenceMap node. in[i] is nullptr for a missing optional input. Errors name
// the node.
// A Loop running more than limits.max_loop_iterations times is an Error. The outputs a Loop,
// Scan or SequenceMap collects per iteration are charged to limits.memory_limit() as they
// grow, on top of `held_bytes` (what the run already holds): past it, an Error naming the node,
// the bytes and the limit, before the stacked outputs are allocated.
std::vector<Value> run_control_flow(const Node& node, std::span<const Value* const> in, const RunBody& run_body,
                                    const Limits& limits, int64_t held_bytes);

}  // namespace grove
