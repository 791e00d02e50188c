#pragma once
// The channels-last ops of grove.internal (channels_last.cpp), made by passes/layout_int8.cpp
// (QLinearConvNhwc and MaxPoolNhwc: QLinearConv and 8-bit MaxPool) and passes/layout_f32.cpp
// (ConvNhwc: the float32 Conv), with x as [N, H, W, C] and y as [N, OH, OW, M]. Shared by the
// ops and their tile rules.
#include <span>

#include "graph/graph.h"
#include "kernels/qadd.h"

namespace grove {

// QLinearConvNhwc may carry a residual QLinearAdd after it: inputs 9..15 are the residual r
// (shaped like y), r's scale and zero point, the conv output's scale and zero point as the add
// reads it, and the sum's scale and zero point; y is then the add's output. Its parameters,
// with the conv's byte as a and r as b (qadd.h):
inline constexpr size_t kResidualInput = 9;

// A ConvNhwc may read x as NCHW (a stem on an image) and write y into a channels-last Concat's
// buffer: the node's decisions say so (Decisions::x_nchw, y_channel_offset; reads_x_nchw and
// y_channel_offset read them). Its y stays channels-last either way.

kernels::QAddParams residual_add_params(const Node& node, std::span<const Tensor* const> in);

// The ONNX op a channels-last node computes (same inputs and attributes, NCHW x and y):
// QLinearConv for QLinearConvNhwc, MaxPool for MaxPoolNhwc, Conv for ConvNhwc.
Node nchw_twin(const Node& node);

// A 4-D tensor of 1-byte or 4-byte elements with dims 1..3 rotated: NCHW -> NHWC (to_nhwc) or back.
Tensor nchw_to_nhwc(const Tensor& t);
Tensor nhwc_to_nchw(const Tensor& t);

}  // namespace grove
