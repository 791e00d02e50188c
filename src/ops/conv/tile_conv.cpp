// Tile rule of Conv (float32, NCHW, any groups, strides, pads, dilations): cut images,
// output channels and the first spatial dim (output rows). A tile reads the input rows its
// windows cover, over the input channels of the groups its output channels belong to.
//
// 2-D convs run on the SIMD GEMM: per image and group, C[out channels x pixels] =
// W[out channels x K] . im2col[K x pixels] with K = cin/group * kh * kw; W is packed once at
// plan time (`prepare`; read in place without it), the tile's im2col is packed straight into
// the kernel's panel layout, and C rows land in the
// NCHW output planes (a tile's pixels are contiguous there). One input channel per group
// (depthwise) runs a direct vectorised loop instead. 3x3 stride-1 layers with enough
// channels and pixels take Winograd F(4x4, 3x3) (tile_conv_winograd.h), with row cuts at
// multiples of 4. Either way each output element is computed by the same sequence of
// operations whatever the tile, so results do not depend on the grid. 3-D convs and 1-D
// depthwise walk the window taps. A fused epilogue (graph/node_decisions.h:
// residual input 3, activation) runs in the GEMM's epilogue, or after each depthwise row or
// tap sum, on every path.
#include <algorithm>
#include <cmath>
#include <memory>

#include "graph/node_decisions.h"
#include "kernels/conv_direct.h"
#include "kernels/dwconv.h"
#include "kernels/gemm.h"
#include "kernels/im2col.h"
#include "ops/conv/conv_gemm_forms.h"
#include "ops/conv/conv_geometry.h"
#include "ops/fused_epilogue.h"
#include "ops/op_util.h"
#include "ops/conv/tile_conv_winograd.h"
#include "ops/tile_util.h"

namespace grove::tiling {
namespace conv_rule {

struct ConvDims {
  WindowGeometry g;
  int64_t in_channels = 0, out_channels = 0, group = 1;
  kernels::Precision precision = kernels::Precision::f32;  // of the im2col GEMM (bf16 skips Winograd)
  ConvPrimitive primitive = ConvPrimitive::unset;  // the plan's choice (graph/node_decisions.h); unset: by rule
  int64_t cin() const { return in_channels / group; }   // input channels per group
  int64_t cout() const { return out_channels / group; } // output channels per group
};

ConvDims conv_dims(const Node& node, const Shape& x, const Shape& w) {
  if (x.size() < 3 || w.size() != x.size()) throw Error(node.describe() + ": Conv tiling needs X and W of one rank >= 3");
  ConvDims c;
  c.group = node.attr_int("group", 1);
  c.in_channels = x[1];
  c.out_channels = w[0];
  if (c.group < 1 || c.in_channels % c.group != 0 || c.out_channels % c.group != 0 || w[1] * c.group != c.in_channels)
    throw Error(node.describe() + ": W " + shape_str(w) + " does not fit X " + shape_str(x));
  c.g = window_geometry(node, std::span<const int64_t>(x.data() + 2, x.size() - 2),
                        std::vector<int64_t>(w.begin() + 2, w.end()), false);
  c.precision = gemm_precision(node);
  c.primitive = conv_primitive_choice(node);
  return c;
}

bool claimed(std::span<const ValueInfo> in) {
  if (in.size() < 2 || !in[0].present || !in[1].present) return false;
  for (const auto& v : in)
    if (v.present && v.dtype != DType::f32) return false;
  return in[0].shape.size() >= 3;
}

bool uses_winograd(const ConvDims& c);
bool uses_gemm(const ConvDims& c);
bool uses_direct(const ConvDims& c);
kernels::Conv2dShape conv2d_shape(const ConvDims& c);
constexpr int64_t kDepthwiseTileOutputs = 256;

std::vector<int64_t> conv_cuttable(const Node& node, std::span<const ValueInfo> in, std::span<const ValueInfo> out) {
  if (!claimed(in)) return none_cuttable(out[0].shape);
  std::vector<int64_t> blocks = none_cuttable(out[0].shape);
  blocks[0] = blocks[1] = blocks[2] = 1;
  // Rows first even where the weights outweigh the input (cut_weights_first in tile_util.h):
  // a channel cut repeats the tile's im2col packing, 9x the input for a 3x3 conv, and that
  // measured slower than streaming the packed weights (ResNet-50 at 2 threads, 14x14 256ch
  // 3x3: 37 vs 68 GFLOP/s per core; 7x7 2048x512 1x1: 31 vs 60).
  const ConvDims c = conv_dims(node, in[0].shape, in[1].shape);
  // The direct kernel's output channels come in register-tile blocks.
  if (uses_direct(c)) {
    blocks[1] = static_cast<int64_t>(kernels::kConvDirectChannels);
    return blocks;
  }
  // Winograd on a plane too small to cut by rows (28x28: 56 GEMM columns) is cut by images
  // when there are several, else by output channels, so each tile's 36 GEMMs keep all the
  // plane's columns (row tiles of 8 gave them 16: ResNet-50's 28x28 3x3 layers 2.9 -> 2.0 ms
  // busy per run, VGG-16 1.29x). A channel cut repeats the input transform per tile, which
  // cost ResNet-50 B8 6% until images were cut first.
  if (uses_winograd(c) && !winograd_cut_rows(conv2d_shape(c))) {
    blocks[2] = 0;
    if (c.g.output.size() == 2 && in[0].shape[0] > 1) blocks[1] = 0;
  } else if (uses_winograd(c)) {
    blocks[2] = kWinogradRows;
  }
  // Depthwise: rows in blocks of at least kDepthwiseTileOutputs outputs per plane, so small
  // planes (14x14, 7x7) are cut by channels instead. A row tile of a 7x7 plane was 2 rows, one
  // 16-lane vector per channel, and the per-plane call cost dominated (MobileNetV2's
  // 960-channel 7x7 layer: 72-140 us per tile for 0.24 MFLOP).
  if (c.g.rank() == 2 && !uses_gemm(c)) blocks[2] = (kDepthwiseTileOutputs + c.g.output[1] - 1) / c.g.output[1];
  // GEMM convs: output channels in whole register-tile columns, so that a tile of few pixels
  // can take the transposed form from the plan-time packed W^T instead of repacking its
  // weights (a 512-channel 7x7 layer cut 5 ways repacked 102 x 4608 weights per tile).
  if (c.g.rank() == 2 && uses_gemm(c) && !uses_winograd(c) && c.group == 1)
    blocks[1] = static_cast<int64_t>(kernels::gemm_blocking(kernels::active_isa(), c.precision).nr);
  return blocks;
}

}  // namespace conv_rule

// The input range along spatial dim d that output range `o` reads (shared with the pools).
Range window_input_range(const WindowGeometry& g, size_t d, const Range& o) {
  using namespace conv_rule;
  if (o.size() <= 0) return {0, 0};
  int64_t begin = o.begin * g.strides[d] - g.pads_begin[d];
  int64_t end = (o.end - 1) * g.strides[d] - g.pads_begin[d] + g.effective_kernel(d);
  begin = std::clamp<int64_t>(begin, 0, g.input[d]);
  end = std::clamp<int64_t>(end, begin, g.input[d]);
  return {begin, end};
}

namespace conv_rule {

void conv_needs(const Node& node, std::span<const ValueInfo> in, std::span<const ValueInfo>, const Region& out_region,
                std::span<Region> in_regions) {
  ConvDims c = conv_dims(node, in[0].shape, in[1].shape);
  const Range& oc = out_region[1];
  Region x(in[0].shape.size());
  x[0] = out_region[0];
  x[1] = oc.size() > 0 ? Range{oc.begin / c.cout() * c.cin(), ((oc.end - 1) / c.cout() + 1) * c.cin()} : Range{0, 0};
  for (size_t d = 0; d < c.g.rank(); ++d) x[d + 2] = window_input_range(c.g, d, out_region[d + 2]);
  // Winograd reads the whole input patches of the 4-row blocks the region's rows fall in.
  if (uses_winograd(c) && out_region[2].size() > 0) {
    const int64_t rows = kWinogradRows;
    x[2] = window_input_range(c.g, 0, {out_region[2].begin / rows * rows, (out_region[2].end + rows - 1) / rows * rows});
  }
  in_regions[0] = x;
  Region w = full_region(in[1].shape);
  w[0] = oc;
  in_regions[1] = w;
  if (in.size() > 2) in_regions[2] = in[2].present ? Region{oc} : Region{};
  if (has_input(in, kEpilogueResidualInput)) in_regions[kEpilogueResidualInput] = out_region;
}

// What a tile does after the sum: the fused residual (shaped like Y, or null) and activation.
struct ConvTail {
  const float* residual = nullptr;
  kernels::ActivationParams activation;
};

// A 1-D conv is the 2-D conv of an [L, 1] plane by a [K, 1] kernel: its output positions
// are rows, so the row cuts, im2col and GEMM paths serve it unchanged.
kernels::Conv2dShape conv2d_shape(const ConvDims& c) {
  const WindowGeometry& g = c.g;
  auto u = [](int64_t v) { return static_cast<size_t>(v); };
  if (g.rank() == 1)
    return {.channels = u(c.cin()), .in_h = u(g.input[0]), .in_w = 1, .out_h = u(g.output[0]), .out_w = 1,
            .kernel_h = u(g.kernel[0]), .kernel_w = 1, .stride_h = u(g.strides[0]), .stride_w = 1,
            .dilation_h = u(g.dilations[0]), .dilation_w = 1, .pad_top = u(g.pads_begin[0]), .pad_left = 0};
  return conv2d_shape_2d(g, c.cin());
}

// A worker's buffers for the im2col GEMM path.
struct ConvWorkspace {
  kernels::PackedB b;
  kernels::PackedB b16;          // bf16: im2col (or the input planes) in bf16 panels
  std::vector<float> im2col;     // bf16: a block of im2col in f32 before it is rounded
  kernels::GemmScratch scratch;
  std::vector<float> rows, c_t;  // transposed form: im2col rows and C^T
  std::vector<float> residual_t; // transposed form: the fused residual's block, transposed
  kernels::PackedB w_t;          // transposed form: W^T columns packed for this tile
};

// The weights of each group packed once (2-D convs through the GEMM only): as A for
// C = W . im2col, and as B for the transposed form C^T = im2col^T . W^T.
struct PreparedConvWeights {
  std::vector<kernels::PackedA> groups;
  std::vector<kernels::PackedB> groups_t;
};

// 2-D convs with one input channel per group take the direct depthwise loop. A 1-D conv has
// no width to vectorise that loop over, so one of a single group (a filter bank such as an
// STFT basis: one input channel, a long kernel, many output channels) is a GEMM too.
bool uses_gemm(const ConvDims& c) {
  if (c.g.rank() == 1) return c.cin() > 1 || c.group == 1;
  return c.g.rank() == 2 && c.cin() > 1;
}

// Few input channels in one group and a strided window (a stem on colour planes): the direct
// kernel, where im2col would gather each pixel once per tap, strided, for a GEMM of small k.
// At stride 1 im2col copies contiguous runs and measured faster (docs/kernels.md). A plan may
// choose the direct kernel for any conv it fits (ConvPrimitive::direct, graph/node_decisions.h); another
// choice keeps its primitive; bf16 nodes keep the AMX im2col path.
constexpr int64_t kDirectMaxInputChannels = 4;

bool fits_direct(const ConvDims& c) {
  const WindowGeometry& g = c.g;
  return g.rank() == 2 && c.group == 1 && c.precision == kernels::Precision::f32 && g.dilations[0] == 1 &&
         g.dilations[1] == 1 && static_cast<size_t>(g.kernel[1]) <= kernels::kConvDirectMaxKernelW;
}

bool uses_direct(const ConvDims& c) {
  if (c.primitive == ConvPrimitive::direct) return fits_direct(c);
  return c.primitive == ConvPrimitive::unset && c.cin() <= kDirectMaxInputChannels && c.g.rank() == 2 && c.g.strides[1] >= 2 &&
         fits_direct(c);
}

// Winograd is fp32 only; a node the plan marked bf16 runs the im2col GEMM. The plan's
// per-node choice, where it has one, decides over the rule.
bool uses_winograd(const ConvDims& c) {
  if (c.precision != kernels::Precision::f32 || c.g.rank() != 2) return false;
  if (c.primitive == ConvPrimitive::gemm || c.primitive == ConvPrimitive::nhwc || c.primitive == ConvPrimitive::direct) return false;  // nhwc: the GEMM, had it stayed NCHW
  // winograd_nhwc, winograd_f2x3_nhwc: the channels-last Winograd, Winograd too had the conv
  // stayed NCHW
  if (c.primitive == ConvPrimitive::winograd || c.primitive == ConvPrimitive::winograd_nhwc ||
      c.primitive == ConvPrimitive::winograd_f2x3_nhwc)
    return winograd_fits(conv2d_shape(c), c.group, c.out_channels);
  return winograd_by_rule(conv2d_shape(c), c.group, c.out_channels);
}

}  // namespace conv_rule

bool conv_node_uses_winograd(const Node& node, const Shape& x, const Shape& w) {
  using namespace conv_rule;
  if (x.size() != 4 || w.size() != 4) return false;
  ConvDims c = conv_dims(node, x, w);
  c.precision = kernels::Precision::f32;
  return uses_winograd(c);
}

bool conv_node_uses_winograd_channels_last(const Node& node, const Shape& x, const Shape& w) {
  using namespace conv_rule;
  if (x.size() != 4 || w.size() != 4) return false;
  const ConvDims c = conv_dims(node, x, w);
  return winograd_channels_last_by_rule(conv2d_shape(c), c.group, c.out_channels);
}

bool conv_node_fits_winograd(const Node& node, const Shape& x, const Shape& w) {
  using namespace conv_rule;
  if (x.size() != 4 || w.size() != 4) return false;
  const ConvDims c = conv_dims(node, x, w);
  return winograd_fits(conv2d_shape(c), c.group, c.out_channels);
}

bool conv_node_uses_direct(const Node& node, const Shape& x, const Shape& w) {
  using namespace conv_rule;
  if (x.size() != 4 || w.size() != 4) return false;
  ConvDims c = conv_dims(node, x, w);
  c.precision = kernels::Precision::f32;
  return uses_direct(c);
}

bool conv_node_fits_direct(const Node& node, const Shape& x, const Shape& w) {
  using namespace conv_rule;
  if (x.size() != 4 || w.size() != 4) return false;
  ConvDims c = conv_dims(node, x, w);
  c.precision = kernels::Precision::f32;
  return fits_direct(c);
}

namespace conv_rule {

std::shared_ptr<const void> conv_prepare(const Node& node, std::span<const ValueInfo> in,
                                         std::span<const Tensor* const> constants) {
  if (!claimed(in) || constants.size() < 2 || !constants[1]) return nullptr;
  ConvDims c = conv_dims(node, in[0].shape, in[1].shape);
  if (uses_winograd(c)) return winograd_prepare(*constants[1]);
  if (!uses_gemm(c) || uses_direct(c)) return nullptr;  // the direct kernel packs its tile's few weights
  const size_t k = static_cast<size_t>(c.cin() * numel(c.g.kernel));
  auto prepared = std::make_shared<PreparedConvWeights>();
  for (int64_t g = 0; g < c.group; ++g) {
    const float* w = constants[1]->data<float>() + static_cast<size_t>(g * c.cout()) * k;
    const kernels::Isa isa = kernels::active_isa();
    prepared->groups.push_back(kernels::pack_a(w, static_cast<size_t>(c.cout()), k, k, isa, c.precision));
    prepared->groups_t.push_back(
        kernels::pack_b(w, k, static_cast<size_t>(c.cout()), k, kernels::BLayout::n_by_k, isa, c.precision));
  }
  return prepared;
}

int64_t conv_prepared_bytes(const Node& node, std::span<const ValueInfo> in, const void* prepared) {
  if (uses_winograd(conv_dims(node, in[0].shape, in[1].shape))) return winograd_prepared_bytes(prepared);
  int64_t bytes = 0;
  for (const auto& a : static_cast<const PreparedConvWeights*>(prepared)->groups) bytes += int64_t(a.bytes());
  for (const auto& b : static_cast<const PreparedConvWeights*>(prepared)->groups_t) bytes += int64_t(b.bytes());
  return bytes;
}

void conv2d_gemm(const ConvDims& c, const Tensor& x, const Tensor& w, const Tensor* bias, const ConvTail& tail, Tensor& y,
                 const Region& r, const PreparedConvWeights* prepared, ConvWorkspace& ws) {
  const kernels::Conv2dShape shape = conv2d_shape(c);
  const size_t k = shape.channels * shape.kernel_h * shape.kernel_w;
  const size_t in_plane = shape.in_h * shape.in_w, out_plane = shape.out_h * shape.out_w;
  const size_t q0 = static_cast<size_t>(r[2].begin) * shape.out_w, q1 = static_cast<size_t>(r[2].end) * shape.out_w;
  const size_t nr = kernels::gemm_blocking(kernels::active_isa()).nr;
  const size_t packed_budget = kernels::is_bf16(c.precision) ? 2 * kPackedFloats : kPackedFloats;
  const size_t chunk = pixels_per_gemm_call(k, nr, packed_budget);
  const float* xs = x.data<float>();
  const float* ws_data = w.data<float>();
  const float* bs = bias ? bias->data<float>() : nullptr;
  float* ys = y.data<float>();
  for (int64_t n = r[0].begin; n < r[0].end; ++n)
    for (int64_t grp = r[1].begin / c.cout(); grp * c.cout() < r[1].end; ++grp) {
      const int64_t oc0 = std::max(r[1].begin, grp * c.cout()), oc1 = std::min(r[1].end, (grp + 1) * c.cout());
      const float* x_group = xs + static_cast<size_t>(n * c.in_channels + grp * c.cin()) * in_plane;
      for (size_t qa = q0; qa < q1; qa += chunk) {
        const size_t pixels = std::min(chunk, q1 - qa);
        const size_t rel0 = static_cast<size_t>(oc0 - grp * c.cout()), rel1 = static_cast<size_t>(oc1 - grp * c.cout());
        if (transposed_is_better(pixels, rel1 - rel0, nr)) {
          const size_t cols = rel1 - rel0;
          // A = im2col^T, given to the GEMM as im2col itself (k rows of pixels): for a
          // plain 1x1 that is the input planes, read in place.
          const float* a_t = x_group + qa;
          size_t a_stride = in_plane;
          if (!kernels::is_plain_1x1(shape)) {
            ws.rows.resize(k * pixels);
            kernels::im2col_matrix(ws.rows.data(), x_group, shape, qa, pixels);
            a_t = ws.rows.data();
            a_stride = pixels;
          }
          const kernels::PackedB* w_t = prepared ? &prepared->groups_t[static_cast<size_t>(grp)] : nullptr;
          size_t n0 = rel0;
          if (!w_t || rel0 % nr != 0) {
            kernels::pack_b_into(ws.w_t, ws_data + static_cast<size_t>(oc0) * k, k, cols, k, kernels::BLayout::n_by_k,
                                 kernels::active_isa(), c.precision);
            w_t = &ws.w_t;
            n0 = 0;
          }
          ws.c_t.resize(pixels * cols);
          kernels::GemmCall call;
          call.m = pixels;
          call.a = a_t;
          call.a_stride = a_stride;
          call.a_transposed = true;
          call.n0 = n0;
          call.n = cols;
          call.c = ws.c_t.data();
          call.c_stride = cols;
          call.epilogue.bias = bs ? bs + oc0 : nullptr;
          call.epilogue.activation = tail.activation;
          if (tail.residual) {  // the same adds in the same order as the direct form
            ws.residual_t.resize(pixels * cols);
            transpose_block(tail.residual + (static_cast<size_t>(n * c.out_channels + oc0)) * out_plane + qa, out_plane,
                            cols, pixels, ws.residual_t.data(), cols);
            call.epilogue.residual = ws.residual_t.data();
            call.epilogue.residual_stride = cols;
          }
          kernels::gemm(call, *w_t, ws.scratch);
          float* y_block = ys + static_cast<size_t>(n * c.out_channels + oc0) * out_plane + qa;
          transpose_block(ws.c_t.data(), cols, pixels, cols, y_block, out_plane);
          continue;
        }
        const bool bf16 = kernels::is_bf16(c.precision);
        if (bf16 && kernels::is_plain_1x1(shape))  // the input planes are B: rounded as they are packed
          kernels::pack_b_into(ws.b16, x_group + qa, k, pixels, in_plane, kernels::BLayout::k_by_n, kernels::active_isa(),
                               c.precision);
        else if (bf16)
          kernels::pack_im2col_bf16(ws.b16, x_group, shape, qa, pixels, c.precision, ws.im2col);
        else
          kernels::pack_im2col(ws.b, x_group, shape, qa, pixels);
        const kernels::PackedB& b = bf16 ? ws.b16 : ws.b;
        // Output channels [oc0, packed0) by packing their weights now, the rest from the
        // prepared tiles (which start on multiples of mr within the group).
        const size_t mr = prepared ? prepared->groups[static_cast<size_t>(grp)].mr : 1;
        const size_t split = prepared ? std::min(rel1, (rel0 + mr - 1) / mr * mr) : rel1;
        auto call_for = [&](size_t first, size_t last) {
          const size_t oc = static_cast<size_t>(grp * c.cout()) + first;
          kernels::GemmCall call;
          call.m = last - first;
          call.a = ws_data + oc * k;
          call.a_stride = k;
          call.n = pixels;
          const size_t at = (static_cast<size_t>(n * c.out_channels) + oc) * out_plane + qa;
          call.c = ys + at;
          call.c_stride = out_plane;
          call.epilogue.row_bias = bs ? bs + oc : nullptr;
          call.epilogue.residual = tail.residual ? tail.residual + at : nullptr;
          call.epilogue.residual_stride = out_plane;
          call.epilogue.activation = tail.activation;
          return call;
        };
        if (split > rel0) kernels::gemm(call_for(rel0, split), b, ws.scratch);
        if (rel1 > split) kernels::gemm(call_for(split, rel1), prepared->groups[static_cast<size_t>(grp)], split, b);
      }
    }
}

// Output rows packed this many at a time: the padded rows of one pack stay in cache while the
// kernel reads them for every output channel.
constexpr int64_t kDirectRowsPerPack = 8;

// A worker's buffers for the direct kernel: the tile's padded input rows, unprepared weights.
struct DirectConvScratch {
  std::vector<float> padded, weights;
};

void conv2d_direct(const ConvDims& c, const Tensor& x, const Tensor& w, const Tensor* bias, const ConvTail& tail,
                   Tensor& y, const Region& r, DirectConvScratch& ws) {
  std::vector<float>& padded = ws.padded;
  std::vector<float>& weights = ws.weights;
  const kernels::Conv2dShape s = conv2d_shape(c);
  const size_t taps = s.channels * s.kernel_h * s.kernel_w, channels = static_cast<size_t>(r[1].size());
  const size_t oc0 = static_cast<size_t>(r[1].begin);
  const size_t blocks = (channels + kernels::kConvDirectChannels - 1) / kernels::kConvDirectChannels;
  weights.resize(blocks * kernels::kConvDirectChannels * taps);
  kernels::pack_conv_direct_weights(w.data<float>() + oc0 * taps, channels, taps, weights.data());
  kernels::ConvDirectRows rows;
  rows.in_channels = s.channels;
  rows.stride_w = s.stride_w;
  rows.row_floats = kernels::conv_direct_row_floats(s.out_w, s.kernel_w, s.stride_w);
  const size_t most_rows = static_cast<size_t>(kDirectRowsPerPack - 1) * s.stride_h + s.kernel_h;
  padded.resize(s.channels * most_rows * s.stride_w * rows.row_floats);
  rows.data = padded.data();
  const size_t in_plane = s.in_h * s.in_w, out_plane = s.out_h * s.out_w;
  for (int64_t n = r[0].begin; n < r[0].end; ++n)
    for (int64_t oy = r[2].begin; oy < r[2].end; oy += kDirectRowsPerPack) {
      const size_t count = static_cast<size_t>(std::min(kDirectRowsPerPack, r[2].end - oy));
      rows.rows = (count - 1) * s.stride_h + s.kernel_h;
      const long iy0 = static_cast<long>(static_cast<size_t>(oy) * s.stride_h) - static_cast<long>(s.pad_top);
      kernels::pack_conv_direct_rows(x.data<float>() + static_cast<size_t>(n) * s.channels * in_plane, s.in_h, s.in_w, iy0,
                                     s.pad_left, rows);
      const size_t at = (static_cast<size_t>(n * c.out_channels) + oc0) * out_plane + static_cast<size_t>(oy) * s.out_w;
      kernels::ConvDirectCall call;
      call.x = rows;
      call.w = weights.data();
      call.bias = bias ? bias->data<float>() + oc0 : nullptr;
      call.y = y.data<float>() + at;
      call.residual = tail.residual ? tail.residual + at : nullptr;
      call.y_plane = out_plane;
      call.channels = channels;
      call.out_rows = count;
      call.out_w = s.out_w;
      call.kernel_h = s.kernel_h, call.kernel_w = s.kernel_w, call.stride_h = s.stride_h;
      call.activation = tail.activation;
      kernels::conv_direct(call);
    }
}

// One input channel per group: each output plane is a direct 2-D filter of one input plane.
void conv2d_depthwise(const ConvDims& c, const Tensor& x, const Tensor& w, const Tensor* bias, const ConvTail& tail,
                      Tensor& y, const Region& r) {
  const kernels::Conv2dShape shape = conv2d_shape(c);
  const size_t in_plane = shape.in_h * shape.in_w, out_plane = shape.out_h * shape.out_w;
  const size_t taps = shape.kernel_h * shape.kernel_w;
  for (int64_t n = r[0].begin; n < r[0].end; ++n)
    for (int64_t oc = r[1].begin; oc < r[1].end; ++oc) {
      const int64_t grp = oc / c.cout();
      const size_t plane = static_cast<size_t>(n * c.out_channels + oc) * out_plane;
      kernels::dwconv2d({.x = x.data<float>() + static_cast<size_t>(n * c.in_channels + grp) * in_plane,
                         .w = w.data<float>() + static_cast<size_t>(oc) * taps,
                         .bias = bias ? bias->data<float>()[oc] : 0.0f,
                         .y = y.data<float>() + plane,
                         .row_begin = static_cast<size_t>(r[2].begin),
                         .row_end = static_cast<size_t>(r[2].end),
                         .shape = shape,
                         .residual = tail.residual ? tail.residual + plane : nullptr,
                         .activation = tail.activation});
    }
}

// Any spatial rank: per output position, its taps once, reused by every plane of the tile.
void conv_taps(const ConvDims& c, const Tensor& x, const Tensor& w, const Tensor* bias, const ConvTail& tail, Tensor& y,
               const Region& r) {
  const WindowGeometry& g = c.g;
  const int64_t in_plane = numel(g.input), out_plane = numel(g.output), taps_per_kernel = numel(g.kernel);
  const float *xs = x.data<float>(), *ws = w.data<float>(), *bs = bias ? bias->data<float>() : nullptr;
  float* ys = y.data<float>();
  std::vector<int64_t> lo, extent;
  for (size_t d = 0; d < g.rank(); ++d) lo.push_back(r[d + 2].begin), extent.push_back(r[d + 2].size());
  for (int64_t e : extent)
    if (e <= 0) return;
  std::vector<int64_t> step(g.rank(), 0), pos(g.rank());
  std::vector<Tap> taps;
  do {
    int64_t q = 0;
    for (size_t d = 0; d < g.rank(); ++d) pos[d] = lo[d] + step[d], q = q * g.output[d] + pos[d];
    window_taps(g, pos, g.input, taps);
    for (int64_t n = r[0].begin; n < r[0].end; ++n)
      for (int64_t oc = r[1].begin; oc < r[1].end; ++oc) {
        const int64_t grp = oc / c.cout();
        float acc = bs ? bs[oc] : 0.0f;
        for (int64_t ic = 0; ic < c.cin(); ++ic) {
          const float* xp = xs + (n * c.in_channels + grp * c.cin() + ic) * in_plane;
          const float* wk = ws + (oc * c.cin() + ic) * taps_per_kernel;
          for (const Tap& t : taps) acc += xp[t.offset] * wk[t.index];
        }
        const int64_t at = (n * c.out_channels + oc) * out_plane + q;
        if (tail.residual) acc += tail.residual[at];
        ys[at] = kernels::apply_activation(acc, tail.activation);
      }
  } while (next_index(step, extent));
}

void conv_run(const Node& node, std::span<const Tensor* const> in, std::span<Tensor* const> out, const Region& r,
              const void* prepared, TileScratch& scratch) {
  std::vector<ValueInfo> infos = infos_of_tensors(in);
  if (!claimed(infos)) return reference_whole(node, in, out, r);
  check_region(node, r, out[0]->shape());
  const Tensor& x = *in[0];
  const Tensor& w = *in[1];
  const Tensor* bias = optional_input(in, 2);
  ConvDims c = conv_dims(node, x.shape(), w.shape());
  const Tensor* residual = optional_input(in, kEpilogueResidualInput);
  const ConvTail tail{residual ? residual->data<float>() : nullptr, epilogue_activation(node)};
  if (c.g.rank() > 2 || (c.g.rank() == 1 && !uses_gemm(c))) return conv_taps(c, x, w, bias, tail, *out[0], r);
  // cuttable() never cuts the width; a region that does is not worth a path of its own.
  if (c.g.rank() == 2 && (r[3].begin != 0 || r[3].end != c.g.output[1])) return reference_whole(node, in, out, r);
  for (const Range& d : r)
    if (d.size() <= 0) return;
  if (uses_direct(c)) return conv2d_direct(c, x, w, bias, tail, *out[0], r, scratch.get<DirectConvScratch>());
  if (!uses_gemm(c)) return conv2d_depthwise(c, x, w, bias, tail, *out[0], r);
  if (uses_winograd(c)) {
    kernels::Epilogue epilogue;
    epilogue.row_bias = bias ? bias->data<float>() : nullptr;
    epilogue.residual = tail.residual;
    epilogue.residual_stride = static_cast<size_t>(c.g.output[0] * c.g.output[1]);  // one NCHW plane per channel
    epilogue.activation = tail.activation;
    return winograd_conv_tile(conv2d_shape(c), x, w, *out[0], r, epilogue, prepared, scratch);
  }
  conv2d_gemm(c, x, w, bias, tail, *out[0], r, static_cast<const PreparedConvWeights*>(prepared),
              scratch.get<ConvWorkspace>());
}

// What a tile of the GEMM and Winograd paths repeats when the layer is cut finer: a channel
// cut packs (or transforms) its rows' input for every input channel again, and a tile
// narrower than the register tile pays for its padding lanes.
TileWork conv_tile_work(const Node& node, std::span<const ValueInfo> in, std::span<const ValueInfo> out,
                        const Shape& extent) {
  if (!claimed(in)) return {};
  const ConvDims c = conv_dims(node, in[0].shape, in[1].shape);
  if (c.g.rank() != 2 || !(uses_gemm(c) || uses_direct(c))) return {};  // depthwise: each tile does its share
  const Shape& y = out[0].shape;
  auto size = [&](size_t d) { return double(extent[d] > 0 ? std::min(extent[d], y[d]) : y[d]); };
  const double images = size(0), channels = size(1), rows = size(2), cols = double(c.g.output[1]);
  const kernels::Conv2dShape s = conv2d_shape(c);
  const double cin = double(s.channels);
  TileWork w;
  if (uses_direct(c)) {
    // Whole 4-channel blocks of products; the padded copy of the tile's input rows, whose
    // kernel-height overlap each cut of the rows packs again.
    const double blocks = std::ceil(channels / double(kernels::kConvDirectChannels));
    const double taps = cin * double(s.kernel_h * s.kernel_w);
    w.flops = 2 * images * blocks * double(kernels::kConvDirectChannels) * rows * cols * taps;
    const double packs = std::ceil(rows / double(kDirectRowsPerPack));
    const double padded_rows = (rows - packs) * double(s.stride_h) + packs * double(s.kernel_h);
    w.moves = images * cin * padded_rows * double(s.stride_w * kernels::conv_direct_row_floats(s.out_w, s.kernel_w, s.stride_w));
    return w;
  }
  if (uses_winograd(c)) {
    // F(4x4, 3x3): 36 products per 4x4 output block, input channel and output channel. The
    // input transform (read and written) covers every input channel whatever the tile's
    // output channels; the output transform only its own.
    const double blocks = images * std::ceil(rows / 4) * std::ceil(cols / 4);
    w.flops = 2 * 36 * channels * cin * blocks;
    w.moves = 2 * 36 * cin * blocks + 36 * channels * blocks;
    return w;
  }
  const kernels::GemmBlocking b = kernels::gemm_blocking(kernels::active_isa(), c.precision);
  auto up = [](double v, double m) { return std::ceil(v / m) * m; };
  const double k = cin * double(s.kernel_h * s.kernel_w), pixels = rows * cols;
  const double groups = std::ceil(channels / double(c.cout())), m = std::min(channels, double(c.cout()));
  const bool transposed = transposed_is_better(size_t(pixels), size_t(m), b.nr);
  const double lanes = transposed ? up(pixels, double(b.mr)) * up(m, double(b.nr)) : up(m, double(b.mr)) * up(pixels, double(b.nr));
  // The weights a row cut streams again come packed, read by the microkernel as it
  // multiplies: their cost is in the padded lanes, not in moves.
  const bool packs_input = !(transposed && kernels::is_plain_1x1(s));
  return gemm_tile_work(c.precision == kernels::Precision::bf16_amx, images * groups * 2 * k * lanes,
                        packs_input ? images * groups * k * pixels : 0, groups * k * m);
}

}  // namespace conv_rule

// A grouped conv's groups (not a depthwise conv's channels: those layers sit between 1x1
// convs that mix every channel, so there is no path to follow).
int64_t conv_paths(const Node& node, std::span<const ValueInfo> in) {
  using namespace conv_rule;
  if (!claimed(in)) return 0;
  const ConvDims c = conv_dims(node, in[0].shape, in[1].shape);
  return c.group > 1 && c.cin() > 1 ? c.group : 0;
}

void add_conv_rules(RuleTable& t) {
  using namespace conv_rule;
  TileRule rule{conv_cuttable, conv_needs, conv_run, conv_prepare, conv_prepared_bytes};
  rule.tile_work = conv_tile_work;
  rule.paths = conv_paths;
  t["Conv"] = rule;
}

}  // namespace grove::tiling
