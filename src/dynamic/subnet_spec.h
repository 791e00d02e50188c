#pragma once
// What a dynamic model says about its sub-nets (docs/dynamic.md). The model is a plain ONNX
// file of the full network; its metadata_props key `grove.subnets` holds one line per
// statement (lines split at '\n' or ';', words at spaces):
//
//   exempt conv0 fc                   layers that keep all their output channels
//   subnet w25 ratio=0.25 accuracy=0.93
//   subnet nu1 conv1=12 conv2=24      per-layer kept output channels; unlisted layers keep all
//
// A layer is a Conv, Gemm or MatMul with constant weights, named by its node name or its
// weight initializer's name. Without an `exempt` line only the last layer is exempt (paper
// 002: "all layers except the last one"; slicing the first one too keeps a ResNet's identity
// shortcuts as narrow as its branches). An initializer named `NAME@SUBNET` replaces NAME in that
// sub-net (private BatchNorm statistics).
#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace grove {

struct SubnetSpec {
  std::string name;
  double ratio = 1.0;                         // uniform width; 1.0 when `channels` is given
  std::map<std::string, int64_t> channels;    // layer -> kept output channels (non-uniform)
  double accuracy = -1;                       // as the model says; < 0 when not given
};

struct DynamicSpec {
  std::vector<SubnetSpec> subnets;
  std::vector<std::string> exempt;
  bool exempt_given = false;  // false: the last layer is exempt
};

inline constexpr const char* kSubnetsMetadataKey = "grove.subnets";

// Parses the metadata text; throws Error naming the line for bad syntax, a ratio outside
// (0, 1], a channel count below 1 or a repeated sub-net name.
DynamicSpec parse_dynamic_spec(const std::string& text);

// Sub-nets at uniform width ratios, for a plain model sliced for latency studies: named by
// the ratio ("0.5"). Throws for a ratio outside (0, 1].
DynamicSpec uniform_dynamic_spec(const std::vector<double>& ratios);

}  // namespace grove
