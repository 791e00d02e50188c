// Tile rules of the channels-last feature-pruning ops (feature_pruning_nhwc.cpp).
//
// PrunedConvNhwc (2-D, group 1, float32): cut by images, output rows and panels of output
// channels, as ConvNhwc is. Per image, the tile
//  1. copies the input rows its windows read into a compact map of the kept channels only,
//     zero at pruned positions: channels-last, a kept position's kept channels are one run, so
//     each window tap after that is one copy;
//  2. lays out the windows of the output positions it computes (those whose window centre is
//     kept, computed_outputs) as the rows of A, k ordered (kernel row, kernel column, kept
//     channel), and runs one GEMM against the kept channels' rows of the packed weights
//     (gathered per image: a kept channel's row of a panel is one run of nr floats);
//  3. writes each computed row to its place in y with the fused epilogue, and 0 elsewhere.
// Pruned positions so cost nothing in the GEMM, and pruned channels shorten its k. Where the
// gathered weights would be used over too few positions to pay for their copy, the tile keeps
// every channel (pruned ones as zeros in the map) and reads the packed weights as they are.
//
// AttentionKeepNhwc: one tile per image (its consumers wait for that image's decision only).
// ApplyKeepNhwc: cut by images and rows.
#include <algorithm>
#include <cstdint>
#include <cstring>
#include <span>

#include "kernels/gemm.h"
#include "ops/conv/conv_geometry.h"
#include "ops/conv/conv_gemm_forms.h"
#include "ops/conv/conv_nhwc_rows.h"
#include "ops/fused_epilogue.h"
#include "ops/op_util.h"
#include "ops/pruning/feature_pruning.h"
#include "ops/tile_util.h"

namespace grove::tiling {
namespace pruned_conv_nhwc_rule {

bool claimed(const Node& node, std::span<const ValueInfo> in) {
  return in.size() == kPrunedConvKeepInput + 1 && in[0].shape.size() == 4 && in[0].dtype == DType::f32 &&
         in[1].shape.size() == 4 && node.attr_int("group", 1) == 1;
}

WindowGeometry geometry(const Node& node, const Shape& x, const Shape& w) {
  return window_geometry(node, std::span<const int64_t>(x.data() + 1, 2), {w[2], w[3]}, false);
}

size_t panel_width() { return kernels::gemm_blocking(kernels::active_isa()).nr; }

// Images, output rows and whole panels of output channels; output channels only where the
// weights outweigh the windows (late layers: few positions, many channels), so each tile
// gathers and streams its own slice of the weights, as the ConvNhwc rule cuts.
std::vector<int64_t> cuttable(const Node& node, std::span<const ValueInfo> in, std::span<const ValueInfo> out) {
  const Shape& y = out[0].shape;
  if (!claimed(node, in) || y.size() != 4) return none_cuttable(y);
  const int64_t k = numel(in[1].shape) / std::max<int64_t>(in[1].shape[0], 1);
  const auto block = static_cast<int64_t>(panel_width());
  if (cut_weights_first(k * y[3], 2 * k * y[1] * y[2])) return {1, 0, 0, block};
  return {1, 1, 0, block};
}

void needs(const Node& node, std::span<const ValueInfo> in, std::span<const ValueInfo>, const Region& out_region,
           std::span<Region> in_regions) {
  for (size_t i = 0; i < in.size(); ++i) in_regions[i] = in[i].present ? full_region(in[i].shape) : Region{};
  if (!claimed(node, in)) return;
  const WindowGeometry g = geometry(node, in[0].shape, in[1].shape);
  in_regions[0][0] = out_region[0];
  in_regions[0][1] = window_input_range(g, 0, out_region[1]);
  if (has_input(in, kEpilogueResidualInput)) in_regions[kEpilogueResidualInput] = out_region;
  in_regions[kPrunedConvKeepInput][0] = out_region[0];
}

std::shared_ptr<const void> prepare(const Node& node, std::span<const ValueInfo> in,
                                    std::span<const Tensor* const> constants) {
  if (!claimed(node, in) || constants.size() < 2 || !constants[1]) return nullptr;
  return conv_nhwc_pack(node, *constants[1]);
}

int64_t prepared_bytes(const Node&, std::span<const ValueInfo>, const void* prepared) {
  return conv_nhwc_packed_bytes(prepared);
}

// A worker's buffers for this rule.
struct Workspace {
  std::vector<unsigned char> kept_position, kept_channel;  // per input position / channel: 1 when kept
  std::vector<unsigned char> computed;                     // per output position: 1 when computed
  std::vector<uint32_t> outputs;                           // the tile's computed output positions
  std::vector<float> map;                                  // the tile's input rows, [row][column][kept channel]
  std::vector<float> a, c, residual;                       // windows [P][k], C and the residual [P][columns]
  kernels::PackedB b;                                      // the kept channels' weights, gathered
  kernels::GemmScratch scratch;
};

// The kept channels' rows of panels [c0 / nr, c1 / nr) of the packed weights: for tap t and
// kept channel i, row t * channels + channels_kept[i] of each panel.
void gather_weights(kernels::PackedB& out, const kernels::PackedB& full, const int64_t* channels_kept, size_t kept,
                    size_t channels, size_t taps, size_t c0, size_t c1) {
  const size_t nr = full.nr, panels = (c1 - c0 + nr - 1) / nr, k = kept * taps;
  out.k = k, out.n = c1 - c0, out.nr = nr, out.isa = full.isa, out.precision = full.precision;
  out.panels.reserve(panels * k * nr);
  for (size_t j = 0; j < panels; ++j) {
    const float* src = full.panel(c0 / nr + j);
    float* dst = out.panels.data() + j * k * nr;
    for (size_t t = 0; t < taps; ++t)
      for (size_t i = 0; i < kept; ++i, dst += nr) std::memcpy(dst, src + (t * channels + size_t(channels_kept[i])) * nr, nr * sizeof(float));
  }
}

void run_tile(const Node& node, std::span<const Tensor* const> in, std::span<Tensor* const> out, const Region& r,
              const void* prepared, TileScratch& scratch) {
  std::vector<ValueInfo> infos = infos_of_tensors(in);
  if (!claimed(node, infos) || !prepared) return reference_whole(node, in, out, r);
  check_region(node, r, out[0]->shape());
  for (const Range& d : r)
    if (d.size() <= 0) return;
  Workspace& ws = scratch.get<Workspace>();
  const Tensor &x = *in[0], &keep = *in[kPrunedConvKeepInput];
  const Tensor* bias = optional_input(in, kEpilogueBiasInput);
  const Tensor* residual = optional_input(in, kEpilogueResidualInput);
  const kernels::PackedB& full = conv_nhwc_packed_b(prepared);
  const WindowGeometry g = geometry(node, x.shape(), in[1]->shape());
  const kernels::Conv2dShape shape = conv2d_shape_2d(g, x.dim(3));
  const int64_t kc = node.attr_int(kAttrKeepChannels, 0), kp = node.attr_int(kAttrKeepPositions, 0);
  const int64_t channels = x.dim(3), width = x.dim(2), in_plane = x.dim(1) * width;
  const size_t taps = shape.kernel_h * shape.kernel_w, out_plane = shape.out_h * shape.out_w;
  const size_t m = static_cast<size_t>(out[0]->dim(3));
  const size_t c0 = static_cast<size_t>(r[3].begin), c1 = static_cast<size_t>(r[3].end), columns = c1 - c0;
  const Range rows = window_input_range(g, 0, r[1]);
  // Gathering the kept channels' weights costs a copy of each, and saves 2 x positions FLOPs
  // per weight of a pruned channel. The GEMM's register tile does about 2 mr nr / (mr + nr)
  // FLOPs per float it loads; below that many saved FLOPs per gathered weight the tile keeps
  // every channel (the pruned ones zero in the map) and reads the packed weights as they are.
  const kernels::GemmBlocking blocking = kernels::gemm_blocking(kernels::active_isa());
  const double flops_per_load = 2.0 * double(blocking.mr * blocking.nr) / double(blocking.mr + blocking.nr);
  const auto activation = epilogue_activation(node);
  for (int64_t n = r[0].begin; n < r[0].end; ++n) {
    const int64_t* kept = keep.data<int64_t>() + n * (kc + kp);
    for (int64_t i = 0; i < kc + kp; ++i)
      if (kept[i] < 0 || kept[i] >= (i < kc ? channels : in_plane)) throw Error(node.describe() + ": keep index out of range");
    ws.kept_position.assign(size_t(in_plane), 0);
    ws.kept_channel.assign(size_t(channels), 0);
    for (int64_t i = 0; i < kc + kp; ++i) (i < kc ? ws.kept_channel : ws.kept_position)[size_t(kept[i])] = 1;
    // With every position kept, every output is computed (a window centred in the padding too).
    ws.computed.assign(out_plane, 1);
    if (kp < in_plane) computed_outputs(shape, ws.kept_position.data(), ws.computed.data());
    // Outputs not computed are 0; the computed ones are listed.
    float* y = out[0]->data<float>() + size_t(n) * out_plane * m;
    ws.outputs.clear();
    for (size_t q = size_t(r[1].begin) * shape.out_w; q < size_t(r[1].end) * shape.out_w; ++q) {
      if (ws.computed[q]) ws.outputs.push_back(static_cast<uint32_t>(q));
      else std::fill_n(y + q * m + c0, columns, 0.0f);
    }
    const size_t positions = ws.outputs.size();
    if (positions == 0) continue;
    const bool gather = kc < channels && 2.0 * double(positions) * double(channels - kc) >= flops_per_load * double(kc);
    const size_t run = gather ? size_t(kc) : size_t(channels), k = taps * run;
    // 1. The input rows' kept channels, zero at pruned positions (and pruned channels).
    ws.map.resize(size_t(rows.size() * width) * run);
    for (int64_t p = rows.begin * width; p < rows.end * width; ++p) {
      float* dst = ws.map.data() + size_t(p - rows.begin * width) * run;
      const float* src = x.data<float>() + (n * in_plane + p) * channels;
      if (!ws.kept_position[size_t(p)]) std::fill_n(dst, run, 0.0f);
      else if (gather)
        for (size_t i = 0; i < run; ++i) dst[i] = src[kept[i]];
      else
        for (size_t c = 0; c < run; ++c) dst[c] = ws.kept_channel[c] ? src[c] : 0.0f;
    }
    // 2. The weights: the kept channels' rows, or every row as packed.
    if (gather) gather_weights(ws.b, full, kept, run, size_t(channels), taps, c0, c1);
    const kernels::PackedB& b = gather ? ws.b : full;
    const size_t chunk = pixels_per_gemm_call(k, blocking.nr);
    for (size_t first = 0; first < positions; first += chunk) {
      const size_t count = std::min(chunk, positions - first);
      // The windows of the chunk's outputs, one row of A each.
      ws.a.resize(count * k);
      for (size_t j = 0; j < count; ++j) {
        const size_t q = ws.outputs[first + j];
        const int64_t top = int64_t(q / shape.out_w * shape.stride_h) - int64_t(shape.pad_top);
        const int64_t left = int64_t(q % shape.out_w * shape.stride_w) - int64_t(shape.pad_left);
        float* dst = ws.a.data() + j * k;
        for (size_t ki = 0; ki < shape.kernel_h; ++ki)
          for (size_t kj = 0; kj < shape.kernel_w; ++kj, dst += run) {
            const int64_t ih = top + int64_t(ki * shape.dilation_h), iw = left + int64_t(kj * shape.dilation_w);
            if (ih < 0 || ih >= int64_t(shape.in_h) || iw < 0 || iw >= int64_t(shape.in_w)) std::fill_n(dst, run, 0.0f);
            else std::memcpy(dst, ws.map.data() + size_t((ih - rows.begin) * width + iw) * run, run * sizeof(float));
          }
      }
      ws.c.resize(count * columns);
      kernels::GemmCall call;
      call.m = count;
      call.a = ws.a.data();
      call.a_stride = k;
      call.n0 = gather ? 0 : c0;
      call.n = columns;
      call.c = ws.c.data();
      call.c_stride = columns;
      call.epilogue.bias = bias ? bias->data<float>() + c0 : nullptr;
      call.epilogue.activation = activation;
      if (residual) {
        ws.residual.resize(count * columns);
        const float* rn = residual->data<float>() + size_t(n) * out_plane * m;
        for (size_t j = 0; j < count; ++j)
          std::memcpy(ws.residual.data() + j * columns, rn + size_t(ws.outputs[first + j]) * m + c0, columns * sizeof(float));
        call.epilogue.residual = ws.residual.data();
        call.epilogue.residual_stride = columns;
      }
      kernels::gemm(call, b, ws.scratch);
      // 3. Each computed row to its place.
      for (size_t j = 0; j < count; ++j)
        std::memcpy(y + size_t(ws.outputs[first + j]) * m + c0, ws.c.data() + j * columns, columns * sizeof(float));
    }
  }
}

// AttentionKeepNhwc: one tile per image or block of images.
std::vector<int64_t> keep_cuttable(const Node&, std::span<const ValueInfo> in, std::span<const ValueInfo> out) {
  std::vector<int64_t> blocks = none_cuttable(out[0].shape);
  if (in.size() == 1 && in[0].shape.size() == 4 && in[0].dtype == DType::f32) blocks[0] = 1;
  return blocks;
}

void keep_needs(const Node&, std::span<const ValueInfo> in, std::span<const ValueInfo>, const Region& out_region,
                std::span<Region> in_regions) {
  in_regions[0] = full_region(in[0].shape);
  in_regions[0][0] = out_region[0];
}

void keep_run(const Node& node, std::span<const Tensor* const> in, std::span<Tensor* const> out, const Region& r,
              const void*, TileScratch& scratch) {
  const Tensor& x = *in[0];
  if (x.rank() != 4 || x.dtype() != DType::f32) return reference_whole(node, in, out, r);
  check_region(node, r, out[0]->shape());
  const int64_t kc = node.attr_int(kAttrKeepChannels, 0), kp = node.attr_int(kAttrKeepPositions, 0);
  const int64_t plane = x.dim(1) * x.dim(2), channels = x.dim(3);
  for (int64_t n = r[0].begin; n < r[0].end; ++n)
    attention_keep_nhwc(x.data<float>() + n * plane * channels, channels, plane, kc, kp,
                        out[0]->data<int64_t>() + n * (kc + kp), scratch.get<AttentionKeepScratch>());
}

// ApplyKeepNhwc: cut by images and rows; a tile copies its kept positions' kept channels and
// zeroes the rest.
std::vector<int64_t> mask_cuttable(const Node&, std::span<const ValueInfo> in, std::span<const ValueInfo> out) {
  std::vector<int64_t> blocks = none_cuttable(out[0].shape);
  if (in.size() == 2 && in[0].shape.size() == 4 && in[0].dtype == DType::f32) blocks[0] = blocks[1] = 1;
  return blocks;
}

void mask_needs(const Node&, std::span<const ValueInfo> in, std::span<const ValueInfo>, const Region& out_region,
                std::span<Region> in_regions) {
  in_regions[0] = full_region(in[0].shape);
  in_regions[0][0] = out_region[0];
  in_regions[0][1] = out_region[1];
  in_regions[1] = full_region(in[1].shape);
  in_regions[1][0] = out_region[0];
}

// A worker's buffers for the mask rule: which channels and positions an image keeps.
struct MaskScratch {
  std::vector<unsigned char> kept_channel, kept_position;
};

void mask_run(const Node& node, std::span<const Tensor* const> in, std::span<Tensor* const> out, const Region& r,
              const void*, TileScratch& scratch) {
  const Tensor &x = *in[0], &keep = *in[1];
  if (x.rank() != 4 || x.dtype() != DType::f32) return reference_whole(node, in, out, r);
  check_region(node, r, out[0]->shape());
  const int64_t kc = node.attr_int(kAttrKeepChannels, 0), kp = node.attr_int(kAttrKeepPositions, 0);
  const int64_t width = x.dim(2), channels = x.dim(3), plane = x.dim(1) * width;
  MaskScratch& ms = scratch.get<MaskScratch>();
  for (int64_t n = r[0].begin; n < r[0].end; ++n) {
    const int64_t* k = keep.data<int64_t>() + n * (kc + kp);
    ms.kept_channel.assign(size_t(channels), 0);
    ms.kept_position.assign(size_t(plane), 0);
    for (int64_t i = 0; i < kc + kp; ++i) {
      if (k[i] < 0 || k[i] >= (i < kc ? channels : plane)) throw Error(node.describe() + ": keep index out of range");
      (i < kc ? ms.kept_channel : ms.kept_position)[size_t(k[i])] = 1;
    }
    for (int64_t p = r[1].begin * width; p < r[1].end * width; ++p) {
      const float* src = x.data<float>() + (n * plane + p) * channels;
      float* dst = out[0]->data<float>() + (n * plane + p) * channels;
      if (!ms.kept_position[size_t(p)]) {
        std::fill_n(dst, channels, 0.0f);
        continue;
      }
      for (int64_t c = 0; c < channels; ++c) dst[c] = ms.kept_channel[size_t(c)] ? src[c] : 0.0f;
    }
  }
}

}  // namespace pruned_conv_nhwc_rule

void add_pruned_conv_nhwc_rules(RuleTable& t) {
  using namespace pruned_conv_nhwc_rule;
  t[internal_rule_key("ApplyKeepNhwc")] = TileRule{mask_cuttable, mask_needs, mask_run};
  t[internal_rule_key("PrunedConvNhwc")] = TileRule{cuttable, needs, run_tile, prepare, prepared_bytes};
  t[internal_rule_key("AttentionKeepNhwc")] = TileRule{keep_cuttable, keep_needs, keep_run};
}

}  // namespace grove::tiling
