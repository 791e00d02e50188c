#pragma once
// Where the layout of one conv meets another's (paper 003's data-layout transformations, the
// PBQP edges of the plan-time selection): the channels-last pass puts a Transpose wherever a
// channels-last value meets an NCHW reader. Two convs are linked when one reads the other's
// output directly or through the ops that follow their inputs' layout (Add, Concat, MaxPool);
// if they run in different layouts, the value between them is transposed. A conv whose input
// comes from, or whose output goes to, anything else (a graph input or output, an NCHW-only
// op) pays a Transpose when it runs channels-last.
#include <cstdint>
#include <vector>

#include "plan/plan.h"

namespace grove::tune {

struct LayoutLink {
  size_t producer = 0, consumer = 0;  // node indices of two convs in `is_conv`
  int64_t elements = 0;               // what a Transpose between them moves
  Shape shape;                        // that value's shape, as NCHW
  // No Add, Concat or MaxPool between them: two channel-blocked convs share their value only
  // then (those ops run channels-last or NCHW, never blocked).
  bool straight = true;
};

struct LayoutBoundary {
  size_t conv = 0;       // node index
  int64_t elements = 0;  // what its Transposes in and out move when it runs channels-last
  std::vector<Shape> into, out_of;  // the NCHW shapes of the values it changes the layout of, in and out
};

struct LayoutLinks {
  std::vector<LayoutLink> links;  // one per pair, the larger value where there are several
  std::vector<LayoutBoundary> boundaries;
};

// Over the nodes of `plan` (its graph as written: NCHW convs) for which is_conv[n] holds. A
// few-channel stem reads an NCHW image without a Transpose (stems_read_nchw), and a global
// average pool reads either layout, so neither is a boundary.
LayoutLinks layout_links(const Plan& plan, const std::vector<bool>& is_conv);

}  // namespace grove::tune
