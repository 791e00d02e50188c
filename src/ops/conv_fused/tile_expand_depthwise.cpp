// Tile rule of grove.internal ExpandDepthwiseNhwc (ops/conv_fused/expand_depthwise.h): an expand conv
// and the depthwise conv after it, band by band. A tile (images, output rows, channels in whole
// GEMM panels) walks its output rows in bands whose expanded input rows fit a quarter of L2:
// it computes those rows of the expand conv, for its own channels only, into a per-worker
// buffer (a 1x1 conv: the float GEMM, x read in place; any other: the ConvNhwc row path,
// conv_nhwc_rows.h; bias and activation fused), then runs the depthwise kernel on the band as
// on an image of those rows. Rows the next band shares with this one
// (a 3x3 kernel at stride 1: two) move to the buffer's front instead of being computed again.
// Each expanded value gets the same operations as the expand conv's own tile would give it,
// and each output the depthwise kernel's, so any cut gives the same bits.
//
// InvertedResidualNhwc's tiles (images and output rows; the project conv reads every channel)
// run the depthwise kernel on all channels into a second band buffer, then the project conv's
// GEMM on that band (read in place), with its bias and residual, into y.
#include <algorithm>
#include <cstring>
#include <memory>
#include <numeric>
#include <vector>

#include "graph/node_decisions.h"
#include "kernels/aligned_buffer.h"
#include "kernels/dwconv_nhwc.h"
#include "kernels/gemm.h"
#include "ops/conv/channels_last.h"
#include "ops/conv/conv_nhwc_rows.h"
#include "ops/conv_fused/expand_depthwise.h"
#include "ops/fused_epilogue.h"
#include "ops/op_util.h"
#include "ops/tile_util.h"

namespace grove::tiling {
namespace expand_depthwise_rule {

struct Packed {
  kernels::PackedB expand;           // a 1x1 expand conv's We^T: C x M
  kernels::PackedB project;          // Wp^T: M x P (InvertedResidualNhwc)
  std::shared_ptr<const void> rows;  // any other's, packed for the row path (conv_nhwc_pack)
  std::vector<float> taps;           // [kh * kw][M]
};

struct Scratch {
  kernels::AlignedFloats band;  // expanded rows, M floats a pixel (the tile's channels written); grown only
  kernels::AlignedFloats depthwise;  // the depthwise output rows of a band (InvertedResidualNhwc); grown only
  kernels::GemmScratch gemm;
  std::vector<float> padded;  // the row path's padded input rows
};

// The expand conv's plane: x [N, H, W, C], or [N, C, H, W] for a stem that reads the image
// (Decisions::x_nchw); its output is the depthwise conv's input.
WindowGeometry expand_geometry(const Node& e, const Shape& x, const Shape& we) {
  return window_geometry(e, std::span<const int64_t>(x.data() + (reads_x_nchw(e) ? 2 : 1), 2), {we[2], we[3]}, false);
}

WindowGeometry depthwise_geometry(const Node& node, const WindowGeometry& expand, const Shape& wd) {
  return window_geometry(node, expand.output, {wd[2], wd[3]}, false);
}

// A 1x1 expand conv without stride or padding: its GEMM reads x in place.
bool pointwise(const Node& e, const WindowGeometry& g) {
  return !reads_x_nchw(e) && g.kernel[0] == 1 && g.kernel[1] == 1 && g.strides[0] == 1 && g.strides[1] == 1 &&
         g.pads_begin[0] == 0 && g.pads_begin[1] == 0 && g.output[0] == g.input[0] && g.output[1] == g.input[1];
}

// Float32 throughout, the expand conv pointwise or on the ConvNhwc row path, the depthwise
// conv one group per channel and at most the kernel's rows; anything else is left to the
// reference.
bool claimed(const Node& node, const Node& e, std::span<const ValueInfo> in) {
  if (in.size() < 4 || !in[0].present || !in[1].present || !in[3].present) return false;
  for (const ValueInfo& v : in)
    if (v.present && v.dtype != DType::f32) return false;
  const Shape &x = in[0].shape, &we = in[1].shape, &wd = in[3].shape;
  if (x.size() != 4 || we.size() != 4 || wd.size() != 4 || we[1] != x[reads_x_nchw(e) ? 1 : 3] ||
      e.attr_int("group", 1) != 1)
    return false;
  if (!pointwise(e, expand_geometry(e, x, we)) && !conv_nhwc_on_rows(e, in.first(3))) return false;
  if (node.attr_int("group", 1) != we[0] || wd[0] != we[0] || wd[1] != 1 ||
      wd[2] > static_cast<int64_t>(kernels::kDwConvNhwcMaxKernelRows))
    return false;
  if (!has_project(node)) return !has_input(in, kProjectWeightInput);
  // The project conv: 1x1, one group, no stride or padding (the pass fuses no other).
  if (!has_input(in, kProjectWeightInput) || in.size() > kProjectResidualInput + 1) return false;
  const Shape& wp = in[kProjectWeightInput].shape;
  return wp.size() == 4 && wp[1] == we[0] && wp[2] == 1 && wp[3] == 1;
}

bool claimed(const Node& node, std::span<const ValueInfo> in) { return claimed(node, expand_part(node), in); }

// Channels go in whole panels of the expand GEMM (its first column must start one), which are
// whole vectors of the depthwise kernel too.
int64_t channel_block() {
  const auto nr = static_cast<int64_t>(kernels::gemm_blocking(kernels::active_isa(), kernels::Precision::f32).nr);
  return std::lcm(nr, kernels::active_isa() == kernels::Isa::avx512 ? 16 : 8);
}

std::vector<int64_t> cuttable(const Node& node, std::span<const ValueInfo> in, std::span<const ValueInfo> out) {
  const Shape& y = out[0].shape;
  if (!claimed(node, in) || y.size() != 4) return none_cuttable(y);
  return {1, 1, 0, has_project(node) ? 0 : channel_block()};
}

void needs(const Node& node, std::span<const ValueInfo> in, std::span<const ValueInfo>, const Region& out_region,
           std::span<Region> in_regions) {
  for (size_t i = 0; i < in.size(); ++i)
    if (has_input(in, i)) in_regions[i] = full_region(in[i].shape);
  const Node e = expand_part(node);
  if (!claimed(node, e, in)) return;
  const Shape& x = in[0].shape;
  const WindowGeometry eg = expand_geometry(e, x, in[1].shape);
  const Range mid = window_input_range(depthwise_geometry(node, eg, in[3].shape), 0, out_region[1]);
  const Range rows = mid.size() > 0 ? window_input_range(eg, 0, mid) : Range{0, 0};
  if (reads_x_nchw(e)) in_regions[0] = {out_region[0], {0, x[1]}, rows, {0, x[3]}};
  else in_regions[0] = {out_region[0], rows, {0, x[2]}, {0, x[3]}};
  if (has_project(node)) {  // every channel of the expand and depthwise convs
    if (has_input(in, kProjectResidualInput)) in_regions[kProjectResidualInput] = out_region;
    return;
  }
  for (size_t w : {size_t{1}, size_t{3}}) {
    Region r = full_region(in[w].shape);
    r[0] = out_region[3];
    in_regions[w] = r;
  }
  for (size_t b : {size_t{2}, size_t{4}})
    if (has_input(in, b)) in_regions[b] = Region{out_region[3]};
}

std::shared_ptr<Packed> pack(const Node& e, const Shape& x, const Tensor& we, const Tensor& wd, const Tensor* wp) {
  auto p = std::make_shared<Packed>();
  const auto m = static_cast<size_t>(we.dim(0)), c = static_cast<size_t>(we.dim(1));
  if (pointwise(e, expand_geometry(e, x, we.shape())))
    p->expand = kernels::pack_b(we.data<float>(), c, m, c, kernels::BLayout::n_by_k);
  else
    p->rows = conv_nhwc_pack(e, we);
  const auto taps = static_cast<size_t>(wd.dim(2) * wd.dim(3));
  p->taps.resize(m * taps);
  kernels::pack_dwconv_nhwc_weights(wd.data<float>(), m, taps, p->taps.data());
  if (wp) p->project = kernels::pack_b(wp->data<float>(), m, static_cast<size_t>(wp->dim(0)), m, kernels::BLayout::n_by_k);
  return p;
}

std::shared_ptr<const void> prepare(const Node& node, std::span<const ValueInfo> in,
                                    std::span<const Tensor* const> constants) {
  if (!claimed(node, in) || constants.size() < 4 || !constants[1] || !constants[3]) return nullptr;
  const Tensor* wp = constants.size() > kProjectWeightInput ? constants[kProjectWeightInput] : nullptr;
  if (has_project(node) && !wp) return nullptr;
  return pack(expand_part(node), in[0].shape, *constants[1], *constants[3], has_project(node) ? wp : nullptr);
}

int64_t prepared_bytes(const Node&, std::span<const ValueInfo>, const void* prepared) {
  const auto* p = static_cast<const Packed*>(prepared);
  const int64_t rows = p->rows ? conv_nhwc_packed_bytes(p->rows.get()) : 0;
  return rows + static_cast<int64_t>(p->expand.bytes() + p->project.bytes() + p->taps.size() * sizeof(float));
}

void run_tile(const Node& node, std::span<const Tensor* const> in, std::span<Tensor* const> out, const Region& r,
              const void* prepared, TileScratch& scratch) {
  Tensor& y = *out[0];
  check_region(node, r, y.shape());
  const Node e = expand_part(node);  // once a tile: claimed and the expand epilogue read it
  const Tensor* shortcut = has_project(node) ? optional_input(in, kProjectResidualInput) : nullptr;
  if (!claimed(node, e, infos_of_tensors(in)) || y.dtype() != DType::f32 || r[2].begin != 0 || r[2].end != y.dim(2) ||
      (shortcut && shortcut->shape() != y.shape()))
    return reference_whole(node, in, out, r);
  for (const Range& d : r)
    if (d.size() <= 0) return;
  const Tensor& x = *in[0];
  std::shared_ptr<const Packed> own;
  const auto* p = static_cast<const Packed*>(prepared);
  if (!p) {
    own = pack(e, x.shape(), *in[1], *in[3], has_project(node) ? in[kProjectWeightInput] : nullptr);
    p = own.get();
  }
  const WindowGeometry eg = expand_geometry(e, x.shape(), in[1]->shape());
  const WindowGeometry g = depthwise_geometry(node, eg, in[3]->shape());
  const bool in_place = pointwise(e, eg);
  const bool project = has_project(node);
  const int64_t h = eg.output[0], w = eg.output[1], cin = in[1]->dim(1), m = in[3]->dim(0), ow = y.dim(2);
  const int64_t c0 = project ? 0 : r[3].begin, c1 = project ? m : r[3].end;
  const int64_t kh = g.kernel[0], sh = g.strides[0], dh = g.dilations[0];
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
  kernels::GemmCall proj;  // InvertedResidualNhwc: the depthwise band in place as A
  if (project) {
    ws.depthwise.reserve(static_cast<size_t>(band * ow * m));
    const Node pn = project_part(node);
    const Tensor* bp = optional_input(in, kProjectBiasInput);
    proj.a = ws.depthwise.data();
    proj.a_stride = static_cast<size_t>(m);
    proj.n = static_cast<size_t>(y.dim(3));
    proj.c_stride = proj.n;
    proj.epilogue.bias = bp ? bp->data<float>() : nullptr;
    proj.epilogue.residual_stride = proj.n;
    proj.epilogue.activation = epilogue_activation(pn);
  }
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
        float* rows = ws.band.data() + (held1 - held0) * w * pixel_floats + c0;
        if (in_place) {
          expand.m = static_cast<size_t>((ir1 - held1) * w);
          expand.a = x.data<float>() + ((n * h + held1) * w) * cin;
          expand.c = rows;
          kernels::gemm(expand, p->expand, ws.gemm);
        } else {
          conv_nhwc_rows_f32(e, x, *in[1], be, p->rows.get(), n, held1, ir1, c0, c1, rows, m, ws.padded);
        }
        held1 = ir1;
      }
      // The band as an image of rows [ir0, ir1): output row or0 + j reads band row
      // (or0 + j) * sh - pad - ir0 + ki * dh, so its top padding is what lies above ir0.
      s.in_h = static_cast<size_t>(std::max<int64_t>(0, ir1 - ir0));
      s.out_h = static_cast<size_t>(or1 - or0);
      s.pad_top = static_cast<size_t>(ir0 - top);
      const int64_t first = (n * y.dim(1) + or0) * ow;  // the band's first output pixel
      dw.x = ws.band.data();
      dw.y = project ? ws.depthwise.data() : y.data<float>() + first * m;
      dw.row_begin = 0, dw.row_end = static_cast<size_t>(or1 - or0);
      kernels::dwconv2d_nhwc(dw);
      if (project) {
        proj.m = static_cast<size_t>((or1 - or0) * ow);
        proj.c = y.data<float>() + first * y.dim(3);
        proj.epilogue.residual = shortcut ? shortcut->data<float>() + first * y.dim(3) : nullptr;
        kernels::gemm(proj, p->project, ws.gemm);
      }
    }
  }
}

// One full-size tile: its expand products over the expanded rows its outputs read (a row cut
// repeats the rows two tiles share), its depthwise taps, and the x rows it reads.
TileWork tile_work(const Node& node, std::span<const ValueInfo> in, std::span<const ValueInfo> out, const Shape& extent) {
  if (!claimed(node, in) || out[0].shape.size() != 4) return {};
  const Shape& y = out[0].shape;
  auto size = [&](size_t d) { return double(extent[d] > 0 ? std::min(extent[d], y[d]) : y[d]); };
  const Node e = expand_part(node);
  const Shape &x = in[0].shape, &we = in[1].shape;
  const WindowGeometry eg = expand_geometry(e, x, we);
  const Range mid = window_input_range(depthwise_geometry(node, eg, in[3].shape), 0, Range{0, int64_t(size(1))});
  const Range rows = mid.size() > 0 ? window_input_range(eg, 0, mid) : Range{0, 0};
  // The expand and depthwise convs' channels: the tile's, or all of them before a project conv.
  const double channels = has_project(node) ? double(we[0]) : size(3);
  const double pixels = size(0) * size(1) * size(2), taps = double(in[3].shape[2] * in[3].shape[3]);
  TileWork work;
  work.flops = 2 * size(0) * double(mid.size()) * double(eg.output[1]) * double(we[1] * we[2] * we[3]) * channels +
               2 * pixels * channels * taps + (has_project(node) ? 2 * pixels * channels * size(3) : 0.0);
  work.moves = size(0) * double(rows.size()) * double(x[reads_x_nchw(e) ? 3 : 2]) * double(we[1]);
  return work;
}

}  // namespace expand_depthwise_rule

void add_expand_depthwise_rules(RuleTable& t) {
  using namespace expand_depthwise_rule;
  TileRule rule{cuttable, needs, run_tile, prepare, prepared_bytes};
  rule.tile_work = tile_work;
  t[internal_rule_key("ExpandDepthwiseNhwc")] = rule;
  t[internal_rule_key("InvertedResidualNhwc")] = rule;
}

}  // namespace grove::tiling
