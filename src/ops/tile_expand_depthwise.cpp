// Tile rule of grove.internal ExpandDepthwiseNhwc (ops/expand_depthwise.h): a 1x1 expand conv
// and the depthwise conv after it, band by band. A tile (images, output rows, channels in whole
// GEMM panels) walks its output rows in bands whose expanded input rows fit a quarter of L2:
// it computes those rows of the expand conv, for its own channels only, into a per-worker
// buffer (the float GEMM, x read in place, bias and activation fused), then runs the depthwise
// kernel on the band as on an image of those rows. Rows the next band shares with this one
// (a 3x3 kernel at stride 1: two) move to the buffer's front instead of being computed again.
// Each expanded value gets the same operations as the expand conv's own tile would give it,
// and each output the depthwise kernel's, so any cut gives the same bits.
#include <algorithm>
#include <cstring>
#include <memory>
#include <numeric>
#include <vector>

#include "graph/epilogue_attrs.h"
#include "kernels/aligned_buffer.h"
#include "kernels/cpu_info.h"
#include "kernels/dwconv_nhwc.h"
#include "kernels/gemm.h"
#include "ops/expand_depthwise.h"
#include "ops/fused_epilogue.h"
#include "ops/op_util.h"
#include "ops/tile_util.h"

namespace grove::tiling {
namespace {

struct Packed {
  kernels::PackedB expand;  // We^T: C x M
  std::vector<float> taps;  // [kh * kw][M]
};

struct Scratch {
  kernels::AlignedFloats band;  // expanded rows, M floats a pixel (the tile's channels written); grown only
  kernels::GemmScratch gemm;
};

// Float32 throughout, the expand conv 1x1 without stride or padding, the depthwise conv one
// group per channel and at most the kernel's rows; anything else is left to the reference.
bool claimed(const Node& node, const Node& e, std::span<const ValueInfo> in) {
  if (in.size() < 4 || !in[0].present || !in[1].present || !in[3].present) return false;
  for (const ValueInfo& v : in)
    if (v.present && v.dtype != DType::f32) return false;
  const Shape &x = in[0].shape, &we = in[1].shape, &wd = in[3].shape;
  if (x.size() != 4 || we.size() != 4 || wd.size() != 4 || we[1] != x[3] || we[2] != 1 || we[3] != 1) return false;
  for (const char* a : {"strides", "dilations"})
    for (int64_t v : e.attr_ints(a, {1, 1}))
      if (v != 1) return false;
  for (int64_t p : e.attr_ints("pads", {0, 0, 0, 0}))
    if (p != 0) return false;
  return e.attr_int("group", 1) == 1 && node.attr_int("group", 1) == we[0] && wd[0] == we[0] && wd[1] == 1 &&
         wd[2] <= static_cast<int64_t>(kernels::kDwConvNhwcMaxKernelRows) && !has_input(in, 5);
}

bool claimed(const Node& node, std::span<const ValueInfo> in) { return claimed(node, expand_part(node), in); }

WindowGeometry geometry_of(const Node& node, const Shape& x, const Shape& wd) {
  return window_geometry(node, std::span<const int64_t>(x.data() + 1, 2), {wd[2], wd[3]}, false);
}

// Channels go in whole panels of the expand GEMM (its first column must start one), which are
// whole vectors of the depthwise kernel too.
int64_t channel_block() {
  const auto nr = static_cast<int64_t>(kernels::gemm_blocking(kernels::active_isa(), kernels::Precision::f32).nr);
  return std::lcm(nr, kernels::active_isa() == kernels::Isa::avx512 ? 16 : 8);
}

std::vector<int64_t> cuttable(const Node& node, std::span<const ValueInfo> in, std::span<const ValueInfo> out) {
  const Shape& y = out[0].shape;
  if (!claimed(node, in) || y.size() != 4) return none_cuttable(y);
  return {1, 1, 0, channel_block()};
}

void needs(const Node& node, std::span<const ValueInfo> in, std::span<const ValueInfo>, const Region& out_region,
           std::span<Region> in_regions) {
  for (size_t i = 0; i < in.size(); ++i)
    if (has_input(in, i)) in_regions[i] = full_region(in[i].shape);
  if (!claimed(node, in)) return;
  const WindowGeometry g = geometry_of(node, in[0].shape, in[3].shape);
  in_regions[0] = {out_region[0], window_input_range(g, 0, out_region[1]), {0, in[0].shape[2]}, {0, in[0].shape[3]}};
  for (size_t w : {size_t{1}, size_t{3}}) {
    Region r = full_region(in[w].shape);
    r[0] = out_region[3];
    in_regions[w] = r;
  }
  for (size_t b : {size_t{2}, size_t{4}})
    if (has_input(in, b)) in_regions[b] = Region{out_region[3]};
}

std::shared_ptr<Packed> pack(const Tensor& we, const Tensor& wd) {
  auto p = std::make_shared<Packed>();
  const auto m = static_cast<size_t>(we.dim(0)), c = static_cast<size_t>(we.dim(1));
  p->expand = kernels::pack_b(we.data<float>(), c, m, c, kernels::BLayout::n_by_k);
  const auto taps = static_cast<size_t>(wd.dim(2) * wd.dim(3));
  p->taps.resize(m * taps);
  kernels::pack_dwconv_nhwc_weights(wd.data<float>(), m, taps, p->taps.data());
  return p;
}

std::shared_ptr<const void> prepare(const Node& node, std::span<const ValueInfo> in,
                                    std::span<const Tensor* const> constants) {
  if (!claimed(node, in) || constants.size() < 4 || !constants[1] || !constants[3]) return nullptr;
  return pack(*constants[1], *constants[3]);
}

int64_t prepared_bytes(const Node&, std::span<const ValueInfo>, const void* prepared) {
  const auto* p = static_cast<const Packed*>(prepared);
  return static_cast<int64_t>(p->expand.bytes() + p->taps.size() * sizeof(float));
}

// Expanded input rows a band may hold: a quarter of L2 for the tile's channels of them.
int64_t band_rows(int64_t width, int64_t channels) {
  static const int64_t quarter_l2 = (kernels::cpu_info().l2_bytes > 0 ? kernels::cpu_info().l2_bytes : int64_t{1} << 20) / 4;
  return std::max<int64_t>(1, quarter_l2 / std::max<int64_t>(1, width * channels * int64_t(sizeof(float))));
}

void run_tile(const Node& node, std::span<const Tensor* const> in, std::span<Tensor* const> out, const Region& r,
              const void* prepared, TileScratch& scratch) {
  Tensor& y = *out[0];
  check_region(node, r, y.shape());
  const Node e = expand_part(node);  // once a tile: claimed and the expand epilogue read it
  if (!claimed(node, e, infos_of_tensors(in)) || y.dtype() != DType::f32 || r[2].begin != 0 || r[2].end != y.dim(2))
    return reference_whole(node, in, out, r);
  for (const Range& d : r)
    if (d.size() <= 0) return;
  const Tensor& x = *in[0];
  std::shared_ptr<const Packed> own;
  const auto* p = static_cast<const Packed*>(prepared);
  if (!p) {
    own = pack(*in[1], *in[3]);
    p = own.get();
  }
  const WindowGeometry g = geometry_of(node, x.shape(), in[3]->shape());
  const int64_t h = x.dim(1), w = x.dim(2), cin = x.dim(3), m = y.dim(3), ow = y.dim(2);
  const int64_t c0 = r[3].begin, c1 = r[3].end, kh = g.kernel[0], sh = g.strides[0], dh = g.dilations[0];
  const Tensor* be = optional_input(in, 2);
  const Tensor* bd = optional_input(in, 4);
  Scratch& ws = scratch.get<Scratch>();

  kernels::GemmCall expand;
  expand.a_stride = static_cast<size_t>(cin);
  expand.n0 = static_cast<size_t>(c0);
  expand.n = static_cast<size_t>(c1 - c0);
  expand.c_stride = static_cast<size_t>(m);
  expand.epilogue.bias = be ? be->data<float>() + c0 : nullptr;
  expand.epilogue.activation = epilogue_activation(e);

  kernels::DwConvNhwcCall dw;
  dw.w = p->taps.data();
  dw.bias = bd ? bd->data<float>() : nullptr;
  dw.channels = static_cast<size_t>(m);
  dw.c_begin = static_cast<size_t>(c0), dw.c_end = static_cast<size_t>(c1);
  dw.activation = epilogue_activation(node);
  kernels::Conv2dShape& s = dw.shape;
  s.in_w = static_cast<size_t>(w), s.out_w = static_cast<size_t>(ow);
  s.kernel_h = static_cast<size_t>(kh), s.kernel_w = static_cast<size_t>(g.kernel[1]);
  s.stride_h = static_cast<size_t>(sh), s.stride_w = static_cast<size_t>(g.strides[1]);
  s.dilation_h = static_cast<size_t>(dh), s.dilation_w = static_cast<size_t>(g.dilations[1]);
  s.pad_left = static_cast<size_t>(g.pads_begin[1]);

  // Output rows per band: as many as fit their input rows in the band buffer, at least one.
  const int64_t reach = (kh - 1) * dh + 1, fit = band_rows(w, c1 - c0);
  const int64_t band = std::max<int64_t>(1, (fit - reach) / sh + 1);
  const int64_t pixel_floats = m;
  ws.band.reserve(static_cast<size_t>(((band - 1) * sh + reach) * w * pixel_floats));
  for (int64_t n = r[0].begin; n < r[0].end; ++n) {
    int64_t held0 = 0, held1 = 0;  // the input rows the buffer holds, from its first row on
    for (int64_t or0 = r[1].begin; or0 < r[1].end; or0 += band) {
      const int64_t or1 = std::min(r[1].end, or0 + band);
      const int64_t top = or0 * sh - g.pads_begin[0];
      const int64_t ir0 = std::max<int64_t>(0, top), ir1 = std::min(h, (or1 - 1) * sh - g.pads_begin[0] + reach);
      if (ir1 <= ir0) {  // every row in the padding: the depthwise kernel adds only bias
        held0 = held1 = 0;
      } else if (held1 > ir0 && held0 <= ir0) {  // rows shared with the band before move to the front
        const int64_t keep = held1 - ir0;
        std::memmove(ws.band.data(), ws.band.data() + (ir0 - held0) * w * pixel_floats,
                     static_cast<size_t>(keep * w * pixel_floats) * sizeof(float));
        held0 = ir0, held1 = ir0 + keep;
      } else {
        held0 = held1 = ir0;
      }
      if (ir1 > held1) {
        expand.m = static_cast<size_t>((ir1 - held1) * w);
        expand.a = x.data<float>() + ((n * h + held1) * w) * cin;
        expand.c = ws.band.data() + (held1 - held0) * w * pixel_floats + c0;
        kernels::gemm(expand, p->expand, ws.gemm);
        held1 = ir1;
      }
      // The band as an image of rows [ir0, ir1): output row or0 + j reads band row
      // (or0 + j) * sh - pad - ir0 + ki * dh, so its top padding is what lies above ir0.
      s.in_h = static_cast<size_t>(std::max<int64_t>(0, ir1 - ir0));
      s.out_h = static_cast<size_t>(or1 - or0);
      s.pad_top = static_cast<size_t>(ir0 - top);
      dw.x = ws.band.data();
      dw.y = y.data<float>() + ((n * y.dim(1) + or0) * ow) * m;
      dw.row_begin = 0, dw.row_end = static_cast<size_t>(or1 - or0);
      kernels::dwconv2d_nhwc(dw);
    }
  }
}

// One full-size tile: its expand products over the input rows its outputs read (a row cut
// repeats the rows two bands share), and its depthwise taps.
TileWork tile_work(const Node& node, std::span<const ValueInfo> in, std::span<const ValueInfo> out, const Shape& extent) {
  if (!claimed(node, in) || out[0].shape.size() != 4) return {};
  const Shape& y = out[0].shape;
  auto size = [&](size_t d) { return double(extent[d] > 0 ? std::min(extent[d], y[d]) : y[d]); };
  const WindowGeometry g = geometry_of(node, in[0].shape, in[3].shape);
  const Range rows = window_input_range(g, 0, Range{0, int64_t(size(1))});
  const double expand = 2 * size(0) * double(rows.size()) * double(in[0].shape[2]) * double(in[0].shape[3]) * size(3);
  const double taps = double(in[3].shape[2] * in[3].shape[3]);
  TileWork work;
  work.flops = expand + 2 * size(0) * size(1) * size(2) * size(3) * taps;
  work.moves = size(0) * double(rows.size()) * double(in[0].shape[2]) * double(in[0].shape[3]);
  return work;
}

}  // namespace

void add_expand_depthwise_rules(RuleTable& t) {
  TileRule rule{cuttable, needs, run_tile, prepare, prepared_bytes};
  rule.tile_work = tile_work;
  t[internal_rule_key("ExpandDepthwiseNhwc")] = rule;
}

}  // namespace grove::tiling
