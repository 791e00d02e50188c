#pragma once
// grove.internal QLinearAdd (quant_add.cpp): its kernel parameters from the node and inputs,
// shared by the reference and the tile rule.
#include <span>

#include "graph/graph.h"
#include "kernels/qadd.h"

namespace grove {

kernels::QAddParams qadd_params(const Node& node, std::span<const Tensor* const> in);

}  // namespace grove
