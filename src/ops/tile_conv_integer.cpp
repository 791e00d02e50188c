// Tile rule of ConvInteger over 2-D images: cut by images and output rows, so each tile
// lays out only its own rows' windows. A tile writes its windows minus x_zero_point as the
// integer GEMM's B panels (im2col straight into kernels/igemm.h's IntPanels; padding is 0)
// and multiplies every output channel's row of W with them, which gives the reference's
// exact sums. Other ranks are one whole tile on the reference.
#include <algorithm>

#include "kernels/igemm.h"
#include "ops/conv_geometry.h"
#include "ops/op_util.h"
#include "ops/tile_util.h"

namespace grove::tiling {
namespace {

bool is_2d(std::span<const ValueInfo> in) { return in[0].shape.size() == 4 && in[1].shape.size() == 4; }

std::vector<int64_t> cuttable(const Node&, std::span<const ValueInfo> in, std::span<const ValueInfo> out) {
  if (!is_2d(in)) return none_cuttable(out[0].shape);
  return {1, 0, 1, 0};
}

WindowGeometry geometry_of(const Node& node, const Shape& x, const Shape& w) {
  return window_geometry(node, std::span<const int64_t>(x.data() + 2, 2), {w[2], w[3]}, false);
}

void needs(const Node& node, std::span<const ValueInfo> in, std::span<const ValueInfo>, const Region& out_region,
           std::span<Region> in_regions) {
  if (!is_2d(in)) {
    for (size_t i = 0; i < in.size(); ++i)
      if (has_input(in, i)) in_regions[i] = full_region(in[i].shape);
    return;
  }
  const WindowGeometry g = geometry_of(node, in[0].shape, in[1].shape);
  in_regions[0] = {out_region[0], {0, in[0].shape[1]}, window_input_range(g, 0, out_region[2]), {0, in[0].shape[3]}};
  in_regions[1] = full_region(in[1].shape);
  for (size_t i = 2; i < in.size(); ++i)
    if (has_input(in, i)) in_regions[i] = full_region(in[i].shape);
}

struct ConvIntegerWorkspace {
  kernels::IntPanels columns;
  std::vector<int16_t> row;
  std::vector<int32_t> w_zero;
  kernels::IntGemmScratch gemm;
};

// The windows of one group's channels minus x's zero point, straight into the GEMM's B
// panels: row (c, ki, kj), one column per output pixel; padding reads as the zero point, 0.
template <class T>
void im2col_panels(const T* x_image, int64_t first_channel, int64_t channels, const WindowGeometry& g, Range rows,
                   int32_t zero, ConvIntegerWorkspace& ws) {
  const int64_t ih = g.input[0], iw = g.input[1], ow = g.output[1];
  const size_t pixels = static_cast<size_t>(rows.size() * ow), width = kernels::IntPanels::kWidth;
  kernels::IntPanels& out = ws.columns;
  out.reset(static_cast<size_t>(channels * g.kernel[0] * g.kernel[1]), pixels);
  ws.row.resize(pixels);
  int16_t* row = ws.row.data();
  for (int64_t c = 0; c < channels; ++c) {
    const T* plane = x_image + (first_channel + c) * ih * iw;
    for (int64_t ki = 0; ki < g.kernel[0]; ++ki)
      for (int64_t kj = 0; kj < g.kernel[1]; ++kj) {
        // Output columns [x_lo, x_hi) read inside the row; the others read padding.
        const int64_t shift = kj * g.dilations[1] - g.pads_begin[1], stride = g.strides[1];
        const int64_t x_lo = std::min(ow, shift >= 0 ? 0 : (-shift + stride - 1) / stride);
        const int64_t x_hi = std::max(x_lo, std::min(ow, iw - shift <= 0 ? 0 : (iw - shift + stride - 1) / stride));
        for (int64_t y = rows.begin; y < rows.end; ++y) {
          const int64_t iy = y * g.strides[0] - g.pads_begin[0] + ki * g.dilations[0];
          int16_t* dst = row + (y - rows.begin) * ow;
          if (iy < 0 || iy >= ih) {
            std::fill(dst, dst + ow, int16_t{0});
            continue;
          }
          const T* src = plane + iy * iw;
          std::fill(dst, dst + x_lo, int16_t{0});
          if (stride == 1)
            for (int64_t x = x_lo; x < x_hi; ++x) dst[x] = static_cast<int16_t>(src[x + shift] - zero);
          else
            for (int64_t x = x_lo; x < x_hi; ++x) dst[x] = static_cast<int16_t>(src[x * stride + shift] - zero);
          std::fill(dst + x_hi, dst + ow, int16_t{0});
        }
        const size_t p = static_cast<size_t>((c * g.kernel[0] + ki) * g.kernel[1] + kj);
        for (size_t j0 = 0; j0 < pixels; j0 += width) {
          int16_t* panel = out.values.data() + out.index(p, j0);
          const size_t cols = std::min(width, pixels - j0);
          for (size_t t = 0; t < cols; ++t) panel[2 * t] = row[j0 + t];
        }
      }
  }
}

// Depthwise (one input and one output channel per group): a direct loop per channel, since
// a GEMM of one row would spend its time laying out windows. Sums of exact int32 products.
template <class X, class W>
void depthwise(const X* x, const W* w, const WindowGeometry& g, int64_t channels, Range rows, int32_t x_zero,
               const std::vector<int32_t>& w_zero, int32_t* y) {
  const int64_t ih = g.input[0], iw = g.input[1], oh = g.output[0], ow = g.output[1];
  const int64_t taps = g.kernel[0] * g.kernel[1];
  for (int64_t c = 0; c < channels; ++c) {
    const X* plane = x + c * ih * iw;
    const int32_t zw = w_zero.empty() ? 0 : w_zero[w_zero.size() == 1 ? 0 : static_cast<size_t>(c)];
    int32_t* out = y + c * oh * ow;
    for (int64_t r = rows.begin; r < rows.end; ++r) std::fill(out + r * ow, out + (r + 1) * ow, 0);
    for (int64_t ki = 0; ki < g.kernel[0]; ++ki)
      for (int64_t kj = 0; kj < g.kernel[1]; ++kj) {
        const int32_t wv = static_cast<int32_t>(w[c * taps + ki * g.kernel[1] + kj]) - zw;
        const int64_t shift = kj * g.dilations[1] - g.pads_begin[1], stride = g.strides[1];
        const int64_t x_lo = std::min(ow, shift >= 0 ? 0 : (-shift + stride - 1) / stride);
        const int64_t x_hi = std::max(x_lo, std::min(ow, iw - shift <= 0 ? 0 : (iw - shift + stride - 1) / stride));
        for (int64_t r = rows.begin; r < rows.end; ++r) {
          const int64_t iy = r * g.strides[0] - g.pads_begin[0] + ki * g.dilations[0];
          if (iy < 0 || iy >= ih) continue;
          const X* src = plane + iy * iw;
          int32_t* dst = out + r * ow;
          for (int64_t col = x_lo; col < x_hi; ++col)
            dst[col] += (static_cast<int32_t>(src[col * stride + shift]) - x_zero) * wv;
        }
      }
  }
}

void run_tile(const Node& node, std::span<const Tensor* const> in, std::span<Tensor* const> out, const Region& out_region,
              const void*) {
  const Tensor& x = *in[0];
  const Tensor& w = *in[1];
  Tensor& y = *out[0];
  check_region(node, out_region, y.shape());
  if (x.rank() != 4 || w.rank() != 4) return reference_whole(node, in, out, out_region);
  const WindowGeometry g = geometry_of(node, x.shape(), w.shape());
  const int64_t group = node.attr_int("group", 1), channels = x.dim(1), out_channels = w.dim(0);
  const int64_t cin = channels / group, cout = out_channels / group;
  const int64_t k = cin * g.kernel[0] * g.kernel[1], plane = g.output[0] * g.output[1];
  const Range images = out_region[0], rows = out_region[2];
  const Tensor* x_zero = optional_input(in, 2);
  const Tensor* w_zero = optional_input(in, 3);
  const int32_t x_zp = x_zero ? static_cast<int32_t>(x_zero->to_i64().at(0)) : 0;

  thread_local ConvIntegerWorkspace ws;
  ws.w_zero.clear();
  if (w_zero)
    for (int64_t v : w_zero->to_i64()) ws.w_zero.push_back(static_cast<int32_t>(v));

  kernels::IntGemmCall call;
  call.n = static_cast<size_t>(rows.size() * g.output[1]);
  call.k = static_cast<size_t>(k);
  call.a_stride = call.k;
  call.a_signed = w.dtype() == DType::i8;
  call.a_zero_per_row = ws.w_zero.size() > 1;
  call.c_stride = static_cast<size_t>(plane);
  const auto* w_bytes = reinterpret_cast<const uint8_t*>(w.raw());
  if (rows.size() <= 0) return;
  if (cin == 1 && cout == 1) {
    for (int64_t n = images.begin; n < images.end; ++n) {
      const int64_t image = n * channels * g.input[0] * g.input[1];
      int32_t* out = y.data<int32_t>() + n * out_channels * plane;
      auto run = [&](const auto* xs, const auto* ws_) { depthwise(xs + image, ws_, g, channels, rows, x_zp, ws.w_zero, out); };
      if (x.dtype() == DType::i8 && w.dtype() == DType::i8) run(x.data<int8_t>(), w.data<int8_t>());
      else if (x.dtype() == DType::i8) run(x.data<int8_t>(), w.data<uint8_t>());
      else if (w.dtype() == DType::i8) run(x.data<uint8_t>(), w.data<int8_t>());
      else run(x.data<uint8_t>(), w.data<uint8_t>());
    }
    return;
  }
  for (int64_t n = images.begin; n < images.end; ++n)
    for (int64_t grp = 0; grp < group; ++grp) {
      const int64_t image = n * channels * g.input[0] * g.input[1], lo = grp * cout;
      if (x.dtype() == DType::i8) im2col_panels(x.data<int8_t>() + image, grp * cin, cin, g, rows, x_zp, ws);
      else im2col_panels(x.data<uint8_t>() + image, grp * cin, cin, g, rows, x_zp, ws);
      call.m = static_cast<size_t>(cout);
      call.a = w_bytes + lo * k;
      call.a_zero = ws.w_zero.empty() ? nullptr : ws.w_zero.data() + (call.a_zero_per_row ? lo : 0);
      call.c = y.data<int32_t>() + (n * out_channels + lo) * plane + rows.begin * g.output[1];
      kernels::int_gemm_panels(call, ws.columns, ws.gemm);
    }
}

}  // namespace

void add_conv_integer_rules(RuleTable& t) { t["ConvInteger"] = TileRule{cuttable, needs, run_tile}; }

}  // namespace grove::tiling
