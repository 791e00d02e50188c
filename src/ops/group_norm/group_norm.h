#pragma once
// GroupNormalization (ONNX opset 18, per-channel scale and bias from opset 21): the channels
// of X [N, C, D1..Dn] split into `num_groups` groups; each (image, group) is normalised by
// its own mean and variance, then scaled and shifted. The reference and the tiles compute a
// group with the same function, so they give the same bits.
#include <cstdint>

#include "graph/graph.h"

namespace grove {

// Where X's groups lie and how scale and bias are read.
struct GroupNormShape {
  int64_t images = 0, channels = 0, groups = 0, inner = 0;  // inner: elements per channel plane
  bool per_channel = true;  // scale/bias [C] (opset 21); else [num_groups] (opset 18-20)
  int64_t channels_per_group() const { return channels / groups; }
};

// Checks the node's attributes against X's shape; throws an Error naming what is wrong.
GroupNormShape group_norm_shape(const Node& node, const Shape& x);

// Normalises group `g` of image `n`: statistics in double over its channels_per_group x
// inner elements, as the double oracle would.
void group_norm_group(const GroupNormShape& s, int64_t n, int64_t g, double epsilon, const float* x,
                      const float* scale, const float* bias, float* y);

}  // namespace grove
