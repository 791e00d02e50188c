// Tile rules of grove.internal MaxPoolNhwc and GlobalAveragePoolNhwc (channels_last.cpp).
// MaxPoolNhwc: output [N, OH, OW, C] cut by
// output rows and images. A pixel's C channels lie together, so each window tap is one
// elementwise maximum over a contiguous run, where NCHW pools gathered one value per plane:
// bytes vectorised by the compiler, floats by the per-ISA kernel (kernels/maxpool.h), which
// keeps each vector of channels in a register over the taps and takes a row's inner pixels as
// one run.
#include <algorithm>
#include <cstring>
#include <limits>
#include <vector>

#include "kernels/maxpool.h"
#include "ops/pool/pool_nhwc_rows.h"
#include "ops/tile_util.h"

namespace grove::tiling {
namespace pool_nhwc_rule {

WindowGeometry geometry_of(const Node& node, const Shape& x) {
  std::vector<int64_t> kernel = node.attr_ints("kernel_shape");
  if (x.size() != 4 || kernel.size() != 2) throw Error(node.describe() + ": needs a 4-D x and a 2-D kernel_shape");
  return window_geometry(node, std::span<const int64_t>(x.data() + 1, 2), std::move(kernel),
                         node.attr_int("ceil_mode", 0) != 0);
}

std::vector<int64_t> cuttable(const Node&, std::span<const ValueInfo>, std::span<const ValueInfo> out) {
  if (out[0].shape.size() != 4) return none_cuttable(out[0].shape);
  return {1, 1, 0, 0};
}

void needs(const Node& node, std::span<const ValueInfo> in, std::span<const ValueInfo>, const Region& out_region,
           std::span<Region> in_regions) {
  const WindowGeometry g = geometry_of(node, in[0].shape);
  in_regions[0] = {out_region[0], window_input_range(g, 0, out_region[1]), {0, in[0].shape[2]}, {0, in[0].shape[3]}};
}

// One pixel's channels: the maximum of each channel over the taps, 64 bytes of channels at a
// time held in a local block over all taps (a fixed-size block the compiler keeps in vector
// registers; the output is stored once).
template <class T>
void max_over_taps(const T* const* taps, size_t count, int64_t c, T* out) {
  constexpr int64_t kBlock = 64 / sizeof(T);
  int64_t k = 0;
  for (; k + kBlock <= c; k += kBlock) {
    T block[kBlock];
    std::fill(block, block + kBlock, std::numeric_limits<T>::lowest());
    for (size_t t = 0; t < count; ++t) {
      const T* in = taps[t] + k;
      for (int64_t j = 0; j < kBlock; ++j) {
        const T v = in[j];
        block[j] = v > block[j] ? v : block[j];
      }
    }
    std::copy(block, block + kBlock, out + k);
  }
  for (; k < c; ++k) {
    T m = std::numeric_limits<T>::lowest();
    for (size_t t = 0; t < count; ++t) m = std::max(m, taps[t][k]);
    out[k] = m;
  }
}

// Every output pixel of the region with its taps inside the plane (a window wholly in the
// padding has none and gives lowest()); `pixel(taps, count, out)` computes it. The geometry
// is read into locals: byte stores may alias anything, so vector entries would be read again
// after each one.
template <class T, class Pixel>
void pool(const Tensor& x, const WindowGeometry& g, const Region& r, Tensor& y, Pixel&& pixel) {
  const int64_t ih = g.input[0], iw = g.input[1], oh = g.output[0], ow = g.output[1], c = x.dim(3);
  const int64_t kh = g.kernel[0], kw = g.kernel[1], sy = g.strides[0], sx = g.strides[1];
  const int64_t py = g.pads_begin[0], px = g.pads_begin[1], dy = g.dilations[0], dx = g.dilations[1];
  const T* xs = x.data<T>();
  T* ys = y.data<T>();
  std::vector<const T*> taps;
  for (int64_t n = r[0].begin; n < r[0].end; ++n)
    for (int64_t oy = r[1].begin; oy < r[1].end; ++oy)
      for (int64_t ox = 0; ox < ow; ++ox) {
        taps.clear();
        for (int64_t ki = 0; ki < kh; ++ki) {
          const int64_t iy = oy * sy - py + ki * dy;
          if (iy < 0 || iy >= ih) continue;
          for (int64_t kj = 0; kj < kw; ++kj) {
            const int64_t ix = ox * sx - px + kj * dx;
            if (ix >= 0 && ix < iw) taps.push_back(xs + ((n * ih + iy) * iw + ix) * c);
          }
        }
        pixel(taps.data(), taps.size(), ys + ((n * oh + oy) * ow + ox) * c);
      }
}

// Bytes by max_over_taps.
template <class T>
void pool_bytes(const Tensor& x, const WindowGeometry& g, const Region& r, Tensor& y) {
  const int64_t c = x.dim(3);
  pool<T>(x, g, r, y, [c](const T* const* taps, size_t count, T* out) { max_over_taps(taps, count, c, out); });
}

void pool_f32(const Tensor& x, const WindowGeometry& g, const Region& r, Tensor& y) {
  const int64_t c = x.dim(3), in_image = g.input[0] * g.input[1] * c, out_image = g.output[0] * g.output[1] * c;
  for (int64_t n = r[0].begin; n < r[0].end; ++n)
    max_pool_nhwc_rows_f32(x.data<float>() + n * in_image, c, c, g, r[1].begin, r[1].end, y.data<float>() + n * out_image, c);
}

void run_tile(const Node& node, std::span<const Tensor* const> in, std::span<Tensor* const> out, const Region& r,
              const void*, TileScratch&) {
  Tensor& y = *out[0];
  check_region(node, r, y.shape());
  const WindowGeometry g = geometry_of(node, in[0]->shape());
  if (in[0]->dtype() == DType::i8) pool_bytes<int8_t>(*in[0], g, r, y);
  else if (in[0]->dtype() == DType::u8) pool_bytes<uint8_t>(*in[0], g, r, y);
  else if (in[0]->dtype() == DType::f32) pool_f32(*in[0], g, r, y);
  else reference_whole(node, in, out, r);
}

// ---- GlobalAveragePoolNhwc: y [N, C, 1, 1] cut by images and channels; a tile reads its
// channels of every pixel. Each channel's sum runs over the pixels in the order the NCHW rule
// walks its plane, in float, so both layouts give the same bits.

std::vector<int64_t> global_cuttable(const Node&, std::span<const ValueInfo>, std::span<const ValueInfo> out) {
  if (out[0].shape.size() != 4) return none_cuttable(out[0].shape);
  return {1, 1, 0, 0};
}

void global_needs(const Node&, std::span<const ValueInfo> in, std::span<const ValueInfo>, const Region& out_region,
                  std::span<Region> in_regions) {
  in_regions[0] = {out_region[0], {0, in[0].shape[1]}, {0, in[0].shape[2]}, out_region[1]};
}

// A worker's buffer: the tile's channel sums.
struct GlobalPoolScratch {
  std::vector<float> sums;
};

void global_run(const Node& node, std::span<const Tensor* const> in, std::span<Tensor* const> out, const Region& r,
                const void*, TileScratch& scratch) {
  Tensor& y = *out[0];
  check_region(node, r, y.shape());
  const Tensor& x = *in[0];
  if (x.rank() != 4 || x.dtype() != DType::f32) return reference_whole(node, in, out, r);
  const int64_t pixels = x.dim(1) * x.dim(2), c = x.dim(3), c0 = r[1].begin, count = r[1].size();
  if (count <= 0) return;
  std::vector<float>& sums = scratch.get<GlobalPoolScratch>().sums;
  sums.resize(static_cast<size_t>(count));
  for (int64_t n = r[0].begin; n < r[0].end; ++n) {
    std::fill(sums.begin(), sums.end(), 0.0f);
    const float* image = x.data<float>() + n * pixels * c + c0;
    for (int64_t p = 0; p < pixels; ++p)
      for (int64_t k = 0; k < count; ++k) sums[static_cast<size_t>(k)] += image[p * c + k];
    float* ys = y.data<float>() + n * c + c0;
    for (int64_t k = 0; k < count; ++k)
      ys[k] = pixels > 0 ? sums[static_cast<size_t>(k)] / static_cast<float>(pixels) : 0.0f;
  }
}

}  // namespace pool_nhwc_rule

// Float32 rows by the per-ISA kernel (kernels/maxpool.h): each output row's pixels whose
// windows lie inside the row are one run over the same tap offsets; the rest are runs of one
// with the taps inside the plane. Taps in (kernel row, kernel column) order, as pool() takes them.
void max_pool_nhwc_rows_f32(const float* x, int64_t x_stride, int64_t channels, const WindowGeometry& g, int64_t oy0,
                            int64_t oy1, float* y, int64_t y_stride) {
  using namespace pool_nhwc_rule;
  const int64_t ih = g.input[0], iw = g.input[1], ow = g.output[1], c = x_stride;  // floats from one pixel to the next
  const int64_t kh = g.kernel[0], kw = g.kernel[1], sy = g.strides[0], sx = g.strides[1];
  const int64_t py = g.pads_begin[0], px = g.pads_begin[1], dy = g.dilations[0], dx = g.dilations[1];
  // Columns [first, last) have every kernel column inside the row: ox * sx - px >= 0 and
  // ox * sx - px + (kw - 1) * dx < iw.
  const int64_t first = std::min(ow, (px + sx - 1) / sx);
  const int64_t reach = (kw - 1) * dx, right = iw - 1 - reach + px;
  const int64_t last = right < 0 ? first : std::max(first, std::min(ow, right / sx + 1));
  std::vector<ptrdiff_t> inner, edge;
  kernels::MaxPoolNhwcRun run;
  run.channels = static_cast<size_t>(channels);
  for (int64_t oy = oy0; oy < oy1; ++oy) {
    const float* image = x;
    float* out = y + oy * ow * y_stride;
    inner.clear();  // from the pixel at column ox * sx - px of row 0
    for (int64_t ki = 0; ki < kh; ++ki) {
      const int64_t iy = oy * sy - py + ki * dy;
      if (iy < 0 || iy >= ih) continue;
      for (int64_t kj = 0; kj < kw; ++kj) inner.push_back((iy * iw + kj * dx) * c);
    }
    auto edge_pixel = [&](int64_t ox) {
      edge.clear();  // from the image's first pixel
      for (int64_t ki = 0; ki < kh; ++ki) {
        const int64_t iy = oy * sy - py + ki * dy;
        if (iy < 0 || iy >= ih) continue;
        for (int64_t kj = 0; kj < kw; ++kj) {
          const int64_t ix = ox * sx - px + kj * dx;
          if (ix >= 0 && ix < iw) edge.push_back((iy * iw + ix) * c);
        }
      }
      run.x = image, run.offsets = edge.data(), run.taps = edge.size(), run.pixels = 1;
      run.y = out + ox * y_stride;
      kernels::max_pool_nhwc_run(run);
    };
    for (int64_t ox = 0; ox < first; ++ox) edge_pixel(ox);
    if (first < last) {
      run.x = image + (first * sx - px) * c, run.offsets = inner.data(), run.taps = inner.size();
      run.pixels = static_cast<size_t>(last - first), run.x_step = static_cast<size_t>(sx * c);
      run.y = out + first * y_stride, run.y_step = static_cast<size_t>(y_stride);
      kernels::max_pool_nhwc_run(run);
    }
    for (int64_t ox = std::max(first, last); ox < ow; ++ox) edge_pixel(ox);
  }
}

void add_pool_nhwc_rules(RuleTable& t) {
  using namespace pool_nhwc_rule;
  t[internal_rule_key("MaxPoolNhwc")] = TileRule{cuttable, needs, run_tile};
  t[internal_rule_key("GlobalAveragePoolNhwc")] = TileRule{global_cuttable, global_needs, global_run};
}

}  // namespace grove::tiling
