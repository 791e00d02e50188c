#pragma once
// The choices grove tune measures for a Conv (and the grids of a MatMul or Gemm), and what
// describes a Conv to the performance model (paper 003's layer configuration): shared by the
// profiler, the model's training set and the plan-time selection, so the three agree on what a
// candidate is.
#include <string>
#include <vector>

#include "plan/plan.h"

namespace grove::tune {

struct ConvConfig {
  int64_t batch = 1, cin = 0, cout = 0, in_h = 0, in_w = 0, out_h = 0, out_w = 0;
  int64_t kernel_h = 1, kernel_w = 1, stride_h = 1, stride_w = 1, group = 1;
};

struct ConvCandidate {
  std::string primitive;  // "gemm", "winograd", "direct", "nhwc", "nchwc", "winograd_nhwc" or "winograd_f2x3_nhwc"; empty for a MatMul or Gemm
  Shape extent;           // tile extent of the output: [N, C, H, W], [N, H, W, C] channels-last, [N, C / b, H, W, b] blocked
  int64_t tiles = 1;
};

// The primitives the performance model may price, in the order of its outputs; a model prices
// those its training set measured (PerfModel::output_names).
inline const std::vector<std::string>& model_primitives() {
  static const std::vector<std::string> names = {"gemm",   "winograd",           "nhwc", "winograd_nhwc",
                                                 "direct", "winograd_f2x3_nhwc", "nchwc"};
  return names;
}

// Whether the primitive runs channels-last (its extent is [N, H, W, C]).
bool channels_last_primitive(const std::string& primitive);

// A candidate's extent in [N, C, H, W] order, whatever layout its primitive runs in: what the
// performance model's features read, so one grid has one description in either layout.
Shape nchw_extent(const std::string& primitive, const Shape& extent);

// Whether node n of the plan is a Conv whose primitive and grid are chosen (2-D, float32,
// not depthwise, on a tile rule); fills `config` when it is.
bool tunable_conv(const Plan& plan, size_t n, ConvConfig* config = nullptr);

// The rule's own choice for node n of a plan: its grid and primitive ("nhwc" or
// "winograd_nhwc" where the rules put the conv channels-last; none for a MatMul).
ConvCandidate rule_choice(const Plan& plan, size_t n);

// The candidates for a conv of a plan made as written (NCHW): each primitive that can run it
// (only the GEMM in a bf16 plan; the direct kernel for up to 4 input channels) with grids of
// one, two and four tiles per thread, cut by
// rows first or by output channels first, the channels-last GEMM ("nhwc") with the GEMM's
// grids where its rule allows them, and the channels-last Winograd forms ("winograd_nhwc" and
// "winograd_f2x3_nhwc", where Winograd fits) with the NCHW primitives' grids their rule allows, and the
// channel-blocked direct conv ("nchwc", where both channel counts are whole blocks) with the GEMM's
// grids whose channel cuts are whole pairs of blocks. Distinct, the rule's choice among them if it is one.
std::vector<ConvCandidate> conv_candidates(const Plan& plan, size_t n);

int64_t tile_count(const Shape& shape, const Shape& extent);

// MatMul and Gemm (float32, a constant B, on a tile rule): their tile grid is chosen the same
// way, with no primitive to choose (empty). Grids of one, two and four tiles per thread, rows
// first or columns first.
bool tunable_matmul(const Plan& plan, size_t n);
std::vector<ConvCandidate> matmul_candidates(const Plan& plan, size_t n);

// The performance model's input for one candidate: logs of the sizes, the thread count, the
// tile count and the shares of the output's rows and channels one tile holds (`extent` in
// [N, C, H, W] order: nchw_extent).
std::vector<double> conv_features(const ConvConfig& c, const Shape& extent, int64_t tiles, int threads);

}  // namespace grove::tune
