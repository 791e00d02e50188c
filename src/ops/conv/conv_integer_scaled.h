#pragma once
// The float epilogue of grove.internal ConvIntegerScaled (conv_integer_scaled.cpp), shared by
// its reference and its tile rule (tile_conv_integer.cpp).
#include <cstdint>

#include "graph/graph.h"

namespace grove {

class ScaledEpilogue {
 public:
  // scale: one value or one per output channel; bias: one per output channel, or null.
  ScaledEpilogue(const Node& node, const Tensor& scale, const Tensor* bias);
  // y[i] = act(float(sums[i]) * scale + bias) for `count` outputs of one output channel.
  void apply(int64_t channel, const int32_t* sums, float* y, int64_t count) const;

 private:
  const float* scale_;
  bool per_channel_scale_;
  const float* bias_;
  bool relu_;
};

}  // namespace grove
