#pragma once
// The channel-blocked layout (NCHWc) of grove.internal ConvNchwc (channels_blocked.cpp), made by
// passes/layout_nchwc.cpp for a conv a tuning choice runs there: a 4-D NCHW value
// [N, C, H, W] as [N, C / b, H, W, b], b channels per block. Shared by the op, its tile rule
// and the pass.
#include "graph/graph.h"

namespace grove {

inline Shape blocked_shape(const Shape& s, int64_t block) { return {s[0], s[1] / block, s[2], s[3], block}; }
// And back: [N, C / b, H, W, b] -> [N, C, H, W].
inline Shape unblocked_shape(const Shape& s) { return {s[0], s[1] * s[4], s[2], s[3]}; }

// Whether a float32 Conv of these NCHW shapes (x [N, C, H, W], W [M, C, kh, kw]) can run
// channel-blocked by `block`: 2-D, one group or depthwise, no dilation, a kernel at most
// kernels::kConvNchwcMaxKernelW wide, both channel counts whole blocks.
bool conv_fits_nchwc(const Node& node, const Shape& x, const Shape& w, int64_t block);
// One group per channel, one output channel per group (W [C, 1, kh, kw]).
bool conv_is_depthwise(const Node& node, const Shape& x, const Shape& w);

// A float32 NCHW tensor blocked by `block` (its channels a multiple of it), and back.
Tensor nchw_to_blocked(const Tensor& t, int64_t block);
Tensor blocked_to_nchw(const Tensor& t);

}  // namespace grove
