// Tile rule of grove.internal ConvNhwc (channels_last.cpp): the float32 Conv with x as
// [N, H, W, C] and y as [N, OH, OW, M], on the SIMD GEMM with the pixels as A's rows and the
// output channels as B's columns: C[pixels x M] = windows[pixels x k] . W^T[k x M], k ordered
// (ki, kj, c). A 1x1 stride-1 conv reads x itself as A; any other conv copies whole channel
// runs (kw * C floats per window row) into a scratch block. W^T is packed once at plan time.
// The output channels fill the kernel's vector lanes, so no lane is wasted on a plane that is
// not a multiple of the panel width (a 7x7 plane: 49 pixels in 64 lanes on the NCHW path),
// and y rows are written in place with the fused bias, residual and activation.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <memory>
#include <type_traits>

#include "graph/node_decisions.h"
#include "kernels/amx.h"
#include "kernels/bf16.h"
#include "kernels/conv_rows.h"
#include "kernels/gemm.h"
#include "ops/conv/channels_last.h"
#include "ops/conv/conv_nhwc_rows.h"
#include "ops/conv/conv_gemm_forms.h"
#include "ops/evaluate.h"
#include "ops/fused_epilogue.h"
#include "ops/op_util.h"
#include "ops/conv/tile_conv_winograd.h"
#include "ops/tile_util.h"
#include "ops/conv/window_rows.h"

namespace grove::tiling {
namespace conv_nhwc_rule {

// Pixels laid out per GEMM call where x is copied: about kWindowFloats floats of windows, so
// they stay in L2 beside W's k block, and at least kMinChunkPixels, so that streaming W^T
// once per call stays a small part of the traffic (the NCHW path's numbers, not tuned here).
constexpr size_t kWindowFloats = 96 * 1024;
constexpr size_t kMinChunkPixels = 256;

struct NhwcConvWeights {
  kernels::PackedB w;  // k x M, k ordered (ki, kj, c)
};

// A worker's buffers for this rule: window rows, padded input rows, the GEMM's packing.
struct NhwcConvScratch {
  std::vector<float> rows, padded;
  std::vector<uint16_t> rows_bf16, padded_bf16;
  kernels::GemmScratch gemm;
  kernels::PackedA windows;
};

// The bf16 units that read and write bfloat16 activations: AMX, and AVX512-BF16 dot products
// (x in whole pairs of channels, which the plan checks before it stores one bf16).
bool writes_bf16(const Node& node) { return runs_in_bf16(node); }

// Float32 operands; x (and on AMX the residual) may also be bfloat16 (values the plan stores
// so), which the A packing, the row copy and the AMX epilogue read directly.
bool claimed(const Node& node, std::span<const ValueInfo> in) {
  if (in.size() < 2 || !in[0].present || !in[1].present) return false;
  const bool amx = runs_on_amx(node);
  for (size_t i = 0; i < in.size(); ++i) {
    if (!in[i].present || in[i].dtype == DType::f32) continue;
    const bool bf16_ok = i == 0 ? amx || (writes_bf16(node) && in[0].shape.size() == 4 && in[0].shape[3] % 2 == 0)
                                : amx && i == kEpilogueResidualInput;
    if (!(in[i].dtype == DType::bf16 && bf16_ok)) return false;
  }
  return in[0].shape.size() == 4 && in[1].shape.size() == 4;
}

// x's channels and plane: [N, H, W, C], or [N, C, H, W] for a stem that reads the image as it
// is (Decisions::x_nchw).
int64_t channels_of(const Node& node, const Shape& x) { return reads_x_nchw(node) ? x[1] : x[3]; }

WindowGeometry geometry_of(const Node& node, const Shape& x, const Shape& w) {
  return window_geometry(node, std::span<const int64_t>(x.data() + (reads_x_nchw(node) ? 2 : 1), 2), {w[2], w[3]},
                         false);
}

// A conv the layout pass left on Winograd (passes/layout_f32.cpp): float32 only, and only where
// Winograd fits (a plan that says otherwise is refused as it is built).
// The layout pass marks it "winograd"; a tuning record's choice "winograd_nhwc" keeps its name.
// Its block: output rows and columns per Winograd block, 4 for F(4x4, 3x3) and 2 for a tuning
// record's "winograd_f2x3_nhwc" (F(2x2, 3x3)); 0 off Winograd.
int64_t winograd_block(const Node& node) { return winograd_nhwc_block(node); }

bool on_winograd(const Node& node) { return winograd_block(node) > 0; }

// A 1x1 stride-1 conv without padding (output pixel p is input pixel p): its GEMM reads x
// itself as A.
bool reads_x_in_place(const WindowGeometry& g) {
  return g.kernel[0] == 1 && g.kernel[1] == 1 && g.strides[0] == 1 && g.strides[1] == 1 && g.pads_begin[0] == 0 &&
         g.pads_begin[1] == 0 && g.output[0] == g.input[0] && g.output[1] == g.input[1];
}

// Implicit GEMM (bf16_conv_32x32_amx) where it applies: AMX, stride and dilation 1, whole
// 32-channel chunks, and not a 1x1 conv that reads x in place already.
bool runs_implicit(const WindowGeometry& g, int64_t channels, kernels::Precision precision) {
  return precision == kernels::Precision::bf16_amx && channels % 32 == 0 && g.strides[0] == 1 && g.strides[1] == 1 &&
         g.dilations[0] == 1 && g.dilations[1] == 1 && !reads_x_in_place(g);
}

// Float convs on a CPU whose GEMM kernel reads A in place (kernels/conv_rows.h): the taps
// accumulate straight from padded copies of the input rows, any stride or dilation.
bool runs_on_rows(const WindowGeometry& g, int64_t channels, kernels::Precision precision) {
  // bf16 rows hold pair words: a tap's channels must be whole pairs.
  return !reads_x_in_place(g) && kernels::conv_row_supported(kernels::active_isa(), precision) &&
         (precision != kernels::Precision::bf16 || channels % 2 == 0);
}

// The padded input row of runs_on_rows: the pixels the row's windows reach, from the left
// padding on.
int64_t padded_row_pixels(const WindowGeometry& g) {
  return (g.output[1] - 1) * g.strides[1] + (g.kernel[1] - 1) * g.dilations[1] + 1;
}

// The input rows the windows of `rows` consecutive output rows reach.
int64_t input_rows_of(const WindowGeometry& g, int64_t rows) {
  return (rows - 1) * g.strides[0] + (g.kernel[0] - 1) * g.dilations[0] + 1;
}

// Elements a tile of `rows` output rows lays out again for its windows: the window block
// (k per pixel, written then read by the GEMM: counted twice), x itself for a 1x1 conv that
// reads it in place, or the padded input rows of the implicit GEMM and of the row path
// (written once).
double window_elements(const Node& node, const WindowGeometry& g, int64_t channels, int64_t k, double rows) {
  if (reads_x_in_place(g)) return double(k) * rows * double(g.output[1]);
  if (runs_implicit(g, channels, gemm_precision(node)))
    return double(channels) * (rows + double(g.kernel[0] - 1)) * double(g.output[1] + g.kernel[1] - 1);
  if (runs_on_rows(g, channels, gemm_precision(node)))
    return double(channels) * double(input_rows_of(g, std::max<int64_t>(1, int64_t(rows)))) * double(padded_row_pixels(g));
  return 2 * double(k) * rows * double(g.output[1]);
}

size_t panel_width(const Node& node) { return kernels::gemm_blocking(kernels::active_isa(), gemm_precision(node)).nr; }

// Rows first, unless the weights outweigh the windows (late layers: few pixels, many
// channels): then output channels only, in whole panels, so each tile streams its own slice
// of W^T instead of all of it. A channel tile lays out all its rows' windows again (written,
// then read by the GEMM's packing) where a row tile streams W^T again (read once): windows
// count twice.
std::vector<int64_t> cuttable(const Node& node, std::span<const ValueInfo> in, std::span<const ValueInfo> out) {
  const Shape& y = out[0].shape;
  if (!claimed(node, in) || y.size() != 4) return none_cuttable(y);
  const int64_t k = numel(in[1].shape) / std::max<int64_t>(in[1].shape[0], 1);
  const auto block = static_cast<int64_t>(panel_width(node));
  const WindowGeometry g = geometry_of(node, in[0].shape, in[1].shape);
  // Winograd: rows in whole blocks on large planes, and on small planes of one image whose
  // weights are few for their blocks (winograd_nhwc_cut_rows); else output channels only
  // (images first when there are several), so each tile's GEMMs keep all the plane's blocks.
  if (on_winograd(node)) {
    if (winograd_nhwc_cut_rows(conv2d_shape_2d(g, channels_of(node, in[0].shape)), y[3], y[0]))
      return {1, winograd_block(node), 0, block};
    return {1, 0, 0, y[0] > 1 ? 0 : block};
  }
  const auto windows = static_cast<int64_t>(window_elements(node, g, channels_of(node, in[0].shape), k, double(y[1])));
  if (cut_weights_first(k * y[3], windows)) return {1, 0, 0, block};
  return {1, 1, 0, block};
}

void needs(const Node& node, std::span<const ValueInfo> in, std::span<const ValueInfo>, const Region& out_region,
           std::span<Region> in_regions) {
  for (size_t i = 0; i < in.size(); ++i)
    if (has_input(in, i)) in_regions[i] = full_region(in[i].shape);
  if (!claimed(node, in)) return;
  const WindowGeometry g = geometry_of(node, in[0].shape, in[1].shape);
  Range rows = out_region[1];
  if (const int64_t b = winograd_block(node); b > 0 && rows.size() > 0)  // the whole patches of the rows' blocks
    rows = {rows.begin / b * b, (rows.end + b - 1) / b * b};
  const Shape& x = in[0].shape;
  if (reads_x_nchw(node)) in_regions[0] = {out_region[0], {0, x[1]}, window_input_range(g, 0, rows), {0, x[3]}};
  else in_regions[0] = {out_region[0], window_input_range(g, 0, rows), {0, x[2]}, {0, x[3]}};
  Region w = full_region(in[1].shape);
  w[0] = out_region[3];
  in_regions[1] = w;
  if (has_input(in, 2)) in_regions[2] = Region{out_region[3]};
  if (has_input(in, kEpilogueResidualInput)) in_regions[kEpilogueResidualInput] = out_region;  // same positions as y
}

std::shared_ptr<NhwcConvWeights> pack_weights(const Node& node, const Tensor& w) {
  const int64_t m = w.dim(0), c = w.dim(1), kh = w.dim(2), kw = w.dim(3), k = c * kh * kw;
  std::vector<float> rows(static_cast<size_t>(m * k));  // M rows of k: W^T given n_by_k
  const float* wv = w.data<float>();
  for (int64_t j = 0; j < m; ++j)
    for (int64_t ch = 0; ch < c; ++ch)
      for (int64_t ki = 0; ki < kh; ++ki)
        for (int64_t kj = 0; kj < kw; ++kj)
          rows[static_cast<size_t>(j * k + (ki * kw + kj) * c + ch)] = wv[((j * c + ch) * kh + ki) * kw + kj];
  auto p = std::make_shared<NhwcConvWeights>();
  p->w = kernels::pack_b(rows.data(), static_cast<size_t>(k), static_cast<size_t>(m), static_cast<size_t>(k),
                         kernels::BLayout::n_by_k, kernels::active_isa(), gemm_precision(node));
  return p;
}

std::shared_ptr<const void> prepare(const Node& node, std::span<const ValueInfo> in,
                                    std::span<const Tensor* const> constants) {
  if (!claimed(node, in) || constants.size() < 2 || !constants[1]) return nullptr;
  if (on_winograd(node)) return winograd_nhwc_prepare(*constants[1], winograd_block(node));
  return pack_weights(node, *constants[1]);
}

int64_t prepared_bytes(const Node& node, std::span<const ValueInfo>, const void* prepared) {
  if (on_winograd(node)) return winograd_nhwc_prepared_bytes(prepared);
  return static_cast<int64_t>(static_cast<const NhwcConvWeights*>(prepared)->w.bytes());
}

// Output pixels [first, first + count) of image n as AMX-packed A (kernels/amx.h) for W: each
// window row laid out in `row`, then rounded (from float) or copied (from bf16) into its row
// of a 32-row tile.
template <class T>
void lay_out_amx_windows(const T* x, int64_t n, const WindowGeometry& g, int64_t channels, int64_t first,
                         int64_t count, const kernels::PackedB& w, std::vector<T>& row, kernels::PackedA& out) {
  const size_t k = w.k, mr = kernels::gemm_blocking(w.isa, w.precision).mr, rows = static_cast<size_t>(count);
  out.m = rows, out.k = k, out.mr = mr, out.isa = w.isa, out.precision = w.precision;
  const size_t tile_words = out.steps() * mr, tiles = (rows + mr - 1) / mr;
  out.tiles.reserve(tiles * tile_words);
  auto* words = reinterpret_cast<uint32_t*>(out.tiles.data());
  for (size_t i = 0; i < rows; ++i) {
    lay_out_windows(x, n, g, channels, first + static_cast<int64_t>(i), 1, T(0), k, row);
    if constexpr (std::is_same_v<T, float>) kernels::bf16_pack_a_amx_row(row.data(), k, i % mr, words + i / mr * tile_words);
    else kernels::bf16_pack_a_amx_row_from_bf16(row.data(), k, i % mr, words + i / mr * tile_words);
  }
  if (rows % mr != 0) {  // the last tile's rows past the pixels are zero in every step
    uint32_t* last = words + (tiles - 1) * tile_words;
    for (size_t s = 0; s < tile_words; s += kernels::kAmxAStepWords)
      std::fill(last + s + rows % mr * 16, last + s + kernels::kAmxAStepWords, 0u);
  }
}

// The same where every tap is whole 32-step chunks (channels a multiple of 32): each tap's
// channels go straight from x into their tile row, a padding tap as zeros, so no window row is
// laid out and read back.
template <class T>
void lay_out_amx_windows_by_chunks(const T* x, int64_t n, const WindowGeometry& g, int64_t channels, int64_t first,
                                   int64_t count, const kernels::PackedB& w, kernels::PackedA& out) {
  const size_t k = w.k, mr = kernels::gemm_blocking(w.isa, w.precision).mr, rows = static_cast<size_t>(count);
  out.m = rows, out.k = k, out.mr = mr, out.isa = w.isa, out.precision = w.precision;
  const size_t tile_words = out.steps() * mr, tiles = (rows + mr - 1) / mr;
  out.tiles.reserve(tiles * tile_words);
  auto* words = reinterpret_cast<uint32_t*>(out.tiles.data());
  const int64_t ih = g.input[0], iw = g.input[1], ow = g.output[1], kh = g.kernel[0], kw = g.kernel[1];
  const auto chunks = static_cast<size_t>(channels / 32);
  for (size_t i = 0; i < rows; ++i) {
    uint32_t* row = words + i / mr * tile_words + i % mr * 16;
    const int64_t oy = (first + static_cast<int64_t>(i)) / ow, ox = (first + static_cast<int64_t>(i)) % ow;
    for (int64_t ki = 0; ki < kh; ++ki) {
      const int64_t iy = oy * g.strides[0] - g.pads_begin[0] + ki * g.dilations[0];
      for (int64_t kj = 0; kj < kw; ++kj) {
        const int64_t ix = ox * g.strides[1] - g.pads_begin[1] + kj * g.dilations[1];
        const bool inside = iy >= 0 && iy < ih && ix >= 0 && ix < iw;
        const T* src = inside ? x + ((n * ih + iy) * iw + ix) * channels : nullptr;
        kernels::bf16_chunks_to_amx_a(src, chunks, row + static_cast<size_t>(ki * kw + kj) * chunks * kernels::kAmxAStepWords);
      }
    }
  }
  if (rows % mr != 0) {  // the last tile's rows past the pixels are zero in every step
    uint32_t* last = words + (tiles - 1) * tile_words;
    for (size_t s = 0; s < tile_words; s += kernels::kAmxAStepWords)
      std::fill(last + s + rows % mr * 16, last + s + kernels::kAmxAStepWords, 0u);
  }
}

// Padded x rows per implicit-GEMM pass: the copy stays well inside L2 beside W's panel.
constexpr size_t kPaddedBytes = 256 * 1024;

// Output rows [oy0, oy1) and channels [c0, c1) of image n by implicit GEMM. The input rows
// these outputs read are copied once, in bf16, into rows of wp = OW + kw - 1 pixels padded
// with zeros, so output (oy, ox) has its window at padded pixel (oy - oy0) * wp + ox and tap
// (ki, kj) adds ki * wp + kj. The GEMM runs over every padded position; the kw - 1 positions
// at each row's end are not outputs and are not stored.
template <class T>
void run_implicit(const T* x, int64_t n, const WindowGeometry& g, int64_t channels, int64_t oy0, int64_t oy1,
                  int64_t c0, int64_t c1, const kernels::PackedB& w, kernels::GemmTileArgs out, Tensor& y,
                  int64_t y_channel, const void* residual, bool residual_bf16, std::vector<uint16_t>& padded) {
  const int64_t ih = g.input[0], iw = g.input[1], kh = g.kernel[0], kw = g.kernel[1];
  const int64_t oh = g.output[0], ow = g.output[1], wp = ow + kw - 1, m = y.dim(3);
  const int64_t left = g.pads_begin[1];
  std::vector<int64_t> taps;
  for (int64_t ki = 0; ki < kh; ++ki)
    for (int64_t kj = 0; kj < kw; ++kj) taps.push_back(ki * wp + kj);
  const bool y_bf16 = y.dtype() == DType::bf16;
  const auto row_bytes = static_cast<size_t>(wp * channels) * sizeof(uint16_t);
  const int64_t group = std::max<int64_t>(1, static_cast<int64_t>(kPaddedBytes / row_bytes) - (kh - 1));
  alignas(64) float block[32 * 32];
  for (int64_t first = oy0; first < oy1; first += group) {
    const int64_t last = std::min(oy1, first + group), in_rows = last - first + kh - 1;
    const auto positions = static_cast<size_t>((last - first) * wp);
    // Zero slack past the last row: the 32-row blocks read up to 31 positions and a tap past it.
    padded.assign(static_cast<size_t>((in_rows * wp + 32 + kw) * channels), 0);
    for (int64_t r = 0; r < in_rows; ++r) {
      const int64_t iy = first - g.pads_begin[0] + r;
      if (iy < 0 || iy >= ih) continue;
      const T* src = x + (n * ih + iy) * iw * channels;
      uint16_t* dst = padded.data() + (r * wp + left) * channels;
      const int64_t count = std::min(iw, wp - left) * channels;
      if constexpr (std::is_same_v<T, float>) kernels::bf16_round_run(src, static_cast<size_t>(count), dst);
      else std::memcpy(dst, src, static_cast<size_t>(count) * sizeof(uint16_t));
    }
    kernels::AmxConvBlock conv;
    conv.x = padded.data(), conv.channels = static_cast<size_t>(channels), conv.tap_offsets = taps.data(), conv.taps = taps.size();
    for (int64_t jr = c0; jr < c1; jr += 32) {
      conv.b = w.panel(static_cast<size_t>(jr / 32));
      out.n = static_cast<size_t>(std::min<int64_t>(32, c1 - jr));
      for (size_t q0 = 0; q0 < positions; q0 += 32) {
        conv.q0 = q0;
        kernels::bf16_conv_32x32_amx(conv, block);
        // Runs of rows that are outputs of one output row: contiguous in y.
        for (size_t q = q0; q < std::min(positions, q0 + 32);) {
          const auto row = static_cast<int64_t>(q) / wp, ox = static_cast<int64_t>(q) % wp;
          if (ox >= ow) {
            q += static_cast<size_t>(wp - ox);
            continue;
          }
          const size_t end = std::min({positions, q0 + 32, static_cast<size_t>(row * wp + ow)});
          const int64_t at = ((n * oh + first + row) * ow + ox) * m + jr;  // y's and the residual's offset
          kernels::GemmTileArgs t = out;
          t.m = end - q;
          if (y_bf16) t.c_bf16 = reinterpret_cast<uint16_t*>(y.raw()) + at, t.c_bf16_stride = static_cast<size_t>(m);
          else t.c = y.data<float>() + at + y_channel, t.c_stride = static_cast<size_t>(m);
          t.bias = out.bias ? out.bias + jr : nullptr;
          if (residual && residual_bf16) t.residual_bf16 = static_cast<const uint16_t*>(residual) + at;
          else if (residual) t.residual = static_cast<const float*>(residual) + at;
          kernels::amx_finish_rows(block + (q - q0) * 32, t);
          q = end;
        }
      }
    }
  }
}

// The pixel stride of the row path's padded copy: the channels, unless the rows of A one
// microkernel call reads (stride_w pixels apart) would then be a multiple of 4 KiB apart, which
// puts all of them in one L1 set; then a cache line more.
template <class T>
int64_t padded_pixel_values(int64_t channels, int64_t stride_w) {
  const int64_t step_bytes = stride_w * channels * int64_t(sizeof(T));
  return step_bytes % 4096 == 0 ? channels + 64 / int64_t(sizeof(T)) : channels;
}

// `count` pixels of `channels` floats from x (contiguous) into dst, `pixel` values apart:
// copied, or rounded to bf16 (the dot-product row path); or bf16 pixels copied.
template <class T>
void copy_pixels(const T* x, int64_t count, int64_t channels, int64_t pixel, T* dst) {
  if (pixel == channels) return void(std::copy_n(x, count * channels, dst));
  for (int64_t i = 0; i < count; ++i) std::copy_n(x + i * channels, channels, dst + i * pixel);
}
void copy_pixels(const float* x, int64_t count, int64_t channels, int64_t pixel, uint16_t* dst) {
  auto* words = reinterpret_cast<uint32_t*>(dst);
  if (pixel == channels)
    return kernels::bf16_round_rows_avx512bf16(x, 0, 1, static_cast<size_t>(count * channels), words, 0);
  kernels::bf16_round_rows_avx512bf16(x, static_cast<size_t>(channels), static_cast<size_t>(count),
                                      static_cast<size_t>(channels), words, static_cast<size_t>(pixel / 2));
}

// Where run_on_rows writes: output pixel (oy, ox), channel c0 + j at y (or y_bf16) +
// ((oy - row0) * OW + ox) * stride + j, and reads a fused residual the same way.
struct RowsOut {
  float* y = nullptr;
  uint16_t* y_bf16 = nullptr;
  const float* residual = nullptr;
  int64_t stride = 0, row0 = 0;
};

// Output rows [oy0, oy1) and channels [c0, c1) of image n on the row path (runs_on_rows). The
// input rows these outputs read are copied once into rows of padded_row_pixels pixels, zeros
// where the windows reach past the input, in groups that stay well inside L2; each group is one
// conv_rows call.
// T is the copy's element: float, or bf16 bits for the dot-product kernel (bf16 weights),
// which also reads x stored as bf16 (X uint16_t) and may write y as bf16.
template <class X, class T>
void run_on_rows(const X* x, bool x_nchw, int64_t n, const WindowGeometry& g, int64_t channels, int64_t oy0,
                 int64_t oy1, int64_t c0, int64_t c1, kernels::ConvRowCall call, const RowsOut& out,
                 std::vector<T>& padded) {
  const int64_t ih = g.input[0], iw = g.input[1], ow = g.output[1];
  const int64_t pixel = padded_pixel_values<T>(channels, g.strides[1]);
  const int64_t wp = padded_row_pixels(g), left = g.pads_begin[1], row_floats = wp * pixel;
  const auto row_bytes = static_cast<size_t>(row_floats) * sizeof(T);
  const int64_t fit = std::max<int64_t>(1, static_cast<int64_t>(kPaddedBytes / row_bytes));
  const int64_t group = std::max<int64_t>(1, (fit - input_rows_of(g, 1)) / g.strides[0] + 1);
  call.tap_row_floats = static_cast<size_t>(g.dilations[0] * row_floats);
  call.pixel_floats = static_cast<size_t>(pixel);
  call.out_w = static_cast<size_t>(ow);
  call.y_stride = static_cast<size_t>(out.stride);
  call.n0 = static_cast<size_t>(c0), call.n = static_cast<size_t>(c1 - c0);
  // The input columns that land in a padded row, and where.
  const int64_t from = std::max<int64_t>(0, -left), to = std::min(iw, wp - left);
  for (int64_t first = oy0; first < oy1; first += group) {
    const int64_t last = std::min(oy1, first + group), in_rows = input_rows_of(g, last - first);
    padded.resize(static_cast<size_t>(in_rows * row_floats));
    for (int64_t r = 0; r < in_rows; ++r) {
      const int64_t iy = first * g.strides[0] - g.pads_begin[0] + r;
      T* dst = padded.data() + r * row_floats;
      if (iy < 0 || iy >= ih || to <= from) {
        std::fill(dst, dst + row_floats, T(0));
        continue;
      }
      std::fill(dst, dst + (left + from) * pixel, T(0));
      if constexpr (std::is_same_v<T, float> && std::is_same_v<X, float>) {
        if (x_nchw) {  // each pixel's channels from their planes, the row written once in order
          const float* src = x + (n * channels * ih + iy) * iw;
          const int64_t plane = ih * iw;
          if (channels == 3 && pixel == 3) {  // an RGB image: a fixed interleave the compiler vectorises
            const float *r = src, *g = src + plane, *b = src + 2 * plane;
            float* to_pixel = dst + left * 3;
            for (int64_t ix = from; ix < to; ++ix) {
              to_pixel[3 * ix] = r[ix];
              to_pixel[3 * ix + 1] = g[ix];
              to_pixel[3 * ix + 2] = b[ix];
            }
          } else {
            for (int64_t ix = from; ix < to; ++ix) {
              float* to_pixel = dst + (left + ix) * pixel;
              for (int64_t c = 0; c < channels; ++c) to_pixel[c] = src[c * plane + ix];
            }
          }
          std::fill(dst + (left + to) * pixel, dst + row_floats, T(0));
          continue;
        }
      }
      // The gap after each pixel's channels (pixel > channels) is never read.
      copy_pixels(x + ((n * ih + iy) * iw + from) * channels, to - from, channels, pixel, dst + (left + from) * pixel);
      std::fill(dst + (left + to) * pixel, dst + row_floats, T(0));
    }
    if constexpr (std::is_same_v<T, float>) call.x = padded.data();
    else call.x_bf16 = padded.data();
    call.rows = static_cast<size_t>(last - first);
    call.row_step_floats = static_cast<size_t>(g.strides[0] * row_floats);
    const int64_t at = (first - out.row0) * ow * out.stride;  // y's and the residual's offset
    if (out.y_bf16) call.y_bf16 = out.y_bf16 + at;
    else call.y = out.y + at;
    call.residual = out.residual ? out.residual + at : nullptr;
    kernels::conv_rows(call);
  }
}

// The reference's values for region r, where y may be a Concat's buffer that this node writes
// channels [y_channel, y_channel + M) of (writes_channel_slice).
void reference_tile(const Node& node, std::span<const Tensor* const> in, std::span<Tensor* const> out, const Region& r,
                    int64_t y_channel) {
  Tensor& y = *out[0];
  const int64_t own = in[1]->dim(0);
  if (y_channel == 0 && y.dim(3) == own) return reference_whole(node, in, out, r);
  const std::vector<Tensor> whole = evaluate_node(node, in);
  if (whole.empty() || whole[0].rank() != 4 || whole[0].dim(3) != own || y.dtype() != DType::f32)
    throw Error(node.describe() + ": reference output does not fit its channels of the Concat");
  const float* from = whole[0].data<float>();
  float* to = y.data<float>();
  for (int64_t n = r[0].begin; n < r[0].end; ++n)
    for (int64_t oy = r[1].begin; oy < r[1].end; ++oy)
      for (int64_t ox = r[2].begin; ox < r[2].end; ++ox) {
        const int64_t pixel = (n * y.dim(1) + oy) * y.dim(2) + ox;
        std::copy(from + pixel * own + r[3].begin, from + pixel * own + r[3].end, to + pixel * y.dim(3) + y_channel + r[3].begin);
      }
}

void run_tile(const Node& node, std::span<const Tensor* const> in, std::span<Tensor* const> out, const Region& r,
              const void* prepared, TileScratch& scratch) {
  Tensor& y = *out[0];
  check_region(node, r, y.shape());
  const bool y_bf16 = y.dtype() == DType::bf16;
  // Where y is a Concat's buffer: the first of this node's channels there; y.dim(3) is then
  // the Concat's channels, so every y offset below steps pixels by it.
  const int64_t y_channel = y_channel_offset(node);
  if (!claimed(node, infos_of_tensors(in)) || r[2].begin != 0 || r[2].end != y.dim(2) ||
      (y_bf16 && !writes_bf16(node)))
    return reference_tile(node, in, out, r, y_channel);
  for (const Range& d : r)
    if (d.size() <= 0) return;
  const Tensor& x = *in[0];
  const bool x_nchw = reads_x_nchw(node);
  if (on_winograd(node)) {
    const WindowGeometry g = geometry_of(node, x.shape(), in[1]->shape());
    kernels::Epilogue e;
    const Tensor* bias = optional_input(in, 2);
    const Tensor* residual = optional_input(in, kEpilogueResidualInput);
    e.bias = bias ? bias->data<float>() : nullptr;
    e.residual = residual ? residual->data<float>() : nullptr;
    e.activation = epilogue_activation(node);
    if (x_nchw) return reference_tile(node, in, out, r, y_channel);  // the layout pass never makes this
    return winograd_nhwc_conv_tile(winograd_block(node), conv2d_shape_2d(g, x.dim(3)), x, *in[1], y, y_channel, r, e,
                                   prepared, scratch);
  }
  std::shared_ptr<const NhwcConvWeights> own;
  const auto* p = static_cast<const NhwcConvWeights*>(prepared);
  if (!p) {
    own = pack_weights(node, *in[1]);
    p = own.get();
  }
  const WindowGeometry g = geometry_of(node, x.shape(), in[1]->shape());
  const int64_t channels = channels_of(node, x.shape()), ow = y.dim(2), m = y.dim(3);
  const size_t k = p->w.k;
  const Tensor* bias = optional_input(in, 2);
  const Tensor* residual = optional_input(in, kEpilogueResidualInput);
  const kernels::ActivationParams activation = epilogue_activation(node);
  const int64_t first = r[1].begin * ow, pixels = r[1].size() * ow;
  const bool direct = reads_x_in_place(g);
  const auto chunk = static_cast<int64_t>(std::max(kMinChunkPixels, kWindowFloats / std::max<size_t>(k, 1)));
  // bfloat16 storage (AMX only, see claimed): x and the residual as bits, y written as bits.
  const bool x_bf16 = x.dtype() == DType::bf16;
  const auto* x_bits = reinterpret_cast<const uint16_t*>(x.raw());
  const auto* residual_bits = residual && residual->dtype() == DType::bf16 ? reinterpret_cast<const uint16_t*>(residual->raw()) : nullptr;
  auto* y_bits = y_bf16 ? reinterpret_cast<uint16_t*>(y.raw()) : nullptr;
  NhwcConvScratch& ws = scratch.get<NhwcConvScratch>();
  std::vector<float>& rows = ws.rows;
  std::vector<uint16_t>& rows_bf16 = ws.rows_bf16;
  // On AMX the windows go straight into the tile unit's A layout, one window row at a time
  // through a row buffer that stays in L1: the f32 window block is never written out and read
  // back to be converted, which was as costly as the products on small layers.
  const bool windows_to_amx = !direct && p->w.precision == kernels::Precision::bf16_amx;
  kernels::PackedA& windows = ws.windows;
  const bool dot = p->w.precision == kernels::Precision::bf16;  // bf16 x and y only as claimed says
  if ((dot || (!x_bf16 && !y_bf16 && !residual_bits)) && runs_on_rows(g, channels, p->w.precision) &&
      !(x_nchw && dot)) {
    std::vector<float>& padded = ws.padded;
    kernels::ConvRowCall call;
    call.channels = static_cast<size_t>(channels);
    call.kernel_h = static_cast<size_t>(g.kernel[0]), call.kernel_w = static_cast<size_t>(g.kernel[1]);
    call.stride_w = static_cast<size_t>(g.strides[1]), call.dilation_w = static_cast<size_t>(g.dilations[1]);
    call.w = &p->w;
    call.bias = bias ? bias->data<float>() + r[3].begin : nullptr;
    call.activation = activation;
    for (int64_t n = r[0].begin; n < r[0].end; ++n) {
      const int64_t image = n * y.dim(1) * ow * m + r[3].begin;  // y's and the residual's offset
      RowsOut o;
      o.stride = m;
      if (y_bf16) o.y_bf16 = y_bits + image;
      else o.y = y.data<float>() + image + y_channel;
      o.residual = residual ? residual->data<float>() + image : nullptr;
      if (dot && x_bf16)
        run_on_rows(x_bits, x_nchw, n, g, channels, r[1].begin, r[1].end, r[3].begin, r[3].end, call, o, ws.padded_bf16);
      else if (dot)
        run_on_rows(x.data<float>(), x_nchw, n, g, channels, r[1].begin, r[1].end, r[3].begin, r[3].end, call, o,
                    ws.padded_bf16);
      else
        run_on_rows(x.data<float>(), x_nchw, n, g, channels, r[1].begin, r[1].end, r[3].begin, r[3].end, call, o, padded);
    }
    return;
  }
  if (x_nchw) return reference_tile(node, in, out, r, y_channel);  // only the row path gathers NCHW rows
  if (runs_implicit(g, channels, p->w.precision)) {
    std::vector<uint16_t>& padded = ws.padded_bf16;
    kernels::GemmTileArgs epilogue;
    epilogue.finish = true;
    epilogue.bias = bias ? bias->data<float>() : nullptr;
    epilogue.residual_stride = static_cast<size_t>(m);
    epilogue.activation = activation;
    const void* residual_data = residual ? static_cast<const void*>(residual->raw()) : nullptr;
    kernels::amx_begin();
    for (int64_t n = r[0].begin; n < r[0].end; ++n) {
      if (x_bf16)
        run_implicit(x_bits, n, g, channels, r[1].begin, r[1].end, r[3].begin, r[3].end, p->w, epilogue, y,
                     y_channel, residual_data, residual_bits != nullptr, padded);
      else
        run_implicit(x.data<float>(), n, g, channels, r[1].begin, r[1].end, r[3].begin, r[3].end, p->w, epilogue, y,
                     y_channel, residual_data, residual_bits != nullptr, padded);
    }
    kernels::amx_end();
    return;
  }
  for (int64_t n = r[0].begin; n < r[0].end; ++n) {
    const int64_t image = n * y.dim(1) * ow * m + r[3].begin;  // y's and the residual's offset
    for (int64_t at = first; at < first + pixels; at += direct ? pixels : chunk) {
      const int64_t count = direct ? pixels : std::min(chunk, first + pixels - at);
      kernels::GemmCall call;
      call.m = static_cast<size_t>(count);
      if (windows_to_amx && channels % 32 == 0) {
        if (x_bf16) lay_out_amx_windows_by_chunks(x_bits, n, g, channels, at, count, p->w, windows);
        else lay_out_amx_windows_by_chunks(x.data<float>(), n, g, channels, at, count, p->w, windows);
      } else if (windows_to_amx && x_bf16) {
        lay_out_amx_windows(x_bits, n, g, channels, at, count, p->w, rows_bf16, windows);
      } else if (windows_to_amx) {
        lay_out_amx_windows(x.data<float>(), n, g, channels, at, count, p->w, rows, windows);
      } else if (direct && x_bf16) {
        call.a_bf16 = x_bits + (n * g.input[0] * g.input[1] + at) * channels;
      } else if (direct) {
        call.a = x.data<float>() + (n * g.input[0] * g.input[1] + at) * channels;
      } else {
        lay_out_windows(x.data<float>(), n, g, channels, at, count, 0.0f, k, rows);
        call.a = rows.data();
      }
      call.a_stride = direct ? static_cast<size_t>(channels) : k;
      call.n0 = static_cast<size_t>(r[3].begin);
      call.n = static_cast<size_t>(r[3].size());
      if (y_bf16) call.c_bf16 = y_bits + image + at * m;
      else call.c = y.data<float>() + image + at * m + y_channel;
      call.c_stride = static_cast<size_t>(m);
      call.epilogue.bias = bias ? bias->data<float>() + r[3].begin : nullptr;
      if (residual_bits) call.epilogue.residual_bf16 = residual_bits + image + at * m;
      else if (residual) call.epilogue.residual = residual->data<float>() + image + at * m;
      call.epilogue.residual_stride = static_cast<size_t>(m);
      call.epilogue.activation = activation;
      if (windows_to_amx) kernels::gemm(call, windows, 0, p->w, &ws.gemm);
      else kernels::gemm(call, p->w, ws.gemm);
    }
  }
}

// What a tile repeats when the layer is cut finer: a channel cut lays out its rows' windows
// again (a 1x1 stride-1 conv reads x in place; the implicit GEMM copies its input rows), and a
// tile of few pixels pays for the rows of the register tile it leaves empty.
TileWork tile_work(const Node& node, std::span<const ValueInfo> in, std::span<const ValueInfo> out, const Shape& extent) {
  if (!claimed(node, in) || out[0].shape.size() != 4) return {};
  const Shape& y = out[0].shape;
  auto size = [&](size_t d) { return double(extent[d] > 0 ? std::min(extent[d], y[d]) : y[d]); };
  const WindowGeometry g = geometry_of(node, in[0].shape, in[1].shape);
  if (on_winograd(node)) {
    // As on the NCHW path: (b + 2)^2 products per b x b block, input and output channel; the
    // input transform covers every input channel whatever the tile's output channels.
    const double b = double(winograd_block(node)), positions = (b + 2) * (b + 2);
    const double blocks = size(0) * std::ceil(size(1) / b) * std::ceil(size(2) / b);
    const double cin = double(channels_of(node, in[0].shape));
    TileWork w;
    w.flops = 2 * positions * size(3) * cin * blocks;
    w.moves = 2 * positions * cin * blocks + positions * size(3) * blocks;
    return w;
  }
  const double k = double(in[1].shape[1] * in[1].shape[2] * in[1].shape[3]);
  const kernels::GemmBlocking b = kernels::gemm_blocking(kernels::active_isa(), gemm_precision(node));
  auto up = [](double v, double m) { return std::ceil(v / m) * m; };
  const double pixels = size(1) * size(2);
  const bool direct = reads_x_in_place(g);
  const int64_t channels = channels_of(node, in[0].shape);
  // Only the f32 kernel reads x in place; the AVX512-BF16 one packs (and rounds) every tile's
  // rows again, so there a channel cut repeats them as a window block would.
  const bool packs_x = direct && gemm_precision(node) == kernels::Precision::bf16;
  const double windows = packs_x  ? size(0) * pixels * k
                         : direct ? 0
                         : runs_implicit(g, channels, gemm_precision(node)) || runs_on_rows(g, channels, gemm_precision(node))
                             ? size(0) * window_elements(node, g, channels, int64_t(k), size(1))
                             : size(0) * pixels * k;
  return gemm_tile_work(gemm_precision(node) == kernels::Precision::bf16_amx,
                        size(0) * 2 * k * up(pixels, double(b.mr)) * up(size(3), double(b.nr)), windows, k * size(3));
}

}  // namespace conv_nhwc_rule

bool conv_nhwc_on_rows(const Node& conv, std::span<const ValueInfo> in) {
  using namespace conv_nhwc_rule;
  if (!claimed(conv, in) || on_winograd(conv) || has_input(in, kEpilogueResidualInput)) return false;
  for (const ValueInfo& v : in)
    if (v.present && v.dtype != DType::f32) return false;
  const kernels::Precision precision = gemm_precision(conv);
  return precision == kernels::Precision::f32 &&
         runs_on_rows(geometry_of(conv, in[0].shape, in[1].shape), channels_of(conv, in[0].shape), precision);
}

std::shared_ptr<const void> conv_nhwc_pack(const Node& conv, const Tensor& w) {
  return conv_nhwc_rule::pack_weights(conv, w);
}

int64_t conv_nhwc_packed_bytes(const void* packed) {
  using namespace conv_nhwc_rule;
  return static_cast<int64_t>(static_cast<const NhwcConvWeights*>(packed)->w.bytes());
}

const kernels::PackedB& conv_nhwc_packed_b(const void* packed) {
  return static_cast<const conv_nhwc_rule::NhwcConvWeights*>(packed)->w;
}

void conv_nhwc_rows_f32(const Node& conv, const Tensor& x, const Tensor& w, const Tensor* bias, const void* packed,
                        int64_t n, int64_t oy0, int64_t oy1, int64_t c0, int64_t c1, float* y, int64_t y_stride,
                        std::vector<float>& padded) {
  using namespace conv_nhwc_rule;
  const auto* p = static_cast<const NhwcConvWeights*>(packed);
  const WindowGeometry g = geometry_of(conv, x.shape(), w.shape());
  kernels::ConvRowCall call;
  call.channels = static_cast<size_t>(channels_of(conv, x.shape()));
  call.kernel_h = static_cast<size_t>(g.kernel[0]), call.kernel_w = static_cast<size_t>(g.kernel[1]);
  call.stride_w = static_cast<size_t>(g.strides[1]), call.dilation_w = static_cast<size_t>(g.dilations[1]);
  call.w = &p->w;
  call.bias = bias ? bias->data<float>() + c0 : nullptr;
  call.activation = epilogue_activation(conv);
  RowsOut out;
  out.y = y, out.stride = y_stride, out.row0 = oy0;
  run_on_rows(x.data<float>(), reads_x_nchw(conv), n, g, channels_of(conv, x.shape()), oy0, oy1, c0, c1, call, out,
              padded);
}

// Every path above steps y's pixels by y.dim(3) and offsets y by the slice's first channel; a
// fused residual would share y's offsets, so a node with one keeps its own y.
bool writes_channel_slice(const Node& node, std::span<const ValueInfo> in) {
  using namespace conv_nhwc_rule;
  return node.outputs.size() == 1 && !has_input(in, kEpilogueResidualInput);
}

void add_conv_nhwc_rules(RuleTable& t) {
  using namespace conv_nhwc_rule;
  TileRule rule{cuttable, needs, run_tile, prepare, prepared_bytes};
  rule.tile_work = tile_work;
  rule.writes_channel_slice = writes_channel_slice;
  t[internal_rule_key("ConvNhwc")] = rule;
}

}  // namespace grove::tiling
