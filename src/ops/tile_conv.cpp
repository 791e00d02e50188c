// Tile rule of Conv (float32, NCHW, any groups, strides, pads, dilations): cut images,
// output channels and the first spatial dim (output rows). A tile reads the input rows its
// windows cover, over the input channels of the groups its output channels belong to.
//
// 2-D convs run on the SIMD GEMM: per image and group, C[out channels x pixels] =
// W[out channels x K] . im2col[K x pixels] with K = cin/group * kh * kw; W is read in place,
// the tile's im2col is packed straight into the kernel's panel layout, and C rows land in the
// NCHW output planes (a tile's pixels are contiguous there). One input channel per group
// (depthwise) runs a direct vectorised loop instead. Either way each output element is
// computed by the same sequence of operations whatever the tile, so results do not depend
// on the grid. Other ranks walk the window taps.
#include <algorithm>

#include "kernels/dwconv.h"
#include "kernels/gemm.h"
#include "kernels/im2col.h"
#include "ops/conv_geometry.h"
#include "ops/op_util.h"
#include "ops/tile_util.h"

namespace grove::tiling {
namespace {

struct ConvDims {
  WindowGeometry g;
  int64_t in_channels = 0, out_channels = 0, group = 1;
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
  return c;
}

bool claimed(std::span<const ValueInfo> in) {
  if (in.size() < 2 || !in[0].present || !in[1].present) return false;
  for (const auto& v : in)
    if (v.present && v.dtype != DType::f32) return false;
  return in[0].shape.size() >= 3;
}

std::vector<int64_t> conv_cuttable(const Node&, std::span<const ValueInfo> in, std::span<const ValueInfo> out) {
  if (!claimed(in)) return none_cuttable(out[0].shape);
  std::vector<int64_t> blocks = none_cuttable(out[0].shape);
  blocks[0] = blocks[1] = blocks[2] = 1;
  return blocks;
}

}  // namespace

// The input range along spatial dim d that output range `o` reads (shared with the pools).
Range window_input_range(const WindowGeometry& g, size_t d, const Range& o) {
  if (o.size() <= 0) return {0, 0};
  int64_t begin = o.begin * g.strides[d] - g.pads_begin[d];
  int64_t end = (o.end - 1) * g.strides[d] - g.pads_begin[d] + g.effective_kernel(d);
  begin = std::clamp<int64_t>(begin, 0, g.input[d]);
  end = std::clamp<int64_t>(end, begin, g.input[d]);
  return {begin, end};
}

namespace {

void conv_needs(const Node& node, std::span<const ValueInfo> in, std::span<const ValueInfo>, const Region& out_region,
                std::span<Region> in_regions) {
  ConvDims c = conv_dims(node, in[0].shape, in[1].shape);
  const Range& oc = out_region[1];
  Region x(in[0].shape.size());
  x[0] = out_region[0];
  x[1] = oc.size() > 0 ? Range{oc.begin / c.cout() * c.cin(), ((oc.end - 1) / c.cout() + 1) * c.cin()} : Range{0, 0};
  for (size_t d = 0; d < c.g.rank(); ++d) x[d + 2] = window_input_range(c.g, d, out_region[d + 2]);
  in_regions[0] = x;
  Region w = full_region(in[1].shape);
  w[0] = oc;
  in_regions[1] = w;
  if (in.size() > 2) in_regions[2] = in[2].present ? Region{oc} : Region{};
}

kernels::Conv2dShape conv2d_shape(const ConvDims& c) {
  const WindowGeometry& g = c.g;
  auto u = [](int64_t v) { return static_cast<size_t>(v); };
  return {.channels = u(c.cin()), .in_h = u(g.input[0]), .in_w = u(g.input[1]), .out_h = u(g.output[0]),
          .out_w = u(g.output[1]), .kernel_h = u(g.kernel[0]), .kernel_w = u(g.kernel[1]),
          .stride_h = u(g.strides[0]), .stride_w = u(g.strides[1]), .dilation_h = u(g.dilations[0]),
          .dilation_w = u(g.dilations[1]), .pad_top = u(g.pads_begin[0]), .pad_left = u(g.pads_begin[1])};
}

// Pixels packed per GEMM call: the packed im2col block (k x pixels) is kept to about
// kPackedFloats so it stays in L2 next to the GEMM's packed A block; at least kMinPixels so
// repacking A (the weights, once per call) stays a small part of the work.
constexpr size_t kPackedFloats = 96 * 1024;
constexpr size_t kMinPixels = 256;

struct ConvWorkspace {
  kernels::PackedB b;
  kernels::GemmScratch scratch;
};

void conv2d_gemm(const ConvDims& c, const Tensor& x, const Tensor& w, const Tensor* bias, Tensor& y, const Region& r) {
  thread_local ConvWorkspace ws;
  const kernels::Conv2dShape shape = conv2d_shape(c);
  const size_t k = shape.channels * shape.kernel_h * shape.kernel_w;
  const size_t in_plane = shape.in_h * shape.in_w, out_plane = shape.out_h * shape.out_w;
  const size_t q0 = static_cast<size_t>(r[2].begin) * shape.out_w, q1 = static_cast<size_t>(r[2].end) * shape.out_w;
  const size_t nr = kernels::gemm_blocking(kernels::active_isa()).nr;
  const size_t chunk = std::max(kMinPixels, kPackedFloats / std::max<size_t>(k, 1) / nr * nr);
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
        kernels::pack_im2col(ws.b, x_group, shape, qa, pixels);
        kernels::GemmCall call;
        call.m = static_cast<size_t>(oc1 - oc0);
        call.a = ws_data + static_cast<size_t>(oc0) * k;
        call.a_stride = k;
        call.n = pixels;
        call.c = ys + static_cast<size_t>(n * c.out_channels + oc0) * out_plane + qa;
        call.c_stride = out_plane;
        call.epilogue.row_bias = bs ? bs + oc0 : nullptr;
        kernels::gemm(call, ws.b, ws.scratch);
      }
    }
}

// One input channel per group: each output plane is a direct 2-D filter of one input plane.
void conv2d_depthwise(const ConvDims& c, const Tensor& x, const Tensor& w, const Tensor* bias, Tensor& y,
                      const Region& r) {
  const kernels::Conv2dShape shape = conv2d_shape(c);
  const size_t in_plane = shape.in_h * shape.in_w, out_plane = shape.out_h * shape.out_w;
  const size_t taps = shape.kernel_h * shape.kernel_w;
  for (int64_t n = r[0].begin; n < r[0].end; ++n)
    for (int64_t oc = r[1].begin; oc < r[1].end; ++oc) {
      const int64_t grp = oc / c.cout();
      kernels::dwconv2d({.x = x.data<float>() + static_cast<size_t>(n * c.in_channels + grp) * in_plane,
                         .w = w.data<float>() + static_cast<size_t>(oc) * taps,
                         .bias = bias ? bias->data<float>()[oc] : 0.0f,
                         .y = y.data<float>() + static_cast<size_t>(n * c.out_channels + oc) * out_plane,
                         .row_begin = static_cast<size_t>(r[2].begin),
                         .row_end = static_cast<size_t>(r[2].end),
                         .shape = shape});
    }
}

// Any spatial rank: per output position, its taps once, reused by every plane of the tile.
void conv_taps(const ConvDims& c, const Tensor& x, const Tensor& w, const Tensor* bias, Tensor& y, const Region& r) {
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
        ys[(n * c.out_channels + oc) * out_plane + q] = acc;
      }
  } while (next_index(step, extent));
}

void conv_run(const Node& node, std::span<const Tensor* const> in, std::span<Tensor* const> out, const Region& r,
              const void*) {
  std::vector<ValueInfo> infos = infos_of_tensors(in);
  if (!claimed(infos)) return reference_whole(node, in, out, r);
  check_region(node, r, out[0]->shape());
  const Tensor& x = *in[0];
  const Tensor& w = *in[1];
  const Tensor* bias = optional_input(in, 2);
  ConvDims c = conv_dims(node, x.shape(), w.shape());
  if (c.g.rank() != 2) return conv_taps(c, x, w, bias, *out[0], r);
  // cuttable() never cuts the width; a region that does is not worth a path of its own.
  if (r[3].begin != 0 || r[3].end != c.g.output[1]) return reference_whole(node, in, out, r);
  for (const Range& d : r)
    if (d.size() <= 0) return;
  if (c.cin() == 1) return conv2d_depthwise(c, x, w, bias, *out[0], r);
  conv2d_gemm(c, x, w, bias, *out[0], r);
}

}  // namespace

void add_conv_rules(RuleTable& t) { t["Conv"] = {conv_cuttable, conv_needs, conv_run}; }

}  // namespace grove::tiling
