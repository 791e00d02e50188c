// Tile rule of Conv (float32, NCHW, any groups, strides, pads, dilations): cut images,
// output channels and the first spatial dim (output rows). A tile reads the input rows its
// windows cover, over the input channels of the groups its output channels belong to.
//
// Each output element is bias + sum over (input channel, kernel row, kernel column), added
// in that order whatever the tile, so results do not depend on the grid. 2-D convs run as
// row axpys that the compiler vectorises; other ranks walk the window taps.
#include <algorithm>

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

// Output rows [r0, r1) x columns [c0, c1) of one (image, output channel) plane, 2-D.
void conv2d_plane(const ConvDims& c, const float* x_group, const float* w_oc, float bias, const Region& r, float* acc) {
  const WindowGeometry& g = c.g;
  const int64_t H = g.input[0], W = g.input[1], KH = g.kernel[0], KW = g.kernel[1];
  const int64_t sh = g.strides[0], sw = g.strides[1], dh = g.dilations[0], dw = g.dilations[1];
  const int64_t ph = g.pads_begin[0], pw = g.pads_begin[1];
  const int64_t r0 = r[2].begin, r1 = r[2].end, c0 = r[3].begin, c1 = r[3].end, cols = c1 - c0;
  std::fill(acc, acc + (r1 - r0) * cols, bias);
  // Per kernel column: the output columns whose tap lands inside the input row.
  std::vector<int64_t> lo(static_cast<size_t>(KW)), hi(static_cast<size_t>(KW));
  for (int64_t kw = 0; kw < KW; ++kw) {
    int64_t shift = kw * dw - pw;  // iw = ow * sw + shift
    int64_t first = shift >= 0 ? 0 : (-shift + sw - 1) / sw;
    int64_t last = W - 1 - shift < 0 ? -1 : (W - 1 - shift) / sw;  // inclusive
    lo[static_cast<size_t>(kw)] = std::max(c0, first);
    hi[static_cast<size_t>(kw)] = std::min(c1, last + 1);
  }
  for (int64_t ic = 0; ic < c.cin(); ++ic) {
    const float* xp = x_group + ic * H * W;
    const float* wk = w_oc + ic * KH * KW;
    for (int64_t kh = 0; kh < KH; ++kh)
      for (int64_t oh = r0; oh < r1; ++oh) {
        const int64_t ih = oh * sh - ph + kh * dh;
        if (ih < 0 || ih >= H) continue;
        const float* xrow = xp + ih * W;
        float* arow = acc + (oh - r0) * cols;
        for (int64_t kw = 0; kw < KW; ++kw) {
          const float wv = wk[kh * KW + kw];
          const int64_t shift = kw * dw - pw;
          const int64_t a = lo[static_cast<size_t>(kw)], b = hi[static_cast<size_t>(kw)];
          if (sw == 1) {
            for (int64_t ow = a; ow < b; ++ow) arow[ow - c0] += wv * xrow[ow + shift];
          } else {
            for (int64_t ow = a; ow < b; ++ow) arow[ow - c0] += wv * xrow[ow * sw + shift];
          }
        }
      }
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

void conv_run(const Node& node, std::span<const Tensor* const> in, std::span<Tensor* const> out, const Region& r) {
  std::vector<ValueInfo> infos = infos_of_tensors(in);
  if (!claimed(infos)) return reference_whole(node, in, out, r);
  check_region(node, r, out[0]->shape());
  const Tensor& x = *in[0];
  const Tensor& w = *in[1];
  const Tensor* bias = optional_input(in, 2);
  ConvDims c = conv_dims(node, x.shape(), w.shape());
  if (c.g.rank() != 2) return conv_taps(c, x, w, bias, *out[0], r);
  const int64_t H = c.g.input[0], W = c.g.input[1], OH = c.g.output[0], OW = c.g.output[1];
  const int64_t kernel = numel(c.g.kernel);
  const int64_t cols = r[3].size();
  std::vector<float> acc(static_cast<size_t>(std::max<int64_t>(0, r[2].size() * cols)));
  for (int64_t n = r[0].begin; n < r[0].end; ++n)
    for (int64_t oc = r[1].begin; oc < r[1].end; ++oc) {
      const int64_t grp = oc / c.cout();
      const float* x_group = x.data<float>() + (n * c.in_channels + grp * c.cin()) * H * W;
      const float* w_oc = w.data<float>() + oc * c.cin() * kernel;
      conv2d_plane(c, x_group, w_oc, bias ? bias->data<float>()[oc] : 0.0f, r, acc.data());
      float* y = out[0]->data<float>() + (n * c.out_channels + oc) * OH * OW;
      for (int64_t oh = r[2].begin; oh < r[2].end; ++oh)
        std::copy_n(acc.data() + (oh - r[2].begin) * cols, cols, y + oh * OW + r[3].begin);
    }
}

}  // namespace

void add_conv_rules(RuleTable& t) { t["Conv"] = {conv_cuttable, conv_needs, conv_run}; }

}  // namespace grove::tiling
