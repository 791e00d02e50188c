// Tile rule of grove.internal ConvMaxPoolNhwc (ops/conv_fused/conv_max_pool.h): a float32 conv on the
// row path and the max pool after it, band by band. A tile (images, output rows, channels in
// whole GEMM panels) walks its pool rows in bands whose conv rows fit a quarter of L2: it
// computes those conv rows, for its own channels only, into a per-worker buffer
// (conv_nhwc_rows_f32: bias and activation fused), then pools the band as an image of those
// rows. Conv rows the next band shares with this one (a 3x3 stride-2 pool: one) move to the
// buffer's front instead of being computed again. Each conv value gets the operations the
// ConvNhwc rule would give it and each pooled value the MaxPoolNhwc rule's, so any cut gives
// the same bits as the two nodes apart.
#include <algorithm>
#include <cstring>
#include <memory>
#include <vector>

#include "kernels/aligned_buffer.h"
#include "kernels/gemm.h"
#include "ops/conv/channels_last.h"
#include "ops/conv_fused/conv_max_pool.h"
#include "ops/conv/conv_nhwc_rows.h"
#include "ops/op_util.h"
#include "ops/pool/pool_nhwc_rows.h"
#include "ops/tile_util.h"

namespace grove::tiling {
namespace conv_max_pool_rule {

struct Scratch {
  kernels::AlignedFloats band;  // conv rows, the tile's channels a pixel; grown only
  std::vector<float> padded;    // the conv's padded input rows
};

// x's plane: [N, H, W, C], or [N, C, H, W] for a stem that reads the image (Decisions::x_nchw).
WindowGeometry conv_geometry(const Node& conv, const Shape& x, const Shape& w) {
  return window_geometry(conv, std::span<const int64_t>(x.data() + (reads_x_nchw(conv) ? 2 : 1), 2), {w[2], w[3]},
                         false);
}

WindowGeometry pool_geometry(const Node& pool, const WindowGeometry& conv) {
  return window_geometry(pool, conv.output, pool.attr_ints("kernel_shape"), pool.attr_int("ceil_mode", 0) != 0);
}

// The conv on the row path and a 2-D pool; anything else is left to the reference.
bool claimed(const Node& conv, const Node& pool, std::span<const ValueInfo> in) {
  return in.size() >= 2 && in.size() <= 3 && conv_nhwc_on_rows(conv, in) &&
         pool.attr_ints("kernel_shape").size() == 2 && in[1].shape[2] > 0 && in[1].shape[3] > 0;
}

bool claimed(const Node& node, std::span<const ValueInfo> in) { return claimed(conv_part(node), pool_part(node), in); }

int64_t panel() {
  return static_cast<int64_t>(kernels::gemm_blocking(kernels::active_isa(), kernels::Precision::f32).nr);
}

std::vector<int64_t> cuttable(const Node& node, std::span<const ValueInfo> in, std::span<const ValueInfo> out) {
  const Shape& y = out[0].shape;
  if (!claimed(node, in) || y.size() != 4) return none_cuttable(y);
  return {1, 1, 0, panel()};
}

void needs(const Node& node, std::span<const ValueInfo> in, std::span<const ValueInfo>, const Region& out_region,
           std::span<Region> in_regions) {
  for (size_t i = 0; i < in.size(); ++i)
    if (has_input(in, i)) in_regions[i] = full_region(in[i].shape);
  const Node conv = conv_part(node);
  if (!claimed(conv, pool_part(node), in)) return;
  const WindowGeometry cg = conv_geometry(conv, in[0].shape, in[1].shape);
  const Range conv_rows = window_input_range(pool_geometry(pool_part(node), cg), 0, out_region[1]);
  const Range rows = conv_rows.size() > 0 ? window_input_range(cg, 0, conv_rows) : Range{0, 0};
  const Shape& x = in[0].shape;
  if (reads_x_nchw(conv)) in_regions[0] = {out_region[0], {0, x[1]}, rows, {0, x[3]}};
  else in_regions[0] = {out_region[0], rows, {0, x[2]}, {0, x[3]}};
  Region w = full_region(in[1].shape);
  w[0] = out_region[3];
  in_regions[1] = w;
  if (has_input(in, 2)) in_regions[2] = Region{out_region[3]};
}

std::shared_ptr<const void> prepare(const Node& node, std::span<const ValueInfo> in,
                                    std::span<const Tensor* const> constants) {
  if (!claimed(node, in) || constants.size() < 2 || !constants[1]) return nullptr;
  return conv_nhwc_pack(conv_part(node), *constants[1]);
}

int64_t prepared_bytes(const Node&, std::span<const ValueInfo>, const void* prepared) {
  return conv_nhwc_packed_bytes(prepared);
}

void run_tile(const Node& node, std::span<const Tensor* const> in, std::span<Tensor* const> out, const Region& r,
              const void* prepared, TileScratch& scratch) {
  Tensor& y = *out[0];
  check_region(node, r, y.shape());
  const Node conv = conv_part(node), pool = pool_part(node);
  if (!claimed(conv, pool, infos_of_tensors(in)) || y.dtype() != DType::f32 || r[2].begin != 0 || r[2].end != y.dim(2))
    return reference_whole(node, in, out, r);
  for (const Range& d : r)
    if (d.size() <= 0) return;
  const Tensor& x = *in[0];
  std::shared_ptr<const void> own;
  if (!prepared) {
    own = conv_nhwc_pack(conv, *in[1]);
    prepared = own.get();
  }
  const Tensor* bias = optional_input(in, 2);
  const WindowGeometry cg = conv_geometry(conv, x.shape(), in[1]->shape());
  const WindowGeometry pg = pool_geometry(pool, cg);
  const int64_t conv_h = cg.output[0], conv_w = cg.output[1], m = y.dim(3);
  const int64_t c0 = r[3].begin, c1 = r[3].end, width = c1 - c0;
  const int64_t sy = pg.strides[0], py = pg.pads_begin[0], reach = (pg.kernel[0] - 1) * pg.dilations[0] + 1;
  Scratch& ws = scratch.get<Scratch>();

  // Pool rows per band: as many as fit their conv rows in the band buffer, at least one.
  const int64_t band = std::max<int64_t>(1, (band_rows(conv_w, width) - reach) / sy + 1);
  const int64_t row_floats = conv_w * width;
  ws.band.reserve(static_cast<size_t>(((band - 1) * sy + reach) * row_floats));
  for (int64_t n = r[0].begin; n < r[0].end; ++n) {
    float* image = y.data<float>() + n * y.dim(1) * y.dim(2) * m + c0;
    int64_t held0 = 0, held1 = 0;  // the conv rows the buffer holds, from its first row on
    for (int64_t or0 = r[1].begin; or0 < r[1].end; or0 += band) {
      const int64_t or1 = std::min(r[1].end, or0 + band);
      const int64_t top = or0 * sy - py;
      const int64_t ir0 = std::max<int64_t>(0, top), ir1 = std::min(conv_h, (or1 - 1) * sy - py + reach);
      if (ir1 <= ir0) {  // every window in the padding: the pool gives lowest()
        held0 = held1 = 0;
      } else if (held1 > ir0 && held0 <= ir0) {  // rows shared with the band before move to the front
        const int64_t keep = held1 - ir0;
        std::memmove(ws.band.data(), ws.band.data() + (ir0 - held0) * row_floats,
                     static_cast<size_t>(keep * row_floats) * sizeof(float));
        held0 = ir0, held1 = ir0 + keep;
      } else {
        held0 = held1 = ir0;
      }
      if (ir1 > held1) {
        conv_nhwc_rows_f32(conv, x, *in[1], bias, prepared, n, held1, ir1, c0, c1,
                           ws.band.data() + (held1 - held0) * row_floats, width, ws.padded);
        held1 = ir1;
      }
      // The band as an image of conv rows [held0, held1): pool row oy reads band row
      // oy * sy - py - held0 + ki * dy, so its top padding grows by held0.
      WindowGeometry b = pg;
      b.input[0] = held1 - held0;
      b.pads_begin[0] = py + held0;
      max_pool_nhwc_rows_f32(ws.band.data(), width, width, b, or0, or1, image, m);
    }
  }
}

// One full-size tile: the conv products over the conv rows its pool rows read (a row cut
// repeats the rows two tiles share), the pool's taps, and the conv's padded input rows.
TileWork tile_work(const Node& node, std::span<const ValueInfo> in, std::span<const ValueInfo> out, const Shape& extent) {
  const Node conv = conv_part(node), pool = pool_part(node);
  if (!claimed(conv, pool, in) || out[0].shape.size() != 4) return {};
  const Shape& y = out[0].shape;
  auto size = [&](size_t d) { return double(extent[d] > 0 ? std::min(extent[d], y[d]) : y[d]); };
  const WindowGeometry cg = conv_geometry(conv, in[0].shape, in[1].shape);
  const WindowGeometry pg = pool_geometry(pool, cg);
  const Range conv_rows = window_input_range(pg, 0, Range{0, int64_t(size(1))});
  const Range x_rows = conv_rows.size() > 0 ? window_input_range(cg, 0, conv_rows) : Range{0, 0};
  const Shape& w = in[1].shape;
  const double k = double(w[1] * w[2] * w[3]), channels = double(w[1]);
  const double x_width = double(in[0].shape[reads_x_nchw(conv) ? 3 : 2]);
  TileWork work;
  work.flops = 2 * size(0) * double(conv_rows.size()) * double(cg.output[1]) * k * size(3) +
               size(0) * size(1) * size(2) * size(3) * double(pg.kernel[0] * pg.kernel[1]);
  work.moves = size(0) * double(x_rows.size()) * x_width * channels;
  return work;
}

}  // namespace conv_max_pool_rule

void add_conv_max_pool_rules(RuleTable& t) {
  using namespace conv_max_pool_rule;
  TileRule rule{cuttable, needs, run_tile, prepare, prepared_bytes};
  rule.tile_work = tile_work;
  t[internal_rule_key("ConvMaxPoolNhwc")] = rule;
}

}  // namespace grove::tiling
