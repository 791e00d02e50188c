// The two grove.internal ops of dynamic feature-map pruning (Antidote, thesis 004 ch. 3.1),
// made by passes/feature_pruning.cpp from a model's `grove.antidote` metadata:
//  - AttentionKeep(x) -> keep: x is a float [N, C, H, W] feature map. Per image it ranks the
//    channels by their mean over H x W (channel attention) and the positions by their mean
//    over C (spatial attention), and writes int64 [N, channels + positions]: the kept
//    channel indices, then the kept position indices (h * W + w), each ascending; with an
//    attribute block = B > 1, kept blocks of B x B positions instead (the block's score is the
//    mean of its positions' means; index row * ceil(W / B) + column). Ties keep the lower index. Means are summed in double, in one fixed order of lanes
//    (kernels/keep_scores.h), so every ISA and layout makes the same choice.
//  - ApplyKeep(x, keep): x with every channel and position that keep does not name set to 0,
//    for the map's readers that are not pruned convs (a residual Add, a pool);
//  - PrunedConv(x, w, [bias], [residual], [keep]): the Conv (attributes and fused epilogue as
//    on Conv) of x with every channel and position that `keep` does not name set to 0, at
//    the output positions whose window centre is kept (computed_outputs); the other outputs
//    are 0. Attribute `channels` says how many of keep's columns are channels. Without keep
//    it ranks x itself, as AttentionKeep with its attributes would.
// The references spell that out; the tile rule (tile_pruned_conv.cpp) reduces over the kept
// channels only, and computes the kept output positions only.
#include "ops/pruning/feature_pruning.h"

#include <algorithm>
#include <array>
#include <cstring>
#include <functional>
#include <numeric>

#include "graph/node_decisions.h"
#include "kernels/keep_scores.h"
#include "ops/conv/conv_gemm_forms.h"
#include "ops/conv/conv_geometry.h"
#include "ops/evaluate.h"
#include "ops/op.h"
#include "ops/op_util.h"

namespace grove {

Node pruned_conv_twin(const Node& node) {
  Node twin = node;
  twin.op_type = "Conv";
  twin.domain.clear();
  twin.inputs.resize(std::min<size_t>(twin.inputs.size(), kPrunedConvKeepInput));
  while (!twin.inputs.empty() && twin.inputs.back().empty()) twin.inputs.pop_back();
  twin.attrs.erase(kAttrKeepChannels);
  twin.attrs.erase(kAttrKeepPositions);
  twin.attrs.erase(kAttrKeepBlock);
  twin.opset = std::max(node.opset, 11);
  return twin;
}

int64_t keep_units(int64_t height, int64_t width, int64_t block) {
  return (height + block - 1) / block * ((width + block - 1) / block);
}

int64_t keep_block(const Node& node) {
  const int64_t block = node.attr_int(kAttrKeepBlock, 1);
  if (block < 1) throw Error(node.describe() + ": block must be at least 1, not " + std::to_string(block));
  return block;
}

void computed_outputs(const kernels::Conv2dShape& s, const unsigned char* kept_position, unsigned char* computed) {
  const auto centre = [](size_t o, size_t stride, size_t pad, size_t kernel, size_t dilation) {
    return static_cast<int64_t>(o * stride + (kernel - 1) / 2 * dilation) - static_cast<int64_t>(pad);
  };
  for (size_t oh = 0; oh < s.out_h; ++oh) {
    const int64_t ih = centre(oh, s.stride_h, s.pad_top, s.kernel_h, s.dilation_h);
    for (size_t ow = 0; ow < s.out_w; ++ow) {
      const int64_t iw = centre(ow, s.stride_w, s.pad_left, s.kernel_w, s.dilation_w);
      const bool inside = ih >= 0 && ih < int64_t(s.in_h) && iw >= 0 && iw < int64_t(s.in_w);
      computed[oh * s.out_w + ow] = inside && kept_position[size_t(ih) * s.in_w + size_t(iw)];
    }
  }
}

namespace {

// Eight partial sums in a fixed order (kernels/keep_scores.h): element i goes to lane i % 8,
// each lane in increasing i, then the lanes pairwise. The vector units add the lanes at once,
// and every call adds in the same order.
double sum(const float* x, int64_t count) {
  double lanes[8] = {};
  int64_t i = 0;
  for (; i + 8 <= count; i += 8)
    for (int j = 0; j < 8; ++j) lanes[j] += x[i + j];
  for (; i < count; ++i) lanes[i % 8] += x[i];
  return kernels::combine_lanes(lanes);
}

// The `count` highest of scratch.score[0, size), ascending by index, into out; ties keep the
// lower index. The count-th highest score is the threshold: one pass then takes every index
// above it, and those at it from the lowest, until there are `count` (no sort).
void top(AttentionKeepScratch& scratch, int64_t size, int64_t count, int64_t* out) {
  const std::vector<double>& score = scratch.score;
  std::vector<double>& ranked = scratch.ranked;
  ranked.assign(score.begin(), score.begin() + size);
  std::nth_element(ranked.begin(), ranked.begin() + (count - 1), ranked.end(), std::greater<double>());
  const double threshold = ranked[size_t(count - 1)];
  int64_t at_threshold = count;  // how many of those at the threshold are kept
  for (int64_t i = 0; i < size; ++i) at_threshold -= score[size_t(i)] > threshold;
  for (int64_t i = 0, taken = 0; i < size && taken < count; ++i) {
    const double v = score[size_t(i)];
    if (v > threshold || (v == threshold && at_threshold-- > 0)) out[taken++] = i;
  }
}

// The position part of a keep row from score[p] = position p's mean: the top positions, or with
// block > 1 the top blocks, each block's score the sum of its positions' scores in row-major
// order over their count (score[0, plane) is overwritten).
void top_positions(AttentionKeepScratch& scratch, int64_t height, int64_t width, int64_t block, int64_t count,
                   int64_t* out) {
  if (block <= 1) return top(scratch, height * width, count, out);
  std::vector<double>& score = scratch.score;
  std::vector<double>& position = scratch.positions;
  position.assign(score.begin(), score.begin() + height * width);
  const int64_t per_row = (width + block - 1) / block, units = keep_units(height, width, block);
  for (int64_t u = 0; u < units; ++u) {
    const int64_t r0 = u / per_row * block, c0 = u % per_row * block;
    const int64_t r1 = std::min(height, r0 + block), c1 = std::min(width, c0 + block);
    double sum = 0;
    for (int64_t r = r0; r < r1; ++r)
      for (int64_t c = c0; c < c1; ++c) sum += position[size_t(r * width + c)];
    score[size_t(u)] = sum / double((r1 - r0) * (c1 - c0));
  }
  top(scratch, units, count, out);
}

}  // namespace

void attention_keep(const float* x, int64_t channels, int64_t height, int64_t width, int64_t keep_channels,
                    int64_t keep_positions, int64_t* keep, AttentionKeepScratch& scratch, int64_t block) {
  const int64_t plane = height * width;
  std::vector<double>& score = scratch.score;
  score.assign(static_cast<size_t>(std::max(channels, plane)), 0.0);
  // Keeping all of one kind keeps them whatever their scores: those sums are skipped.
  if (keep_channels >= channels) {
    std::iota(keep, keep + channels, int64_t{0});
  } else {
    for (int64_t c = 0; c < channels; ++c) score[size_t(c)] = sum(x + c * plane, plane) / double(plane);
    top(scratch, channels, keep_channels, keep);
  }
  if (keep_positions >= keep_units(height, width, block)) {
    std::iota(keep + keep_channels, keep + keep_channels + keep_positions, int64_t{0});
    return;
  }
  // Positions: channel c goes to lane c % 8 of every position ([8][plane]), then the lanes pairwise.
  std::vector<double>& lanes = scratch.lanes;
  lanes.assign(static_cast<size_t>(8 * plane), 0.0);
  for (int64_t c = 0; c < channels; ++c) {
    double* lane = lanes.data() + (c % 8) * plane;
    for (int64_t p = 0; p < plane; ++p) lane[p] += x[c * plane + p];
  }
  double position_lanes[8];
  for (int64_t p = 0; p < plane; ++p) {
    for (int64_t j = 0; j < 8; ++j) position_lanes[j] = lanes[size_t(j * plane + p)];
    score[size_t(p)] = kernels::combine_lanes(position_lanes) / double(channels);
  }
  top_positions(scratch, height, width, block, keep_positions, keep + keep_channels);
}

void attention_keep_nhwc(const float* x, int64_t channels, int64_t height, int64_t width, int64_t keep_channels,
                         int64_t keep_positions, int64_t* keep, AttentionKeepScratch& scratch, int64_t block) {
  const int64_t plane = height * width;
  const bool all_channels = keep_channels >= channels;
  const bool all_positions = keep_positions >= keep_units(height, width, block);
  std::vector<double>& score = scratch.score;  // the channel means, then the position means
  std::vector<double>& positions = scratch.positions;
  scratch.lanes.resize(all_channels ? 0 : static_cast<size_t>(8 * channels));
  score.resize(static_cast<size_t>(std::max(channels, plane)));
  positions.resize(all_positions ? 0 : static_cast<size_t>(plane));
  // Keeping all of one kind keeps them whatever their scores: those sums are skipped.
  if (!all_channels || !all_positions)
    kernels::keep_means_nhwc(x, size_t(channels), size_t(plane), scratch.lanes.data(),
                             all_channels ? nullptr : score.data(), all_positions ? nullptr : positions.data());
  if (all_channels) std::iota(keep, keep + channels, int64_t{0});
  else top(scratch, channels, keep_channels, keep);
  if (all_positions) {
    std::iota(keep + keep_channels, keep + keep_channels + keep_positions, int64_t{0});
    return;
  }
  std::copy(positions.begin(), positions.end(), score.begin());
  top_positions(scratch, height, width, block, keep_positions, keep + keep_channels);
}

void keep_flags(const Node& node, const int64_t* keep, int64_t keep_channels, int64_t keep_positions, int64_t channels,
                int64_t height, int64_t width, KeepFlags& flags) {
  const int64_t block = keep_block(node), per_row = (width + block - 1) / block;
  const int64_t units = keep_units(height, width, block);
  flags.kept_channel.assign(size_t(channels), 0);
  for (int64_t i = 0; i < keep_channels; ++i) {
    if (keep[i] < 0 || keep[i] >= channels) throw Error(node.describe() + ": keep index out of range");
    flags.kept_channel[size_t(keep[i])] = 1;
  }
  const int64_t* positions = keep + keep_channels;
  // Every position kept (a row of 0, 1, ..., units - 1): one fill. Each tile of a gated conv
  // reads its image's row, and setting the flags one index at a time cost about 4 us per tile
  // on a 28 x 28 map (Zen 5), more than a decision that keeps every position.
  bool every = keep_positions == units;
  for (int64_t i = 0; every && i < keep_positions; ++i) every = positions[i] == i;
  if (every) return void(flags.kept_position.assign(size_t(height * width), 1));
  flags.kept_position.assign(size_t(height * width), 0);
  for (int64_t i = 0; i < keep_positions; ++i) {
    const int64_t u = positions[i];
    if (u < 0 || u >= units) throw Error(node.describe() + ": keep index out of range");
    if (block == 1) {
      flags.kept_position[size_t(u)] = 1;
      continue;
    }
    const int64_t r0 = u / per_row * block, c0 = u % per_row * block;
    for (int64_t r = r0; r < std::min(height, r0 + block); ++r)
      std::fill(flags.kept_position.begin() + r * width + c0, flags.kept_position.begin() + r * width + std::min(width, c0 + block), 1);
  }
}

const int64_t* pruned_conv_keep_row(const Node& node, const Tensor& x, const Tensor* keep, int64_t n, bool nhwc,
                                    std::vector<int64_t>& row, AttentionKeepScratch& scratch) {
  const int64_t kc = node.attr_int(kAttrKeepChannels, 0), kp = node.attr_int(kAttrKeepPositions, 0);
  if (keep && !keep->empty()) return keep->data<int64_t>() + n * (kc + kp);
  const int64_t channels = nhwc ? x.dim(3) : x.dim(1), height = nhwc ? x.dim(1) : x.dim(2);
  const int64_t width = nhwc ? x.dim(2) : x.dim(3);
  row.resize(size_t(kc + kp));
  const auto rank = nhwc ? &attention_keep_nhwc : &attention_keep;
  rank(x.data<float>() + n * channels * height * width, channels, height, width, kc, kp, row.data(), scratch,
       keep_block(node));
  return row.data();
}

namespace {

// x with the channels and positions keep does not name set to 0.
Tensor masked_map(const Node& node, const Tensor& x, const Tensor& keep) {
  const int64_t kc = node.attr_int(kAttrKeepChannels, 0), kp = node.attr_int(kAttrKeepPositions, 0);
  const int64_t channels = x.dim(1), plane = x.dim(2) * x.dim(3);
  Tensor masked(DType::f32, x.shape());  // zero-filled
  KeepFlags flags;
  for (int64_t n = 0; n < x.dim(0); ++n) {
    keep_flags(node, keep.data<int64_t>() + n * (kc + kp), kc, kp, channels, x.dim(2), x.dim(3), flags);
    for (int64_t c = 0; c < channels; ++c)
      for (int64_t p = 0; p < plane; ++p)
        if (flags.kept_channel[size_t(c)] && flags.kept_position[size_t(p)])
          masked.data<float>()[(n * channels + c) * plane + p] = x.data<float>()[(n * channels + c) * plane + p];
  }
  return masked;
}

void check_counts(const Node& node, const Shape& x) {
  if (x.size() != 4) throw Error(node.describe() + ": x must be a 4-D [N, C, H, W] feature map, not " + shape_str(x));
  const int64_t c = node.attr_int(kAttrKeepChannels, 0), p = node.attr_int(kAttrKeepPositions, 0);
  const int64_t block = keep_block(node), units = keep_units(x[2], x[3], block);
  if (c < 1 || c > x[1]) throw Error(node.describe() + ": keeps " + std::to_string(c) + " of " + std::to_string(x[1]) + " channels");
  if (p < 1 || p > units)
    throw Error(node.describe() + ": keeps " + std::to_string(p) + " of " + std::to_string(units) +
                (block > 1 ? " blocks" : " positions"));
}

void infer_keep(const Node& node, std::span<const ValueInfo> in, std::span<ValueInfo> out) {
  require_inputs(node, in.size(), 1, 1);
  if (in[0].dtype != DType::f32) throw Unsupported(node.describe() + ": x must be float32");
  check_counts(node, in[0].shape);
  out[0] = ValueInfo{DType::i64, {in[0].shape[0], node.attr_int(kAttrKeepChannels, 0) + node.attr_int(kAttrKeepPositions, 0)}};
}

void reference_keep(const Node& node, std::span<const Tensor* const> in, std::span<Tensor* const> out) {
  const Tensor& x = *in[0];
  const int64_t c = node.attr_int(kAttrKeepChannels, 0), p = node.attr_int(kAttrKeepPositions, 0);
  const int64_t plane = x.dim(2) * x.dim(3);
  AttentionKeepScratch scratch;
  for (int64_t n = 0; n < x.dim(0); ++n)
    attention_keep(x.data<float>() + n * x.dim(1) * plane, x.dim(1), x.dim(2), x.dim(3), c, p,
                   out[0]->data<int64_t>() + n * (c + p), scratch, keep_block(node));
}

void infer_apply_keep(const Node& node, std::span<const ValueInfo> in, std::span<ValueInfo> out) {
  require_inputs(node, in.size(), 2, 2);
  if (in[0].dtype != DType::f32) throw Unsupported(node.describe() + ": x must be float32");
  check_counts(node, in[0].shape);
  const int64_t columns = node.attr_int(kAttrKeepChannels, 0) + node.attr_int(kAttrKeepPositions, 0);
  if (in[1].dtype != DType::i64 || in[1].shape != Shape{in[0].shape[0], columns})
    throw Error(node.describe() + ": keep must be int64 [" + std::to_string(in[0].shape[0]) + ", " + std::to_string(columns) + "]");
  out[0] = ValueInfo{DType::f32, in[0].shape};
}

void reference_apply_keep(const Node& node, std::span<const Tensor* const> in, std::span<Tensor* const> out) {
  const Tensor masked = masked_map(node, *in[0], *in[1]);
  std::memcpy(out[0]->raw(), masked.raw(), masked.bytes());
}

void infer_pruned_conv(const Node& node, std::span<const ValueInfo> in, std::span<ValueInfo> out) {
  if (in.size() < 2 || in.size() > kPrunedConvKeepInput + 1)
    throw Error(node.describe() + ": needs x, w, bias, residual (either may be empty) and keep (or none: x ranked)");
  if (in[0].dtype != DType::f32) throw Unsupported(node.describe() + ": x must be float32");
  check_counts(node, in[0].shape);
  const int64_t columns = node.attr_int(kAttrKeepChannels, 0) + node.attr_int(kAttrKeepPositions, 0);
  if (pruned_conv_reads_keep(in)) {
    const ValueInfo& keep = in[kPrunedConvKeepInput];
    if (keep.dtype != DType::i64 || keep.shape != Shape{in[0].shape[0], columns})
      throw Error(node.describe() + ": keep must be int64 [" + std::to_string(in[0].shape[0]) + ", " + std::to_string(columns) + "]");
  }
  if (node.attr_int("group", 1) != 1) throw Unsupported(node.describe() + ": only group 1 is pruned");
  std::vector<ValueInfo> conv_in(in.begin(), in.begin() + std::ptrdiff_t(pruned_conv_twin(node).inputs.size()));
  std::vector<ValueInfo> y = infer_node(pruned_conv_twin(node), conv_in);
  out[0] = y.at(0);
}

// A PrunedConv's keep rows: its keep input, or without one AttentionKeep's reference on x.
Tensor keep_rows(const Node& node, std::span<const Tensor* const> in) {
  const Tensor* given = optional_input(in, kPrunedConvKeepInput);
  if (given && !given->empty()) return *given;
  const int64_t kc = node.attr_int(kAttrKeepChannels, 0), kp = node.attr_int(kAttrKeepPositions, 0);
  Tensor keep(DType::i64, {in[0]->dim(0), kc + kp});
  Node gate = node;
  gate.op_type = "AttentionKeep";
  reference_keep(gate, in.first(1), std::span<Tensor* const>(std::array<Tensor*, 1>{&keep}));
  return keep;
}

void reference_pruned_conv(const Node& node, std::span<const Tensor* const> in, std::span<Tensor* const> out) {
  const Tensor keep = keep_rows(node, in);
  const Tensor masked = masked_map(node, *in[0], keep);
  const Node twin = pruned_conv_twin(node);
  std::vector<const Tensor*> conv_in(in.begin(), in.begin() + std::ptrdiff_t(twin.inputs.size()));
  conv_in[0] = &masked;
  const std::vector<Tensor> y = evaluate_node(twin, conv_in);
  if (y.at(0).shape() != out[0]->shape()) throw Error(node.describe() + ": output shape does not match");
  std::memcpy(out[0]->raw(), y[0].raw(), y[0].bytes());
  // Pruned positions: the outputs whose window centre is pruned are 0.
  const Tensor& x = *in[0];
  const int64_t kc = node.attr_int(kAttrKeepChannels, 0), kp = node.attr_int(kAttrKeepPositions, 0);
  if (kp >= keep_units(x.dim(2), x.dim(3), keep_block(node))) return;
  const Shape& w = in[1]->shape();
  const kernels::Conv2dShape s =
      tiling::conv2d_shape_2d(window_geometry(node, std::span<const int64_t>(x.shape().data() + 2, 2), {w[2], w[3]}, false), x.dim(1));
  const int64_t out_plane = out[0]->dim(2) * out[0]->dim(3), m = out[0]->dim(1);
  std::vector<unsigned char> computed(static_cast<size_t>(out_plane));
  KeepFlags flags;
  for (int64_t n = 0; n < x.dim(0); ++n) {
    keep_flags(node, keep.data<int64_t>() + n * (kc + kp), kc, kp, x.dim(1), x.dim(2), x.dim(3), flags);
    computed_outputs(s, flags.kept_position.data(), computed.data());
    float* yn = out[0]->data<float>() + n * m * out_plane;
    for (int64_t o = 0; o < m; ++o)
      for (int64_t q = 0; q < out_plane; ++q)
        if (!computed[size_t(q)]) yn[o * out_plane + q] = 0.0f;
  }
}

}  // namespace

void register_feature_pruning_ops(OpRegistry& r) {
  r.add_internal("AttentionKeep", {.infer = &infer_keep,
                                   .reference = &reference_keep,
                                   .flops = [](const Node&, std::span<const ValueInfo> in, std::span<const ValueInfo>) {
                                     const Shape* x = known_shape(in, 0);  // both means
                                     return x ? checked_mul(2, numel(*x)) : int64_t{0};
                                   }});
  // The products over the kept channels only, at the share of output positions computed
  // that the kept positions give (exact for stride 1; the expected share otherwise).
  r.add_internal("PrunedConv", {.infer = &infer_pruned_conv,
                                .reference = &reference_pruned_conv,
                                .flops = [](const Node& node, std::span<const ValueInfo> in, std::span<const ValueInfo> out) {
                                  const Shape* y = known_shape(out, 0);
                                  const Shape* w = known_shape(in, 1);
                                  const Shape* x = known_shape(in, 0);
                                  if (!y || !w || !x || w->size() != 4 || x->size() != 4) return int64_t{0};
                                  const int64_t all = checked_mul(checked_mul(2, numel(*y)),
                                                                  checked_mul(node.attr_int("channels", 0), checked_mul((*w)[2], (*w)[3])));
                                  const int64_t units = keep_units((*x)[2], (*x)[3], std::max<int64_t>(node.attr_int(kAttrKeepBlock, 1), 1));
                                  const int64_t kept = node.attr_int(kAttrKeepPositions, units);
                                  if (units <= 0 || kept >= units) return all;
                                  return static_cast<int64_t>(static_cast<double>(all) * static_cast<double>(kept) / static_cast<double>(units));
                                }});
  r.add_internal("ApplyKeep", OpSpec{&infer_apply_keep, &reference_apply_keep});
}

}  // namespace grove
