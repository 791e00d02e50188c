#pragma once
// grove.internal QLinearConvNhwc (quant_conv_nhwc.cpp): QLinearConv on channels-last
// activations, made by passes/layout_int8.cpp. Shared by the op and its tile rule.
#include "graph/graph.h"

namespace grove {

// The ONNX QLinearConv this node computes (same inputs and attributes, NCHW x and y).
Node qlinear_conv_twin(const Node& node);

// A 4-D tensor of 1-byte elements with dims 1..3 rotated: NCHW -> NHWC (to_nhwc) or back.
Tensor nchw_to_nhwc(const Tensor& t);
Tensor nhwc_to_nchw(const Tensor& t);

}  // namespace grove
