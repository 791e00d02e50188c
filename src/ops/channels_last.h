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

// A ConvNhwc whose x is NCHW [N, C, H, W] (int attribute, 1): a stem on an image, whose row
// copies gather the few channels themselves, so the image needs no Transpose before it
// (passes/layout_f32.cpp). Its y stays channels-last.
inline constexpr const char* kAttrXNchw = "grove_x_nchw";
inline bool reads_x_nchw(const Node& node) { return node.attr_int(kAttrXNchw, 0) != 0; }
// Where a ConvNhwc writes into a channels-last Concat's buffer (TileRule::writes_channel_slice):
// the first channel of its y there (int attribute; absent: y is its own tensor). The plan sets it.
inline constexpr const char* kAttrYChannelOffset = "grove_y_channel_offset";
inline int64_t y_channel_offset(const Node& node) { return node.attr_int(kAttrYChannelOffset, 0); }

kernels::QAddParams residual_add_params(const Node& node, std::span<const Tensor* const> in);

// The ONNX op a channels-last node computes (same inputs and attributes, NCHW x and y):
// QLinearConv for QLinearConvNhwc, MaxPool for MaxPoolNhwc, Conv for ConvNhwc.
Node nchw_twin(const Node& node);

// A 4-D tensor of 1-byte or 4-byte elements with dims 1..3 rotated: NCHW -> NHWC (to_nhwc) or back.
Tensor nchw_to_nhwc(const Tensor& t);
Tensor nhwc_to_nchw(const Tensor& t);

}  // namespace grove
