// Tile rule of grove.internal QLinearConvNhwc (channels_last.cpp): output [N, OH, OW, M]
// cut by output rows, images, then channels in panel pairs. Each output pixel is one row of
// the 8-bit kernel's X (kernels/qgemm.h u8s8_gemm_requantize): its window's channel runs laid
// end to end, (ki, kj, c) order, so a 1x1 stride-1 conv reads x itself and any other conv
// copies whole channel runs (kw * C bytes per window row); W is packed once into panels of
// output channels, and each y row (a pixel's M channels) is requantized in the kernel's
// epilogue, with a fused residual QLinearAdd after it where the node has one. No column of
// a panel is wasted on a plane that is not a multiple of 16 pixels.
#include <cstring>
#include <limits>
#include <memory>

#include "graph/node_decisions.h"
#include "kernels/cpu_info.h"
#include "kernels/qgemm.h"
#include "ops/conv/channels_last.h"
#include "ops/op_util.h"
#include "ops/quant_util.h"
#include "ops/tile_util.h"
#include "ops/conv/window_rows.h"

namespace grove::tiling {
namespace quant_conv_nhwc_rule {

constexpr int64_t kChannelBlock = 2 * static_cast<int64_t>(kernels::U8Panels::kWidth);
// Pixels laid out per kernel call where x is copied: enough rows to amortise each pass over
// W, few enough that the rows stay in L2 next to W's panels.
constexpr size_t kChunkBytes = size_t{96} << 10;

// W as k x M int8 bytes in panels (k ordered (ki, kj, c), as the rows are laid out), and per
// output channel the requantization: add = bias - x's zero point * column sum of W.
struct NhwcWeights {
  bool usable = false;  // int8 W with zero points 0 and sums that fit int32; else the reference
  kernels::U8Panels w;
  std::vector<int32_t> add;
  std::vector<float> multiplier;
};

WindowGeometry geometry_of(const Node& node, const Shape& x, const Shape& w) {
  return window_geometry(node, std::span<const int64_t>(x.data() + 1, 2), {w[2], w[3]}, false);
}

// t[i]: input i (nullptr when absent). x_dtype: x's, which sets the zero point's shift.
std::shared_ptr<NhwcWeights> pack_weights(const Node& node, std::span<const Tensor* const> t, DType x_dtype) {
  auto p = std::make_shared<NhwcWeights>();
  const Tensor& w = *t[3];
  if (w.dtype() != DType::i8 || w.rank() != 4 || node.attr_int("group", 1) != 1) return p;
  if (t.size() > 5 && t[5])
    for (int64_t v : t[5]->to_i64())
      if (v != 0) return p;
  const int64_t m = w.dim(0), c = w.dim(1), kh = w.dim(2), kw = w.dim(3), k = c * kh * kw;
  std::vector<uint8_t> rows(static_cast<size_t>(k * m));
  std::vector<int64_t> column_sums(static_cast<size_t>(m), 0);
  const int8_t* wv = w.data<int8_t>();
  for (int64_t j = 0; j < m; ++j)
    for (int64_t ch = 0; ch < c; ++ch)
      for (int64_t ki = 0; ki < kh; ++ki)
        for (int64_t kj = 0; kj < kw; ++kj) {
          const int8_t v = wv[((j * c + ch) * kh + ki) * kw + kj];
          rows[static_cast<size_t>(((ki * kw + kj) * c + ch) * m + j)] = static_cast<uint8_t>(v);
          column_sums[static_cast<size_t>(j)] += v;
        }
  kernels::pack_u8_panels(rows.data(), static_cast<size_t>(m), static_cast<size_t>(k), static_cast<size_t>(m), 0, p->w);
  const int64_t x_zero = (t[2] ? t[2]->to_i64().at(0) : 0) + (x_dtype == DType::i8 ? 128 : 0);
  const float x_scale = static_cast<float>(t[1]->to_f64().at(0)), y_scale = static_cast<float>(t[6]->to_f64().at(0));
  const std::vector<double> w_scale = t[4]->to_f64();
  const std::vector<int64_t> bias = t.size() > 8 && t[8] ? t[8]->to_i64() : std::vector<int64_t>();
  for (int64_t j = 0; j < m; ++j) {
    const auto jj = static_cast<size_t>(j);
    const int64_t add = (bias.empty() ? 0 : bias[jj]) - x_zero * column_sums[jj];
    // |raw sum| <= k * 255 * 128; with the correction and bias it must stay in int32.
    if (std::abs(add) + k * 255 * 128 > std::numeric_limits<int32_t>::max()) return p;
    p->add.push_back(static_cast<int32_t>(add));
    p->multiplier.push_back(x_scale * static_cast<float>(w_scale[w_scale.size() == 1 ? 0 : jj]) / y_scale);
  }
  p->usable = true;
  return p;
}

// Rows first, unless the weights outweigh the windows (late layers: few pixels, many
// channels): then channels only, so each tile streams its own slice of W instead of all of it.
std::vector<int64_t> cuttable(const Node&, std::span<const ValueInfo> in, std::span<const ValueInfo> out) {
  const Shape& y = out[0].shape;
  if (y.size() != 4 || in[3].shape.size() != 4) return none_cuttable(y);
  const int64_t k = numel(in[3].shape) / std::max<int64_t>(in[3].shape[0], 1);
  if (cut_weights_first(k * y[3], k * y[1] * y[2])) return {1, 0, 0, kChannelBlock};
  return {1, 1, 0, kChannelBlock};
}

void needs(const Node& node, std::span<const ValueInfo> in, std::span<const ValueInfo>, const Region& out_region,
           std::span<Region> in_regions) {
  for (size_t i = 0; i < in.size(); ++i)
    if (has_input(in, i)) in_regions[i] = full_region(in[i].shape);
  if (in[0].shape.size() != 4 || in[3].shape.size() != 4) return;
  const WindowGeometry g = geometry_of(node, in[0].shape, in[3].shape);
  in_regions[0] = {out_region[0], window_input_range(g, 0, out_region[1]), {0, in[0].shape[2]}, {0, in[0].shape[3]}};
  if (has_input(in, kResidualInput)) in_regions[kResidualInput] = out_region;  // same positions as y
}

std::shared_ptr<const void> prepare(const Node& node, std::span<const ValueInfo> in,
                                    std::span<const Tensor* const> constants) {
  for (size_t i : {1, 3, 4, 6})
    if (constants.size() <= i || !constants[i]) return nullptr;
  for (size_t i : {2, 5, 7, 8})
    if (has_input(in, i) && (constants.size() <= i || !constants[i])) return nullptr;
  std::vector<const Tensor*> t(constants.begin(), constants.end());
  t.resize(in.size(), nullptr);
  return pack_weights(node, t, in[0].dtype);
}

int64_t prepared_bytes(const Node&, std::span<const ValueInfo>, const void* prepared) {
  const auto& p = *static_cast<const NhwcWeights*>(prepared);
  return static_cast<int64_t>(p.w.values.size() + p.add.size() * sizeof(int32_t) + p.multiplier.size() * sizeof(float));
}

// A worker's buffers: the tile's windows of 8-bit pixels laid out for the kernel, the AMX
// kernel's copies.
struct QuantConvNhwcScratch {
  std::vector<uint8_t> rows;
  kernels::U8GemmScratch gemm;
};

void run_tile(const Node& node, std::span<const Tensor* const> in, std::span<Tensor* const> out, const Region& out_region,
              const void* prepared, TileScratch& scratch) {
  Tensor& y = *out[0];
  check_region(node, out_region, y.shape());
  check_scales(*in[6], "y_scale");
  const Tensor& x = *in[0];
  std::shared_ptr<const NhwcWeights> own;
  const auto* p = static_cast<const NhwcWeights*>(prepared);
  if (!p) {
    own = pack_weights(node, in, x.dtype());
    p = own.get();
  }
  if (!p->usable || x.rank() != 4) return reference_whole(node, in, out, out_region);
  const WindowGeometry g = geometry_of(node, x.shape(), in[3]->shape());
  const int64_t channels = x.dim(3), ow = y.dim(2), m = y.dim(3);
  const bool is_signed = x.dtype() == DType::i8;
  kernels::ColumnRequantize rq;
  rq.add = p->add.data();
  rq.multiplier = p->multiplier.data();
  const Tensor* y_zero = optional_input(in, 7);
  rq.zero_point = y_zero ? static_cast<float>(y_zero->to_f64().at(0)) : 0.0f;
  rq.is_signed = y.dtype() == DType::i8;
  rq.lo = rq.is_signed ? -128.0f : 0.0f, rq.hi = rq.is_signed ? 127.0f : 255.0f;
  if (fused_epilogue(node).activation == FusedActivation::relu) rq.lo = std::max(rq.lo, rq.zero_point);
  rq.y_stride = static_cast<size_t>(m);
  rq.col_begin = static_cast<size_t>(out_region[3].begin);
  rq.col_end = static_cast<size_t>(out_region[3].end);
  const Tensor* residual = in.size() > kResidualInput ? in[kResidualInput] : nullptr;
  if (residual) {
    rq.residual_add = residual_add_params(node, in);
    rq.residual_stride = static_cast<size_t>(m);
  }
  const kernels::Isa isa = kernels::isa_supports_avx512_vnni() ? kernels::active_isa() : kernels::Isa::scalar;
  const auto* x_bytes = reinterpret_cast<const uint8_t*>(x.raw());
  auto* y_bytes = reinterpret_cast<uint8_t*>(y.raw());
  const size_t stride = p->w.quads * 4;
  const int64_t first = out_region[1].begin * ow, pixels = out_region[1].size() * ow;
  const bool direct = g.kernel[0] == 1 && g.kernel[1] == 1 && g.strides[0] == 1 && g.strides[1] == 1 &&
                      g.pads_begin[0] == 0 && g.pads_begin[1] == 0 && g.output[0] == g.input[0] &&
                      g.output[1] == g.input[1] && !is_signed &&
                      static_cast<size_t>(channels) == stride;
  QuantConvNhwcScratch& ws = scratch.get<QuantConvNhwcScratch>();
  std::vector<uint8_t>& rows = ws.rows;
  rq.scratch = &ws.gemm;
  const auto pad = static_cast<uint8_t>(optional_input(in, 2) ? optional_input(in, 2)->to_i64().at(0) : 0);
  // A W larger than L2 (late layers: deep windows, many channels) streams from L3 again on
  // every kernel call: then rows filling half of L2 go in one call.
  static const size_t half_l2 =
      static_cast<size_t>(kernels::cpu_info().l2_bytes > 0 ? kernels::cpu_info().l2_bytes : int64_t{1} << 20) / 2;
  const size_t chunk_bytes = p->w.values.size() > 2 * half_l2 ? std::max(kChunkBytes, half_l2) : kChunkBytes;
  const int64_t chunk = std::max<int64_t>(kernels::PackedS8::kRows,
                                          static_cast<int64_t>(chunk_bytes / stride) / kernels::PackedS8::kRows *
                                              kernels::PackedS8::kRows);
  for (int64_t n = out_region[0].begin; n < out_region[0].end; ++n) {
    const int64_t image = (n * y.dim(1) * ow) * m + out_region[3].begin;  // y's and the residual's offset
    uint8_t* y_image = y_bytes + image;
    const auto* residual_image = residual ? reinterpret_cast<const uint8_t*>(residual->raw()) + image : nullptr;
    if (direct) {
      rq.y = y_image + first * m;
      if (residual) rq.residual = residual_image + first * m;
      kernels::u8s8_gemm_requantize(x_bytes + (n * g.input[0] * g.input[1] + first) * channels,
                                    static_cast<size_t>(pixels), stride, p->w, rq, isa);
      continue;
    }
    for (int64_t at = first; at < first + pixels; at += chunk) {
      const int64_t count = std::min(chunk, first + pixels - at);
      lay_out_windows(x_bytes, n, g, channels, at, count, pad, stride, rows);
      if (is_signed)  // the kernel takes unsigned bytes: int8 x + 128, its bit pattern XOR 0x80
        for (int64_t i = 0; i < count; ++i)
          for (size_t p = 0, k = static_cast<size_t>(channels * g.kernel[0] * g.kernel[1]); p < k; ++p)
            rows[static_cast<size_t>(i) * stride + p] ^= 0x80;
      rq.y = y_image + at * m;
      if (residual) rq.residual = residual_image + at * m;
      kernels::u8s8_gemm_requantize(rows.data(), static_cast<size_t>(count), stride, p->w, rq, isa);
    }
  }
}

}  // namespace quant_conv_nhwc_rule

void add_quant_conv_nhwc_rules(RuleTable& t) {
  using namespace quant_conv_nhwc_rule;
  t[internal_rule_key("QLinearConvNhwc")] = TileRule{cuttable, needs, run_tile, prepare, prepared_bytes};
}

}  // namespace grove::tiling
