// Tile rules of MaxPool, AveragePool (float32, without the Indices output) and of
// GlobalAveragePool / GlobalMaxPool: cut images, channels and (windowed pools) the first
// spatial dim. A tile reads its own channels and the input rows its windows cover.
#include <algorithm>
#include <limits>
#include <vector>

#include "kernels/maxpool.h"
#include "ops/conv/conv_geometry.h"
#include "ops/tile_util.h"

namespace grove::tiling {
namespace pool_rule {

WindowGeometry pool_geometry(const Node& node, const Shape& x) {
  std::vector<int64_t> kernel = node.attr_ints("kernel_shape");
  if (x.size() < 3 || kernel.empty()) throw Error(node.describe() + ": pool tiling needs N x C x D1 ... and kernel_shape");
  return window_geometry(node, std::span<const int64_t>(x.data() + 2, x.size() - 2), std::move(kernel),
                         node.attr_int("ceil_mode", 0) != 0);
}

bool claimed(std::span<const ValueInfo> in) {
  return in.size() == 1 && in[0].present && in[0].dtype == DType::f32 && in[0].shape.size() >= 3;
}

std::vector<int64_t> pool_cuttable(const Node&, std::span<const ValueInfo> in, std::span<const ValueInfo> out) {
  std::vector<int64_t> blocks = none_cuttable(out[0].shape);
  if (claimed(in)) blocks[0] = blocks[1] = blocks[2] = 1;
  return blocks;
}

void pool_needs(const Node& node, std::span<const ValueInfo> in, std::span<const ValueInfo>, const Region& out_region,
                std::span<Region> in_regions) {
  WindowGeometry g = pool_geometry(node, in[0].shape);
  Region x = {out_region[0], out_region[1]};
  for (size_t d = 0; d < g.rank(); ++d) x.push_back(window_input_range(g, d, out_region[d + 2]));
  in_regions[0] = x;
}

// AveragePool's divisor with count_include_pad: the taps inside the padded input.
int64_t padded_window_size(const WindowGeometry& g, std::span<const int64_t> pos) {
  int64_t count = 1;
  for (size_t d = 0; d < g.rank(); ++d) {
    int64_t inside = 0;
    for (int64_t k = 0; k < g.kernel[d]; ++k) {
      int64_t c = pos[d] * g.strides[d] - g.pads_begin[d] + k * g.dilations[d];
      inside += c >= -g.pads_begin[d] && c < g.input[d] + g.pads_end[d];
    }
    count *= inside;
  }
  return count;
}

// A max pool without dilation, plane by plane on kernels/maxpool.h: per output row the maximum
// down each input column of the window's rows, then across each window's columns.
// A worker's buffer: one row of column maxima.
struct MaxPoolScratch {
  std::vector<float> column;
};

void max_pool2d_separable(const WindowGeometry& g, const float* xs, float* ys, int64_t channels, const Region& r,
                          TileScratch& scratch) {
  const int64_t ih = g.input[0], iw = g.input[1], oh = g.output[0], ow = g.output[1];
  std::vector<float>& column = scratch.get<MaxPoolScratch>().column;
  column.resize(static_cast<size_t>(iw) + 1);
  kernels::MaxPool2dRowsCall call;
  call.in_h = static_cast<size_t>(ih), call.in_w = static_cast<size_t>(iw), call.out_w = static_cast<size_t>(ow);
  call.kernel_h = static_cast<size_t>(g.kernel[0]), call.kernel_w = static_cast<size_t>(g.kernel[1]);
  call.stride_h = static_cast<size_t>(g.strides[0]), call.stride_w = static_cast<size_t>(g.strides[1]);
  call.pad_top = static_cast<long>(g.pads_begin[0]), call.pad_left = static_cast<long>(g.pads_begin[1]);
  call.row_begin = static_cast<size_t>(r[2].begin), call.row_end = static_cast<size_t>(r[2].end);
  call.col_begin = static_cast<size_t>(r[3].begin), call.col_end = static_cast<size_t>(r[3].end);
  call.scratch = column.data();
  for (int64_t n = r[0].begin; n < r[0].end; ++n)
    for (int64_t c = r[1].begin; c < r[1].end; ++c) {
      call.x = xs + (n * channels + c) * ih * iw;
      call.y = ys + (n * channels + c) * oh * ow;
      kernels::max_pool2d_rows(call);
    }
}

// 2-D pools plane by plane: each output row reads a few input rows of one plane, where the
// general walk below visits every plane per output position (64 planes of 50 KB apart for
// ResNet-50's max pool, one cache miss per tap). The taps of a window are visited in the same
// row-major order, so sums and maxima are the same bits.
template <bool Max>
void pool2d_planes(const WindowGeometry& g, bool include_pad, const float* xs, float* ys, int64_t channels,
                   const Region& r, TileScratch& scratch) {
  if (Max && g.dilations[0] == 1 && g.dilations[1] == 1) return max_pool2d_separable(g, xs, ys, channels, r, scratch);
  const int64_t ih = g.input[0], iw = g.input[1], oh = g.output[0], ow = g.output[1];
  for (int64_t n = r[0].begin; n < r[0].end; ++n)
    for (int64_t c = r[1].begin; c < r[1].end; ++c) {
      const float* xp = xs + (n * channels + c) * ih * iw;
      float* yp = ys + (n * channels + c) * oh * ow;
      for (int64_t oy = r[2].begin; oy < r[2].end; ++oy) {
        const int64_t iy0 = oy * g.strides[0] - g.pads_begin[0];
        for (int64_t ox = r[3].begin; ox < r[3].end; ++ox) {
          const int64_t ix0 = ox * g.strides[1] - g.pads_begin[1];
          float best = std::numeric_limits<float>::lowest(), sum = 0;
          int64_t count = 0, padded_rows = 0, padded_cols = 0;
          for (int64_t ky = 0; ky < g.kernel[0]; ++ky) {
            const int64_t iy = iy0 + ky * g.dilations[0];
            padded_rows += iy >= -g.pads_begin[0] && iy < ih + g.pads_end[0];
            if (iy < 0 || iy >= ih) continue;
            const float* row = xp + iy * iw;
            for (int64_t kx = 0; kx < g.kernel[1]; ++kx) {
              const int64_t ix = ix0 + kx * g.dilations[1];
              if (ix < 0 || ix >= iw) continue;
              if constexpr (Max) best = row[ix] > best || row[ix] != row[ix] ? row[ix] : best;  // NaN propagates
              else sum += row[ix];
              ++count;
            }
          }
          if constexpr (Max) {
            yp[oy * ow + ox] = best;
          } else {
            for (int64_t kx = 0; kx < g.kernel[1]; ++kx) {
              const int64_t ix = ix0 + kx * g.dilations[1];
              padded_cols += ix >= -g.pads_begin[1] && ix < iw + g.pads_end[1];
            }
            const int64_t divisor = include_pad ? padded_rows * padded_cols : count;
            yp[oy * ow + ox] = divisor > 0 ? sum / static_cast<float>(divisor) : 0.0f;
          }
        }
      }
    }
}

template <bool Max>
void pool_run(const Node& node, std::span<const Tensor* const> in, std::span<Tensor* const> out, const Region& r, const void*, TileScratch& scratch) {
  std::vector<ValueInfo> infos = infos_of_tensors(in);
  if (!claimed(infos)) return reference_whole(node, in, out, r);
  check_region(node, r, out[0]->shape());
  WindowGeometry g = pool_geometry(node, in[0]->shape());
  const bool include_pad = node.attr_int("count_include_pad", 0) != 0;
  const int64_t channels = in[0]->dim(1), in_plane = numel(g.input), out_plane = numel(g.output);
  const float* xs = in[0]->data<float>();
  float* ys = out[0]->data<float>();
  std::vector<int64_t> lo, extent;
  for (size_t d = 0; d < g.rank(); ++d) lo.push_back(r[d + 2].begin), extent.push_back(r[d + 2].size());
  for (int64_t e : extent)
    if (e <= 0) return;
  if (g.rank() == 2) return pool2d_planes<Max>(g, include_pad, xs, ys, channels, r, scratch);
  std::vector<int64_t> step(g.rank(), 0), pos(g.rank());
  std::vector<Tap> taps;
  do {
    int64_t q = 0;
    for (size_t d = 0; d < g.rank(); ++d) pos[d] = lo[d] + step[d], q = q * g.output[d] + pos[d];
    window_taps(g, pos, g.input, taps);
    const int64_t divisor = include_pad ? padded_window_size(g, pos) : static_cast<int64_t>(taps.size());
    for (int64_t n = r[0].begin; n < r[0].end; ++n)
      for (int64_t c = r[1].begin; c < r[1].end; ++c) {
        const int64_t plane = n * channels + c;
        const float* xp = xs + plane * in_plane;
        float value;
        if constexpr (Max) {
          value = std::numeric_limits<float>::lowest();
          for (const Tap& t : taps) {
            const float v = xp[t.offset];
            value = v > value || v != v ? v : value;  // NaN propagates
          }
        } else {
          float sum = 0;
          for (const Tap& t : taps) sum += xp[t.offset];
          value = divisor > 0 ? sum / static_cast<float>(divisor) : 0.0f;
        }
        ys[plane * out_plane + q] = value;
      }
  } while (next_index(step, extent));
}

// ---- Global pools: one window over the whole plane; cut images and channels.

bool global_claimed(std::span<const ValueInfo> in) {
  return in.size() == 1 && in[0].present && in[0].dtype == DType::f32 && in[0].shape.size() >= 3;
}

std::vector<int64_t> global_cuttable(const Node&, std::span<const ValueInfo> in, std::span<const ValueInfo> out) {
  std::vector<int64_t> blocks = none_cuttable(out[0].shape);
  if (global_claimed(in)) blocks[0] = blocks[1] = 1;
  return blocks;
}

void global_needs(const Node&, std::span<const ValueInfo> in, std::span<const ValueInfo>, const Region& out_region,
                  std::span<Region> in_regions) {
  Region x = full_region(in[0].shape);
  x[0] = out_region[0];
  x[1] = out_region[1];
  in_regions[0] = x;
}

template <bool Max>
void global_run(const Node& node, std::span<const Tensor* const> in, std::span<Tensor* const> out, const Region& r, const void*, TileScratch&) {
  std::vector<ValueInfo> infos = infos_of_tensors(in);
  if (!global_claimed(infos)) return reference_whole(node, in, out, r);
  check_region(node, r, out[0]->shape());
  const int64_t channels = in[0]->dim(1), plane_size = numel(Shape(in[0]->shape().begin() + 2, in[0]->shape().end()));
  const float* xs = in[0]->data<float>();
  float* ys = out[0]->data<float>();
  for (int64_t n = r[0].begin; n < r[0].end; ++n)
    for (int64_t c = r[1].begin; c < r[1].end; ++c) {
      const float* xp = xs + (n * channels + c) * plane_size;
      float value;
      if constexpr (Max) {
        value = std::numeric_limits<float>::lowest();
        for (int64_t i = 0; i < plane_size; ++i) value = xp[i] > value || xp[i] != xp[i] ? xp[i] : value;  // NaN propagates
      } else {
        float sum = 0;
        for (int64_t i = 0; i < plane_size; ++i) sum += xp[i];
        value = plane_size > 0 ? sum / static_cast<float>(plane_size) : 0.0f;
      }
      ys[n * channels + c] = value;
    }
}

}  // namespace pool_rule

void add_pool_rules(RuleTable& t) {
  using namespace pool_rule;
  t["MaxPool"] = {pool_cuttable, pool_needs, pool_run<true>};
  t["AveragePool"] = {pool_cuttable, pool_needs, pool_run<false>};
  t["GlobalMaxPool"] = {global_cuttable, global_needs, global_run<true>};
  t["GlobalAveragePool"] = {global_cuttable, global_needs, global_run<false>};
}

}  // namespace grove::tiling
