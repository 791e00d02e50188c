// Tile rules of ConvInteger and QLinearConv over 2-D images: cut by images and output rows, so each tile
// lays out only its own rows' windows. A tile writes its windows minus x_zero_point as the
// integer GEMM's B panels (im2col straight into kernels/igemm.h's IntPanels; padding is 0)
// and multiplies every output channel's row of W with them, which gives the reference's
// exact sums. Other ranks are one whole tile on the reference.
#include <algorithm>
#include <cstring>
#include <memory>

#include "graph/node_decisions.h"
#include "kernels/igemm.h"
#include "kernels/qgemm.h"
#include "kernels/requantize.h"
#include "ops/conv/conv_geometry.h"
#include "ops/conv/conv_integer_scaled.h"
#include "ops/op_util.h"
#include "ops/quant_util.h"
#include "ops/tile_util.h"

namespace grove::tiling {
namespace conv_integer_rule {

bool is_2d(std::span<const ValueInfo> in) { return in[0].shape.size() == 4 && in[1].shape.size() == 4; }

// Images, output rows, then output channels (in blocks of the 8-bit kernel's rows, one group
// only) where rows run out. Cutting channels first where the weights outweigh the windows
// measured no better (ResNet-50 int8, docs/quantization.md): each channel tile repeats the
// windows' layout.
std::vector<int64_t> integer_conv_cuttable(const Node& node, const Shape& x, const Shape& w, const Shape& y) {
  if (x.size() != 4 || w.size() != 4) return none_cuttable(y);
  const int64_t channel_block = node.attr_int("group", 1) == 1 ? static_cast<int64_t>(kernels::PackedS8::kRows) : 0;
  return {1, channel_block, 1, 0};
}

std::vector<int64_t> cuttable(const Node& node, std::span<const ValueInfo> in, std::span<const ValueInfo> out) {
  return integer_conv_cuttable(node, in[0].shape, in[1].shape, out[0].shape);
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

// Kernel column kj reads input column x * stride + shift for output column x: inside the row
// for x in [x_lo, x_hi), padding elsewhere.
struct WindowColumns {
  int64_t shift, x_lo, x_hi;
};
WindowColumns window_columns(const WindowGeometry& g, int64_t kj) {
  const int64_t iw = g.input[1], ow = g.output[1];
  const int64_t shift = kj * g.dilations[1] - g.pads_begin[1], stride = g.strides[1];
  const int64_t x_lo = std::min(ow, shift >= 0 ? 0 : (-shift + stride - 1) / stride);
  const int64_t x_hi = std::max(x_lo, std::min(ow, iw - shift <= 0 ? 0 : (iw - shift + stride - 1) / stride));
  return {shift, x_lo, x_hi};
}

// A worker's buffers for the integer conv rules: the int16 path's panels, row and GEMM
// packing; the 8-bit path's byte windows and panels, their column sums, the per-channel
// requantization terms; the tile's int32 sums before requantization.
struct ConvIntegerWorkspace {
  kernels::IntPanels columns;
  std::vector<int16_t> row;
  std::vector<int32_t> w_zero;
  kernels::IntGemmScratch gemm;
  std::vector<uint8_t> bytes;
  kernels::U8Panels panels;
  std::vector<int32_t> column_sums, add, sums;
  std::vector<float> multiplier;
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
        const auto [shift, x_lo, x_hi] = window_columns(g, kj);
        const int64_t stride = g.strides[1];
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
               const std::vector<int32_t>& w_zero, int32_t* y, int64_t channel_stride) {
  const int64_t ih = g.input[0], iw = g.input[1], ow = g.output[1];
  const int64_t taps = g.kernel[0] * g.kernel[1];
  for (int64_t c = 0; c < channels; ++c) {
    const X* plane = x + c * ih * iw;
    const int32_t zw = w_zero.empty() ? 0 : w_zero[w_zero.size() == 1 ? 0 : static_cast<size_t>(c)];
    int32_t* out = y + c * channel_stride;  // row r of the channel at (r - rows.begin) * ow
    std::fill(out, out + rows.size() * ow, 0);
    for (int64_t ki = 0; ki < g.kernel[0]; ++ki)
      for (int64_t kj = 0; kj < g.kernel[1]; ++kj) {
        const int32_t wv = static_cast<int32_t>(w[c * taps + ki * g.kernel[1] + kj]) - zw;
        const auto [shift, x_lo, x_hi] = window_columns(g, kj);
        const int64_t stride = g.strides[1];
        for (int64_t r = rows.begin; r < rows.end; ++r) {
          const int64_t iy = r * g.strides[0] - g.pads_begin[0] + ki * g.dilations[0];
          if (iy < 0 || iy >= ih) continue;
          const X* src = plane + iy * iw;
          int32_t* dst = out + (r - rows.begin) * ow;
          for (int64_t col = x_lo; col < x_hi; ++col)
            dst[col] += (static_cast<int32_t>(src[col * stride + shift]) - x_zero) * wv;
        }
      }
  }
}

// The int32 sums of ConvInteger for `images` x all output channels x `rows`, written at
// out + (n - images.begin) * image_stride + channel * channel_stride + (row - rows.begin) * width.
// W - w_zero packed once at plan time as the GEMM's A (kernels::pack_a_pairs), when both are constants.
struct PreparedWeights {
  std::vector<int16_t> pairs;
  // On a CPU with AVX512_VNNI: each group's rows of W packed for the 8-bit kernel
  // (kernels/qgemm.h) as int8 values w8. Empty: the int16 path.
  std::vector<kernels::PackedS8> s8_groups;
  // ConvInteger's weights need not be int8 with zero point 0: per output channel,
  // (W - w_zero) - w8, the same for every element of the row (uint8 W is stored as W - 128).
  // Empty when all are 0 (int8 W, zero point 0).
  std::vector<int32_t> s8_offsets;
};

// Whether the 8-bit kernel can take this conv: groups that are not depthwise, VNNI on this
// CPU, and int8 W with all zero points 0; ConvInteger also takes uint8 W and any zero points
// (ONNX Runtime's dynamic quantization writes both), the offsets' extra term summed apart.
bool takes_s8_kernel(const Node& node, std::span<const ValueInfo> in, const Tensor& w, const Tensor* w_zero) {
  if (!kernels::isa_supports_avx512_vnni() || in[0].shape.size() != 4) return false;
  if (in[0].dtype != DType::u8 && in[0].dtype != DType::i8) return false;
  const int64_t group = node.attr_int("group", 1);
  if (group <= 0 || (in[0].shape[1] / group == 1 && w.dim(0) / group == 1)) return false;
  if (node.op_type == "ConvInteger" || node.op_type == "ConvIntegerScaled") {
    // |offset * sum (x - x_zero)| <= 255 * k * 255 must stay far inside int32.
    const int64_t k = w.numel() / std::max<int64_t>(w.dim(0), 1);
    return (w.dtype() == DType::i8 || w.dtype() == DType::u8) && k * 255 * 255 < (int64_t{1} << 30);
  }
  if (w.dtype() != DType::i8) return false;
  if (w_zero)
    for (int64_t v : w_zero->to_i64())
      if (v != 0) return false;
  return true;
}

std::shared_ptr<const void> prepare_weights(const Node& node, std::span<const ValueInfo> in,
                                            std::span<const Tensor* const> constants, size_t w_index, size_t zero_index) {
  if (constants.size() <= w_index || !constants[w_index] || in[w_index].shape.size() != 4) return nullptr;
  const bool has_zero = has_input(in, zero_index);
  if (has_zero && (constants.size() <= zero_index || !constants[zero_index])) return nullptr;
  const Tensor& w = *constants[w_index];
  std::vector<int32_t> zero;
  if (has_zero)
    for (int64_t v : constants[zero_index]->to_i64()) zero.push_back(static_cast<int32_t>(v));
  kernels::IntGemmCall call;
  call.m = static_cast<size_t>(w.dim(0));
  call.k = static_cast<size_t>(w.numel() / std::max<int64_t>(w.dim(0), 1));
  call.a = w.raw();
  call.a_stride = call.k;
  call.a_signed = w.dtype() == DType::i8;
  call.a_zero = zero.empty() ? nullptr : zero.data();
  call.a_zero_per_row = zero.size() > 1;
  auto prepared = std::make_shared<PreparedWeights>();
  if (takes_s8_kernel(node, in, w, has_zero ? constants[zero_index] : nullptr)) {
    const int64_t group = node.attr_int("group", 1), cout = w.dim(0) / group;
    // uint8 W as W - 128 (its bytes XOR 0x80 read as int8).
    const bool is_u8 = w.dtype() == DType::u8;
    std::vector<int8_t> w8(static_cast<size_t>(w.numel()));
    const auto* bytes = reinterpret_cast<const uint8_t*>(w.raw());
    for (size_t i = 0; i < w8.size(); ++i) w8[i] = static_cast<int8_t>(is_u8 ? bytes[i] ^ 0x80 : bytes[i]);
    prepared->s8_groups.resize(static_cast<size_t>(group));
    for (int64_t grp = 0; grp < group; ++grp)
      kernels::pack_s8(w8.data() + grp * cout * static_cast<int64_t>(call.k), static_cast<size_t>(cout), call.k, call.k,
                       prepared->s8_groups[static_cast<size_t>(grp)]);
    bool any = false;
    for (size_t i = 0; i < call.m; ++i) {
      const int32_t w_zero = zero.empty() ? 0 : zero[zero.size() == 1 ? 0 : i];
      prepared->s8_offsets.push_back((is_u8 ? 128 : 0) - w_zero);
      any = any || prepared->s8_offsets.back() != 0;
    }
    if (!any) prepared->s8_offsets.clear();
    return prepared;
  }
  kernels::pack_a_pairs(call, prepared->pairs);
  return prepared;
}

std::shared_ptr<const void> prepare(const Node& node, std::span<const ValueInfo> in,
                                    std::span<const Tensor* const> constants) {
  return prepare_weights(node, in, constants, 1, 3);
}

int64_t prepared_bytes(const Node&, std::span<const ValueInfo>, const void* prepared) {
  const auto& p = *static_cast<const PreparedWeights*>(prepared);
  size_t bytes = p.pairs.size() * sizeof(int16_t);
  for (const auto& g : p.s8_groups) bytes += g.values.size() + g.row_sums.size() * sizeof(int32_t);
  return static_cast<int64_t>(bytes + p.s8_offsets.size() * sizeof(int32_t));
}

// The windows of one group's channels as k rows of bytes (row (c, ki, kj), one byte per
// output pixel of `rows`); padding reads `pad`, the byte of x's zero point.
template <class T>
void im2col_bytes(const T* x_image, int64_t first_channel, int64_t channels, const WindowGeometry& g, Range rows,
                  uint8_t pad, std::vector<uint8_t>& out) {
  const int64_t ih = g.input[0], iw = g.input[1], ow = g.output[1];
  const size_t pixels = static_cast<size_t>(rows.size() * ow);
  out.resize(static_cast<size_t>(channels * g.kernel[0] * g.kernel[1]) * pixels);
  if (g.strides[0] == 1 && g.strides[1] == 1 && g.dilations[0] == 1 && g.dilations[1] == 1 && ow == iw) {
    // Stride 1, output as wide as the input: each window row is the plane shifted by
    // (dy, dx), so the tile's rows are one copy plus the padding at its edges, not a copy per
    // output row (3x3 convs on 14x14 planes spent their time in 14-byte copies).
    uint8_t* dst_row = out.data();
    for (int64_t c = 0; c < channels; ++c) {
      const auto* plane = reinterpret_cast<const uint8_t*>(x_image + (first_channel + c) * ih * iw);
      for (int64_t ki = 0; ki < g.kernel[0]; ++ki)
        for (int64_t kj = 0; kj < g.kernel[1]; ++kj, dst_row += pixels) {
          const int64_t dy = ki - g.pads_begin[0], dx = kj - g.pads_begin[1];
          const int64_t y_lo = std::clamp(-dy, rows.begin, rows.end), y_hi = std::clamp(ih - dy, y_lo, rows.end);
          std::memset(dst_row, pad, pixels);
          if (y_hi == y_lo) continue;
          const int64_t src = (y_lo + dy) * iw + dx, total = (y_hi - y_lo) * ow;
          const int64_t t0 = std::max<int64_t>(0, -src), t1 = std::min(total, ih * iw - src);
          uint8_t* dst = dst_row + (y_lo - rows.begin) * ow;
          if (t1 > t0) std::memcpy(dst + t0, plane + (src + t0), static_cast<size_t>(t1 - t0));
          // Columns whose window falls left or right of the row read padding, not the next row.
          if (dx != 0)
            for (int64_t y = 0; y < y_hi - y_lo; ++y) {
              uint8_t* line = dst + y * ow;
              if (dx < 0) std::fill(line, line + std::min(-dx, ow), pad);
              else std::fill(line + std::max<int64_t>(0, ow - dx), line + ow, pad);
            }
        }
    }
    return;
  }
  uint8_t* dst_row = out.data();
  for (int64_t c = 0; c < channels; ++c) {
    const auto* plane = reinterpret_cast<const uint8_t*>(x_image + (first_channel + c) * ih * iw);
    for (int64_t ki = 0; ki < g.kernel[0]; ++ki)
      for (int64_t kj = 0; kj < g.kernel[1]; ++kj, dst_row += pixels) {
        const auto [shift, x_lo, x_hi] = window_columns(g, kj);
        const int64_t stride = g.strides[1];
        for (int64_t y = rows.begin; y < rows.end; ++y) {
          const int64_t iy = y * g.strides[0] - g.pads_begin[0] + ki * g.dilations[0];
          uint8_t* dst = dst_row + (y - rows.begin) * ow;
          if (iy < 0 || iy >= ih) {
            std::memset(dst, pad, static_cast<size_t>(ow));
            continue;
          }
          const uint8_t* src = plane + iy * iw;
          std::memset(dst, pad, static_cast<size_t>(x_lo));
          if (stride == 1) std::memcpy(dst + x_lo, src + x_lo + shift, static_cast<size_t>(x_hi - x_lo));
          else
            for (int64_t x = x_lo; x < x_hi; ++x) dst[x] = src[x * stride + shift];
          std::memset(dst + x_hi, pad, static_cast<size_t>(ow - x_hi));
        }
      }
  }
}

// The 8-bit path's windows: for each image and group of the tile, x's windows as the
// kernel's uint8 panels (straight from x for a 1x1 conv with stride 1 and no padding, else
// through byte rows), handed to use(image, group, panels). An int8 x is stored XOR 0x80
// (x + 128), so the kernel's zero point is x_zero + 128 (s8_zero).
template <class F>
void for_each_s8_panels(const Tensor& x, const WindowGeometry& g, const std::vector<kernels::PackedS8>& w,
                        int32_t x_zero, Range images, Range rows, ConvIntegerWorkspace& ws, F&& use) {
  std::vector<uint8_t>& bytes = ws.bytes;
  kernels::U8Panels& panels = ws.panels;
  const int64_t group = static_cast<int64_t>(w.size()), channels = x.dim(1), cin = channels / group;
  const bool is_signed = x.dtype() == DType::i8;
  const uint8_t flip = is_signed ? 0x80 : 0;
  const auto pad = static_cast<uint8_t>(x_zero);  // the byte of x's zero point, int8 or uint8
  const bool direct = g.kernel[0] == 1 && g.kernel[1] == 1 && g.strides[0] == 1 && g.strides[1] == 1 &&
                      g.pads_begin[0] == 0 && g.pads_begin[1] == 0 && g.dilations[1] == 1 && g.output[0] == g.input[0] &&
                      g.output[1] == g.input[1];  // output pixel p is input pixel p
  const size_t pixels = static_cast<size_t>(rows.size() * g.output[1]);
  const auto* x_bytes = reinterpret_cast<const uint8_t*>(x.raw());
  for (int64_t n = images.begin; n < images.end; ++n)
    for (int64_t grp = 0; grp < group; ++grp) {
      const kernels::PackedS8& a = w[static_cast<size_t>(grp)];
      const int64_t image = n * channels * g.input[0] * g.input[1];
      if (direct) {
        const uint8_t* first = x_bytes + image + grp * cin * g.input[0] * g.input[1] + rows.begin * g.input[1];
        kernels::pack_u8_panels(first, static_cast<size_t>(g.input[0] * g.input[1]), a.k, pixels, flip, panels);
      } else {
        if (is_signed) im2col_bytes(x.data<int8_t>() + image, grp * cin, cin, g, rows, pad, bytes);
        else im2col_bytes(x.data<uint8_t>() + image, grp * cin, cin, g, rows, pad, bytes);
        kernels::pack_u8_panels(bytes.data(), pixels, a.k, pixels, flip, panels);
      }
      use(n, grp, panels);
    }
}

int32_t s8_zero(const Tensor& x, int32_t x_zero) { return x_zero + (x.dtype() == DType::i8 ? 128 : 0); }

// One group: the tile's output channels; several: all of a group's (never cut).
kernels::RowRange s8_rows(size_t groups, Range out_channels, const kernels::PackedS8& a) {
  return groups == 1 ? kernels::RowRange{static_cast<size_t>(out_channels.begin), static_cast<size_t>(out_channels.end)}
                     : kernels::RowRange{0, a.m};
}

// Per column of the panels: the sum over k of its bytes as the kernel reads them.
void panel_column_sums(const kernels::U8Panels& panels, std::vector<int32_t>& sums) {
  constexpr size_t kWidth = kernels::U8Panels::kWidth;
  sums.assign(panels.n, 0);
  for (size_t q = 0; q * kWidth < panels.n; ++q) {
    int32_t acc[kWidth] = {};
    const uint8_t* v = panels.values.data() + q * panels.panel_bytes();
    for (size_t t = 0; t < panels.quads; ++t, v += kWidth * 4)
      for (size_t c = 0; c < kWidth; ++c) acc[c] += v[4 * c] + v[4 * c + 1] + v[4 * c + 2] + v[4 * c + 3];
    for (size_t c = 0; c < kWidth && q * kWidth + c < panels.n; ++c) sums[q * kWidth + c] = acc[c];
  }
}

// The int32 sums by the 8-bit kernel: sum_p (x - x_zero) * w8 is the kernel's sum minus
// x_zero * row sums of w8; with offsets (W - w_zero = w8 + offset per row) each row adds
// offset * sum_p (x - x_zero), from the panels' column sums.
void conv_s8_sums(const Tensor& x, const WindowGeometry& g, const std::vector<kernels::PackedS8>& w,
                  const std::vector<int32_t>& offsets, int32_t x_zero, Range images, Range out_channels, Range rows,
                  int32_t* out, int64_t image_stride, int64_t channel_stride, ConvIntegerWorkspace& ws) {
  const int32_t zero = s8_zero(x, x_zero);
  const size_t pixels = static_cast<size_t>(rows.size() * g.output[1]);
  std::vector<int32_t>& column_sums = ws.column_sums;
  for_each_s8_panels(x, g, w, x_zero, images, rows, ws, [&](int64_t n, int64_t grp, const kernels::U8Panels& panels) {
    const kernels::PackedS8& a = w[static_cast<size_t>(grp)];
    const kernels::RowRange range = s8_rows(w.size(), out_channels, a);
    int32_t* c = out + (n - images.begin) * image_stride + grp * static_cast<int64_t>(a.m) * channel_stride;
    kernels::s8u8_gemm(a, range, panels, c, static_cast<size_t>(channel_stride));
    if (!offsets.empty()) {
      panel_column_sums(panels, column_sums);
      const int32_t k_zero = static_cast<int32_t>(a.k) * zero;
      for (int32_t& s : column_sums) s -= k_zero;  // now sum_p (x - x_zero) per output pixel
    }
    for (size_t i = range.begin; i < range.end; ++i) {
      const int32_t correction = zero * a.row_sums[i];
      int32_t* row = c + static_cast<int64_t>(i - range.begin) * channel_stride;
      for (size_t j = 0; j < pixels; ++j) row[j] -= correction;
      if (offsets.empty()) continue;
      const int32_t offset = offsets[static_cast<size_t>(grp) * a.m + i];
      for (size_t j = 0; j < pixels; ++j) row[j] += offset * column_sums[j];
    }
  });
}

// `out` is the first of the tile's output channels: a channel cut (one group only) computes
// W's rows [out_channels) alone.
void conv_integer_sums(const Node& node, const Tensor& x, const Tensor& w, const Tensor* x_zero, const Tensor* w_zero,
                       const void* prepared, Range images, Range out_channels, Range rows, int32_t* out,
                       int64_t image_stride, int64_t channel_stride, ConvIntegerWorkspace& ws) {
  const auto* p = static_cast<const PreparedWeights*>(prepared);
  const WindowGeometry g = geometry_of(node, x.shape(), w.shape());
  if (p && !p->s8_groups.empty()) {
    const int32_t x_zp = x_zero ? static_cast<int32_t>(x_zero->to_i64().at(0)) : 0;
    // The windows of a big tile (a whole 512x512 layer at one thread) would not stay in any
    // cache: lay them out and multiply a band of rows at a time, each band's bytes well
    // inside the smallest L2 seen (kernels.md).
    constexpr int64_t kBandBytes = int64_t{128} << 10;
    const int64_t row_bytes = static_cast<int64_t>(p->s8_groups[0].k) * std::max<int64_t>(g.output[1], 1);
    const int64_t band = std::max<int64_t>(1, kBandBytes / std::max<int64_t>(row_bytes, 1));
    for (int64_t r0 = rows.begin; r0 < rows.end; r0 += band) {
      const Range part{r0, std::min(rows.end, r0 + band)};
      conv_s8_sums(x, g, p->s8_groups, p->s8_offsets, x_zp, images, out_channels, part,
                   out + (r0 - rows.begin) * g.output[1], image_stride, channel_stride, ws);
    }
    return;
  }
  const int16_t* w_pairs = p && !p->pairs.empty() ? p->pairs.data() : nullptr;
  const int64_t group = node.attr_int("group", 1), channels = x.dim(1), w_rows = w.dim(0);
  const int64_t cin = channels / group, cout = w_rows / group;
  const int64_t k = cin * g.kernel[0] * g.kernel[1];
  const int32_t x_zp = x_zero ? static_cast<int32_t>(x_zero->to_i64().at(0)) : 0;
  if (rows.size() <= 0) return;

  ws.w_zero.clear();
  if (w_zero)
    for (int64_t v : w_zero->to_i64()) ws.w_zero.push_back(static_cast<int32_t>(v));

  if (cin == 1 && cout == 1) {
    for (int64_t n = images.begin; n < images.end; ++n) {
      const int64_t image = n * channels * g.input[0] * g.input[1];
      int32_t* y = out + (n - images.begin) * image_stride;
      auto run = [&](const auto* xs, const auto* w_values) {
        depthwise(xs + image, w_values, g, channels, rows, x_zp, ws.w_zero, y, channel_stride);
      };
      if (x.dtype() == DType::i8 && w.dtype() == DType::i8) run(x.data<int8_t>(), w.data<int8_t>());
      else if (x.dtype() == DType::i8) run(x.data<int8_t>(), w.data<uint8_t>());
      else if (w.dtype() == DType::i8) run(x.data<uint8_t>(), w.data<int8_t>());
      else run(x.data<uint8_t>(), w.data<uint8_t>());
    }
    return;
  }
  // Depthwise and grouped convs are never cut by channel (integer_conv_cuttable).
  const int64_t first = group == 1 ? out_channels.begin : 0;
  kernels::IntGemmCall call;
  call.m = static_cast<size_t>(group == 1 ? out_channels.size() : cout);
  call.n = static_cast<size_t>(rows.size() * g.output[1]);
  call.k = static_cast<size_t>(k);
  call.a_stride = call.k;
  call.a_signed = w.dtype() == DType::i8;
  call.a_zero_per_row = ws.w_zero.size() > 1;
  call.c_stride = static_cast<size_t>(channel_stride);
  const auto* w_bytes = reinterpret_cast<const uint8_t*>(w.raw());
  for (int64_t n = images.begin; n < images.end; ++n)
    for (int64_t grp = 0; grp < group; ++grp) {
      const int64_t image = n * channels * g.input[0] * g.input[1], lo = grp * cout + first;
      if (x.dtype() == DType::i8) im2col_panels(x.data<int8_t>() + image, grp * cin, cin, g, rows, x_zp, ws);
      else im2col_panels(x.data<uint8_t>() + image, grp * cin, cin, g, rows, x_zp, ws);
      call.a = w_bytes + lo * k;
      call.a_zero = ws.w_zero.empty() ? nullptr : ws.w_zero.data() + (call.a_zero_per_row ? lo : 0);
      call.a_pairs = w_pairs ? w_pairs + lo * 2 * ((k + 1) / 2) : nullptr;
      call.c = out + (n - images.begin) * image_stride + (lo - first) * channel_stride;
      kernels::int_gemm_panels(call, ws.columns, ws.gemm);
    }
}

void run_tile(const Node& node, std::span<const Tensor* const> in, std::span<Tensor* const> out, const Region& out_region,
              const void* prepared, TileScratch& scratch) {
  Tensor& y = *out[0];
  check_region(node, out_region, y.shape());
  if (in[0]->rank() != 4 || in[1]->rank() != 4) return reference_whole(node, in, out, out_region);
  const int64_t plane = y.dim(2) * y.dim(3);
  int32_t* first = y.data<int32_t>() + (out_region[0].begin * y.dim(1) + out_region[1].begin) * plane +
                   out_region[2].begin * y.dim(3);
  conv_integer_sums(node, *in[0], *in[1], optional_input(in, 2), optional_input(in, 3), prepared, out_region[0],
                    out_region[1], out_region[2], first, y.dim(1) * plane, plane, scratch.get<ConvIntegerWorkspace>());
}

// ---- QLinearConv(x, x_scale, x_zero_point, w, w_scale, w_zero_point, y_scale, y_zero_point, B) ----
// The same sums into a buffer for the tile, plus bias, requantized as reference_qlinear_conv
// does (float32 multiplier x_scale * w_scale / y_scale, round half to even, saturate).

void qlinear_needs(const Node& node, std::span<const ValueInfo> in, std::span<const ValueInfo>, const Region& out_region,
                   std::span<Region> in_regions) {
  for (size_t i = 0; i < in.size(); ++i)
    if (has_input(in, i)) in_regions[i] = full_region(in[i].shape);
  if (in[0].shape.size() != 4 || in[3].shape.size() != 4) return;
  const WindowGeometry g = geometry_of(node, in[0].shape, in[3].shape);
  in_regions[0] = {out_region[0], {0, in[0].shape[1]}, window_input_range(g, 0, out_region[2]), {0, in[0].shape[3]}};
}

std::vector<int64_t> qlinear_cuttable(const Node& node, std::span<const ValueInfo> in, std::span<const ValueInfo> out) {
  return integer_conv_cuttable(node, in[0].shape, in[3].shape, out[0].shape);
}

template <class Q>
void requantize(const Node& node, std::span<const Tensor* const> in, const std::vector<int32_t>& sums, const Region& r,
                Tensor& y) {
  const bool relu = fused_epilogue(node).activation == FusedActivation::relu;  // fused by passes/fuse_qdq.cpp
  const float x_scale = static_cast<float>(in[1]->to_f64().at(0)), y_scale = static_cast<float>(in[6]->to_f64().at(0));
  const std::vector<double> w_scale = in[4]->to_f64();
  const Tensor* y_zero = optional_input(in, 7);
  const Tensor* bias = optional_input(in, 8);
  const float zero_point = y_zero ? static_cast<float>(y_zero->to_f64().at(0)) : 0.0f;
  const std::vector<int64_t> b = bias ? bias->to_i64() : std::vector<int64_t>();
  const int64_t channels = y.dim(1), width = y.dim(3), rows = r[2].size();
  // |sum| <= k * 255 * 128; past int32 with the bias, the int64 scalar loop requantizes.
  const int64_t k = in[3]->numel() / std::max<int64_t>(in[3]->dim(0), 1);
  int64_t largest_bias = 0;
  for (int64_t v : b) largest_bias = std::max(largest_bias, v < 0 ? -v : v);
  const bool fits = k * 255 * 128 + largest_bias <= std::numeric_limits<int32_t>::max();
  const kernels::Isa isa = fits ? kernels::active_isa() : kernels::Isa::scalar;
  Q* out = y.data<Q>();
  size_t at = 0;
  for (int64_t n = r[0].begin; n < r[0].end; ++n)
    for (int64_t m = r[1].begin; m < r[1].end; ++m) {
      const float multiplier = x_scale * static_cast<float>(w_scale[w_scale.size() == 1 ? 0 : static_cast<size_t>(m)]) / y_scale;
      const int64_t add = b.empty() ? 0 : b[static_cast<size_t>(m)];
      Q* row = out + ((n * channels + m) * y.dim(2) + r[2].begin) * width;
      kernels::RequantizeParams params;
      params.add = add;
      params.multiplier = multiplier;
      params.zero_point = zero_point;
      params.lo = static_cast<float>(std::numeric_limits<Q>::min());
      params.hi = static_cast<float>(std::numeric_limits<Q>::max());
      if (relu) params.lo = std::max(params.lo, zero_point);
      kernels::requantize(sums.data() + at, static_cast<size_t>(rows * width), params, std::is_signed_v<Q>, row, isa);
      at += static_cast<size_t>(rows * width);
    }
}

std::shared_ptr<const void> qlinear_prepare(const Node& node, std::span<const ValueInfo> in,
                                            std::span<const Tensor* const> constants) {
  return prepare_weights(node, in, constants, 3, 5);
}

// QLinearConv on the 8-bit kernel with requantization in its epilogue (kernels/qgemm.h
// S8Requantize): the int32 sums stay in registers. Per output channel, the bias minus the
// zero-point correction and the float multiplier; false (nothing written) where they do not
// fit the epilogue's int32 arithmetic, for the path through int32 sums.
bool qlinear_s8_fused(const Node& node, std::span<const Tensor* const> in, const PreparedWeights& p, const Region& r,
                      Tensor& y, ConvIntegerWorkspace& ws) {
  const Tensor& x = *in[0];
  const WindowGeometry g = geometry_of(node, x.shape(), in[3]->shape());
  const Tensor* x_zero = optional_input(in, 2);
  const int32_t x_zp = x_zero ? static_cast<int32_t>(x_zero->to_i64().at(0)) : 0, zero = s8_zero(x, x_zp);
  const float x_scale = static_cast<float>(in[1]->to_f64().at(0)), y_scale = static_cast<float>(in[6]->to_f64().at(0));
  const std::vector<double> w_scale = in[4]->to_f64();
  const Tensor* bias = optional_input(in, 8);
  const std::vector<int64_t> b = bias ? bias->to_i64() : std::vector<int64_t>();
  const int64_t channels = y.dim(1), cout = channels / static_cast<int64_t>(p.s8_groups.size());
  const int64_t k = static_cast<int64_t>(p.s8_groups[0].k);
  std::vector<int32_t>& add = ws.add;
  std::vector<float>& multiplier = ws.multiplier;
  add.resize(static_cast<size_t>(channels));
  multiplier.resize(static_cast<size_t>(channels));
  for (int64_t m = 0; m < channels; ++m) {
    const kernels::PackedS8& a = p.s8_groups[static_cast<size_t>(m / cout)];
    const int64_t value = (b.empty() ? 0 : b[static_cast<size_t>(m)]) - int64_t{zero} * a.row_sums[static_cast<size_t>(m % cout)];
    // |raw sum| <= k * 255 * 128; with the correction and bias it must stay in int32.
    if (std::abs(value) + k * 255 * 128 > std::numeric_limits<int32_t>::max()) return false;
    add[static_cast<size_t>(m)] = static_cast<int32_t>(value);
    multiplier[static_cast<size_t>(m)] =
        x_scale * static_cast<float>(w_scale[w_scale.size() == 1 ? 0 : static_cast<size_t>(m)]) / y_scale;
  }
  const Tensor* y_zero = optional_input(in, 7);
  kernels::S8Requantize rq;
  rq.zero_point = y_zero ? static_cast<float>(y_zero->to_f64().at(0)) : 0.0f;
  rq.is_signed = y.dtype() == DType::i8;
  rq.lo = rq.is_signed ? -128.0f : 0.0f, rq.hi = rq.is_signed ? 127.0f : 255.0f;
  if (fused_epilogue(node).activation == FusedActivation::relu) rq.lo = std::max(rq.lo, rq.zero_point);
  const int64_t plane = y.dim(2) * y.dim(3);
  rq.y_stride = static_cast<size_t>(plane);
  auto* y_bytes = reinterpret_cast<uint8_t*>(y.raw());
  for_each_s8_panels(x, g, p.s8_groups, x_zp, r[0], r[2], ws, [&](int64_t n, int64_t grp, const kernels::U8Panels& panels) {
    const kernels::PackedS8& a = p.s8_groups[static_cast<size_t>(grp)];
    const kernels::RowRange range = s8_rows(p.s8_groups.size(), r[1], a);
    const int64_t first_channel = grp * cout + static_cast<int64_t>(range.begin);
    rq.add = add.data() + grp * cout;  // indexed by A's row
    rq.multiplier = multiplier.data() + grp * cout;
    rq.y = y_bytes + (n * channels + first_channel) * plane + r[2].begin * y.dim(3);
    kernels::s8u8_gemm_requantize(a, range, panels, rq);
  });
  return true;
}

void qlinear_run_tile(const Node& node, std::span<const Tensor* const> in, std::span<Tensor* const> out,
                      const Region& out_region, const void* prepared, TileScratch& scratch) {
  Tensor& y = *out[0];
  check_region(node, out_region, y.shape());
  if (in[0]->rank() != 4 || in[3]->rank() != 4) return reference_whole(node, in, out, out_region);
  check_scales(*in[6], "y_scale");
  const auto* p = static_cast<const PreparedWeights*>(prepared);
  ConvIntegerWorkspace& ws = scratch.get<ConvIntegerWorkspace>();
  if (p && !p->s8_groups.empty() && out_region[2].size() > 0 && qlinear_s8_fused(node, in, *p, out_region, y, ws)) return;
  const int64_t channels = out_region[1].size(), per_channel = out_region[2].size() * y.dim(3);
  std::vector<int32_t>& sums = ws.sums;
  sums.resize(static_cast<size_t>(out_region[0].size() * channels * per_channel));
  conv_integer_sums(node, *in[0], *in[3], optional_input(in, 2), optional_input(in, 5), prepared, out_region[0],
                    out_region[1], out_region[2], sums.data(), channels * per_channel, per_channel, ws);
  if (y.dtype() == DType::i8) requantize<int8_t>(node, in, sums, out_region, y);
  else requantize<uint8_t>(node, in, sums, out_region, y);
}

// ---- grove.internal ConvIntegerScaled(x, w, x_zero_point, w_zero_point, scale, [bias]) ----
// ConvInteger's sums for the tile into a buffer, then ScaledEpilogue (float(sum) * scale
// [+ bias] [relu]) straight into the float output.

void scaled_needs(const Node& node, std::span<const ValueInfo> in, std::span<const ValueInfo> out,
                  const Region& out_region, std::span<Region> in_regions) {
  needs(node, in.first(4), out, out_region, in_regions.first(4));
  for (size_t i = 4; i < in.size(); ++i)
    in_regions[i] = has_input(in, i) ? full_region(in[i].shape) : Region{};
}

void scaled_run_tile(const Node& node, std::span<const Tensor* const> in, std::span<Tensor* const> out,
                     const Region& out_region, const void* prepared, TileScratch& scratch) {
  Tensor& y = *out[0];
  check_region(node, out_region, y.shape());
  if (in[0]->rank() != 4 || in[1]->rank() != 4) return reference_whole(node, in, out, out_region);
  const int64_t channels = out_region[1].size(), per_channel = out_region[2].size() * y.dim(3);
  ConvIntegerWorkspace& ws = scratch.get<ConvIntegerWorkspace>();
  std::vector<int32_t>& sums = ws.sums;
  sums.resize(static_cast<size_t>(out_region[0].size() * channels * per_channel));
  conv_integer_sums(node, *in[0], *in[1], optional_input(in, 2), optional_input(in, 3), prepared, out_region[0],
                    out_region[1], out_region[2], sums.data(), channels * per_channel, per_channel, ws);
  const ScaledEpilogue epilogue(node, *in[4], optional_input(in, 5));
  const int64_t plane = y.dim(2) * y.dim(3);
  const int32_t* from = sums.data();
  for (int64_t n = out_region[0].begin; n < out_region[0].end; ++n)
    for (int64_t m = out_region[1].begin; m < out_region[1].end; ++m, from += per_channel)
      epilogue.apply(m, from, y.data<float>() + (n * y.dim(1) + m) * plane + out_region[2].begin * y.dim(3), per_channel);
}

}  // namespace conv_integer_rule

void add_conv_integer_rules(RuleTable& t) {
  using namespace conv_integer_rule;
  t["ConvInteger"] = TileRule{cuttable, needs, run_tile, prepare, prepared_bytes};
  t[internal_rule_key("ConvIntegerScaled")] = TileRule{cuttable, scaled_needs, scaled_run_tile, prepare, prepared_bytes};
  t["QLinearConv"] = TileRule{qlinear_cuttable, qlinear_needs, qlinear_run_tile, qlinear_prepare, prepared_bytes};
}

}  // namespace grove::tiling
