#pragma once
// Per-node choices that override the planner's hand rules, and where they come from: `grove
// tune` measures each Conv's primitives and tile grids inside the model on this machine and
// writes the best into a tuning record (docs/tuning.md); a session uses the record made for
// its model, machine, thread count and precision.
#include <cstdint>
#include <string>
#include <vector>

namespace grove {

struct NodeChoice {
  std::string node;             // the node's name in the planned (fused) graph
  std::string primitive;        // Conv only: "gemm", "winograd", "direct" (NCHW), "nhwc", "winograd_nhwc", "winograd_f2x3_nhwc" (channels-last), "nchwc" (channel-blocked); empty keeps the rule's
  std::vector<int64_t> extent;  // tile extent per dim of output 0 (0: uncut); empty keeps the rule's
};

}  // namespace grove
