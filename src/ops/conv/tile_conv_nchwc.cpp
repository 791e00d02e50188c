// Tile rule of grove.internal ConvNchwc (channels_blocked.cpp): the float32 Conv on the
// channel-blocked layout, x [N, C / b, H, W, b] and y [N, M / b, OH, OW, b], by the direct
// kernel of kernels/conv_nchwc.h, one group or depthwise. A tile is images x output blocks (in
// pairs, the kernel's register tile; single blocks depthwise, each reading its own) x output
// rows, whole rows. A conv with padding or a column stride copies
// the input rows its windows read into padded, phase-split rows, in bands that stay in a
// quarter of L2 beside the weights' stream; an unpadded stride-1 conv reads x in place.
// W is packed once at plan time.
#include <algorithm>
#include <cmath>
#include <memory>
#include <vector>

#include "graph/node_decisions.h"
#include "kernels/conv_nchwc.h"
#include "kernels/cpu_info.h"
#include "ops/conv/channels_blocked.h"
#include "ops/fused_epilogue.h"
#include "ops/op_util.h"
#include "ops/tile_util.h"

namespace grove::tiling {
namespace conv_nchwc_rule {

struct NchwcWeights {
  std::vector<float> w;  // pack_conv_nchwc_weights
};

// A worker's padded input rows.
struct NchwcConvScratch {
  std::vector<float> padded;
};

bool depthwise(const Node& node, const Shape& x, const Shape& w) { return conv_is_depthwise(node, unblocked_shape(x), w); }

bool claimed(const Node& node, std::span<const ValueInfo> in) {
  if (in.size() < 2 || !in[0].present || !in[1].present || in[0].shape.size() != 5 || in[1].shape.size() != 4)
    return false;
  for (const ValueInfo& v : in)
    if (v.present && v.dtype != DType::f32) return false;
  return conv_fits_nchwc(node, unblocked_shape(in[0].shape), in[1].shape, in[0].shape[4]);
}

WindowGeometry geometry_of(const Node& node, const Shape& x, const Shape& w) {
  return window_geometry(node, std::span<const int64_t>(x.data() + 2, 2), {w[2], w[3]}, false);
}

// An unpadded stride-1 conv reads x as it is.
bool reads_x_in_place(const WindowGeometry& g) {
  return g.strides[1] == 1 && g.pads_begin[0] == 0 && g.pads_begin[1] == 0 && g.pads_end[0] == 0 && g.pads_end[1] == 0;
}

int64_t input_rows_of(const WindowGeometry& g, int64_t rows) { return (rows - 1) * g.strides[0] + g.kernel[0]; }

int64_t phase_pixels(const WindowGeometry& g) {
  return int64_t(kernels::conv_nchwc_phase_pixels(size_t(g.output[1]), size_t(g.kernel[1]), size_t(g.strides[1])));
}

// Floats of one padded input row (all its phases) of one input block.
int64_t padded_row_floats(const WindowGeometry& g, int64_t block) { return g.strides[1] * phase_pixels(g) * block; }

// Output rows per band of padded input: the band's rows of every input block fill at most a
// quarter of L2 (at least one output row).
int64_t band_of(const WindowGeometry& g, int64_t in_blocks, int64_t block) {
  const int64_t l2 = kernels::cpu_info().l2_bytes > 0 ? kernels::cpu_info().l2_bytes : int64_t{1} << 20;
  const int64_t row_bytes = in_blocks * padded_row_floats(g, block) * int64_t(sizeof(float));
  const int64_t fit = std::max<int64_t>(1, l2 / 4 / std::max<int64_t>(1, row_bytes));
  return std::max<int64_t>(1, (fit - g.kernel[0]) / g.strides[0] + 1);
}

std::vector<int64_t> cuttable(const Node& node, std::span<const ValueInfo> in, std::span<const ValueInfo> out) {
  const Shape& y = out[0].shape;
  if (!claimed(node, in) || y.size() != 5) return none_cuttable(y);
  return {1, depthwise(node, in[0].shape, in[1].shape) ? 1 : 2, 1, 0, 0};
}

void needs(const Node& node, std::span<const ValueInfo> in, std::span<const ValueInfo>, const Region& out_region,
           std::span<Region> in_regions) {
  for (size_t i = 0; i < in.size(); ++i)
    if (has_input(in, i)) in_regions[i] = full_region(in[i].shape);
  if (!claimed(node, in)) return;
  const Shape& x = in[0].shape;
  const int64_t block = x[4];
  const WindowGeometry g = geometry_of(node, x, in[1].shape);
  const Range blocks = depthwise(node, x, in[1].shape) ? out_region[1] : Range{0, x[1]};
  in_regions[0] = {out_region[0], blocks, window_input_range(g, 0, out_region[2]), {0, x[3]}, {0, block}};
  const Range channels{out_region[1].begin * block, out_region[1].end * block};
  Region w = full_region(in[1].shape);
  w[0] = channels;
  in_regions[1] = w;
  if (has_input(in, 2)) in_regions[2] = Region{channels};
  if (has_input(in, kEpilogueResidualInput)) in_regions[kEpilogueResidualInput] = out_region;  // same positions as y
}

std::shared_ptr<NchwcWeights> pack_weights(const Tensor& w, int64_t block, bool depthwise) {
  auto p = std::make_shared<NchwcWeights>();
  p->w.resize(size_t(w.numel()));
  if (depthwise)
    kernels::pack_conv_nchwc_depthwise_weights(w.data<float>(), size_t(w.dim(0)), size_t(w.dim(2)), size_t(w.dim(3)),
                                               size_t(block), p->w.data());
  else
    kernels::pack_conv_nchwc_weights(w.data<float>(), size_t(w.dim(0)), size_t(w.dim(1)), size_t(w.dim(2)),
                                     size_t(w.dim(3)), size_t(block), p->w.data());
  return p;
}

std::shared_ptr<const void> prepare(const Node& node, std::span<const ValueInfo> in,
                                    std::span<const Tensor* const> constants) {
  if (!claimed(node, in) || constants.size() < 2 || !constants[1]) return nullptr;
  return pack_weights(*constants[1], in[0].shape[4], depthwise(node, in[0].shape, in[1].shape));
}

int64_t prepared_bytes(const Node&, std::span<const ValueInfo>, const void* prepared) {
  return int64_t(static_cast<const NchwcWeights*>(prepared)->w.size() * sizeof(float));
}

void run_tile(const Node& node, std::span<const Tensor* const> in, std::span<Tensor* const> out, const Region& r,
              const void* prepared, TileScratch& scratch) {
  Tensor& y = *out[0];
  check_region(node, r, y.shape());
  if (!claimed(node, infos_of_tensors(in)) || r[3].begin != 0 || r[3].end != y.dim(3) || r[4].begin != 0 ||
      r[4].end != y.dim(4))
    return reference_whole(node, in, out, r);
  for (const Range& d : r)
    if (d.size() <= 0) return;
  const Tensor& x = *in[0];
  const bool dw = depthwise(node, x.shape(), in[1]->shape());
  // A depthwise tile reads only its own blocks of x.
  const int64_t block = x.dim(4), in_blocks = dw ? r[1].size() : x.dim(1), ih = x.dim(2), iw = x.dim(3);
  std::shared_ptr<const NchwcWeights> own;
  const auto* p = static_cast<const NchwcWeights*>(prepared);
  if (!p) {
    own = pack_weights(*in[1], block, dw);
    p = own.get();
  }
  const WindowGeometry g = geometry_of(node, x.shape(), in[1]->shape());
  const Tensor* bias = optional_input(in, 2);
  const Tensor* residual = optional_input(in, kEpilogueResidualInput);
  const int64_t oh = y.dim(2), ow = y.dim(3), y_block = oh * ow * block, x_block = ih * iw * block;
  kernels::ConvNchwcCall call;
  call.block = size_t(block), call.in_blocks = size_t(in_blocks), call.depthwise = dw;
  call.kernel_h = size_t(g.kernel[0]), call.kernel_w = size_t(g.kernel[1]);
  call.stride_h = size_t(g.strides[0]), call.stride_w = size_t(g.strides[1]);
  call.out_w = size_t(ow), call.out_blocks = size_t(r[1].size());
  call.w = p->w.data() + r[1].begin * int64_t(kernels::conv_nchwc_block_weights(
                                           dw ? 1 : size_t(x.dim(1) * block), call.kernel_h, call.kernel_w, call.block));
  call.bias = bias ? bias->data<float>() + r[1].begin * block : nullptr;
  call.y_block_stride = size_t(y_block);
  call.activation = epilogue_activation(node);
  const bool in_place = reads_x_in_place(g);
  const int64_t band = in_place ? r[2].size() : band_of(g, in_blocks, block);
  const int64_t phase = phase_pixels(g), row_floats = padded_row_floats(g, block);
  std::vector<float>& padded = scratch.get<NchwcConvScratch>().padded;
  for (int64_t n = r[0].begin; n < r[0].end; ++n)
    for (int64_t first = r[2].begin; first < r[2].end; first += band) {
      const int64_t last = std::min(r[2].end, first + band);
      const float* image = x.data<float>() + (n * x.dim(1) + (dw ? r[1].begin : 0)) * x_block;
      if (in_place) {
        call.x = image + first * g.strides[0] * iw * block;
        call.x_block_stride = size_t(x_block), call.x_row_stride = size_t(iw * block);
      } else {
        const int64_t rows = input_rows_of(g, last - first);
        padded.resize(size_t(in_blocks * rows * row_floats));
        kernels::pack_conv_nchwc_rows(image, size_t(in_blocks), size_t(ih), size_t(iw), size_t(block),
                                      long(first * g.strides[0] - g.pads_begin[0]), size_t(rows),
                                      size_t(g.pads_begin[1]), size_t(g.strides[1]), size_t(phase), padded.data());
        call.x = padded.data();
        call.x_phase_stride = size_t(phase * block), call.x_row_stride = size_t(row_floats);
        call.x_block_stride = size_t(rows * row_floats);
      }
      call.out_rows = size_t(last - first);
      const int64_t at = (n * y.dim(1) + r[1].begin) * y_block + first * ow * block;  // y's and the residual's offset
      call.y = y.data<float>() + at;
      call.residual = residual ? residual->data<float>() + at : nullptr;
      kernels::conv_nchwc(call);
    }
}

// A tile's products, counting the register tile's empty block beside an odd last one, and what
// it copies: the padded input rows of its output rows, for every output-block cut again.
TileWork tile_work(const Node& node, std::span<const ValueInfo> in, std::span<const ValueInfo> out, const Shape& extent) {
  if (!claimed(node, in) || out[0].shape.size() != 5) return {};
  const Shape& y = out[0].shape;
  auto size = [&](size_t d) { return double(extent[d] > 0 ? std::min(extent[d], y[d]) : y[d]); };
  const Shape& x = in[0].shape;
  const WindowGeometry g = geometry_of(node, x, in[1].shape);
  const bool dw = depthwise(node, x, in[1].shape);
  const double k = double((dw ? 1 : x[1] * x[4]) * g.kernel[0] * g.kernel[1]);
  const double channels = (dw ? size(1) : std::ceil(size(1) / 2) * 2) * double(x[4]);
  TileWork w;
  w.flops = size(0) * 2 * k * channels * size(2) * size(3);
  if (!reads_x_in_place(g))
    w.moves = size(0) * (dw ? size(1) : double(x[1])) * double(input_rows_of(g, int64_t(size(2))) * padded_row_floats(g, x[4]));
  return w;
}

}  // namespace conv_nchwc_rule

void add_conv_nchwc_rules(RuleTable& t) {
  using namespace conv_nchwc_rule;
  TileRule rule{cuttable, needs, run_tile, prepare, prepared_bytes};
  rule.tile_work = tile_work;
  t[internal_rule_key("ConvNchwc")] = rule;
}

}  // namespace grove::tiling
