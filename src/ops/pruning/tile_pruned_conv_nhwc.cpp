// Tile rule of PrunedConvNhwc, the channels-last pruned conv (feature_pruning_nhwc.cpp).
//
// PrunedConvNhwc (2-D, group 1, float32): cut by images, output rows and panels of output
// channels, as ConvNhwc is. Per image:
//  - where the plan left it on a channels-last Winograd (plan/feature_pruning.cpp keeps the
//    mark where that costs less than the pruned GEMM), it runs Winograd with the kept channels
//    as the only steps of its GEMMs, the pruned positions read as 0 and only the outputs
//    centred on kept positions computed: a block of outputs with none computed is skipped
//    (kernels/winograd_nhwc.h kept_channels, kept_positions, computed);
//  - on AVX-512 it runs the dense conv's row path (kernels/conv_rows.h) on x's kept positions
//    (pruned ones zero in the padded copy), the kernel adding up the kept channels only
//    (ConvRowCall::kept_channels): pruned channels cost no products and no copy. With
//    positions pruned it computes only the outputs centred on kept positions, each window
//    read where it lies in the copy (ConvRowCall::outputs);
//  - elsewhere it copies the input rows its windows read into a compact map of the kept
//    channels only, zero at pruned positions (channels-last, a kept position's kept channels
//    are one run, so each window tap after that is one copy), lays out the windows of the
//    outputs it computes (those whose window centre is kept, computed_outputs) as the rows of
//    A, and runs one GEMM against the kept channels' rows of the packed weights (gathered per
//    image: a kept channel's row of a panel is one run of nr floats); each computed row goes to
//    its place in y with the fused epilogue, 0 elsewhere. Where the gathered weights would be
//    used over too few positions to pay for their copy, it keeps every channel (pruned ones
//    zero in the map) and reads the packed weights as they are.
//
// A tile reads its images' keep rows, or without a keep input waits for its images' whole maps
// and ranks them itself (ops/pruning/feature_pruning.h pruned_conv_keep_row).
//
// AttentionKeepNhwc and ApplyKeepNhwc share their NCHW twins' rules (tile_pruned_conv.cpp).
#include <algorithm>
#include <cstdint>
#include <cstring>
#include <span>

#include "kernels/conv_rows.h"
#include "kernels/gemm.h"
#include "ops/conv/conv_geometry.h"
#include "ops/conv/conv_gemm_forms.h"
#include "ops/conv/conv_nhwc_rows.h"
#include "ops/conv/tile_conv_winograd.h"
#include "ops/fused_epilogue.h"
#include "ops/op_util.h"
#include "ops/pruning/feature_pruning.h"
#include "ops/tile_util.h"

namespace grove::tiling {
namespace pruned_conv_nhwc_rule {

bool claimed(const Node& node, std::span<const ValueInfo> in) {
  return in.size() >= 2 && in.size() <= kPrunedConvKeepInput + 1 && in[0].shape.size() == 4 && in[0].dtype == DType::f32 &&
         in[1].shape.size() == 4 && node.attr_int("group", 1) == 1;
}

WindowGeometry geometry(const Node& node, const Shape& x, const Shape& w) {
  return window_geometry(node, std::span<const int64_t>(x.data() + 1, 2), {w[2], w[3]}, false);
}

size_t panel_width() { return kernels::gemm_blocking(kernels::active_isa()).nr; }

// The Winograd block when the node runs on Winograd (a channels-last Winograd mark), else 0.
int64_t winograd_block(const Node& node, std::span<const ValueInfo> in) {
  return in.empty() || in[0].shape.size() != 4 ? 0 : winograd_nhwc_block(node);
}

// Images, output rows and whole panels of output channels; output channels only where the
// weights outweigh the windows (late layers: few positions, many channels), so each tile
// gathers and streams its own slice of the weights, as the ConvNhwc rule cuts.
std::vector<int64_t> cuttable(const Node& node, std::span<const ValueInfo> in, std::span<const ValueInfo> out) {
  const Shape& y = out[0].shape;
  if (!claimed(node, in) || y.size() != 4) return none_cuttable(y);
  const int64_t k = numel(in[1].shape) / std::max<int64_t>(in[1].shape[0], 1);
  const auto block = static_cast<int64_t>(panel_width());
  if (const int64_t b = winograd_block(node, in); b > 0) {  // as ConvNhwc cuts its Winograd
    const WindowGeometry g = geometry(node, in[0].shape, in[1].shape);
    if (winograd_nhwc_cut_rows(conv2d_shape_2d(g, in[0].shape[3]), y[3], y[0])) return {1, b, 0, block};
    return {1, 0, 0, y[0] > 1 ? 0 : block};
  }
  if (cut_weights_first(k * y[3], 2 * k * y[1] * y[2])) return {1, 0, 0, block};
  return {1, 1, 0, block};
}

void needs(const Node& node, std::span<const ValueInfo> in, std::span<const ValueInfo>, const Region& out_region,
           std::span<Region> in_regions) {
  for (size_t i = 0; i < in.size(); ++i) in_regions[i] = in[i].present ? full_region(in[i].shape) : Region{};
  if (!claimed(node, in)) return;
  const WindowGeometry g = geometry(node, in[0].shape, in[1].shape);
  Range rows = out_region[1];
  if (const int64_t b = winograd_block(node, in); b > 0 && rows.size() > 0)  // the whole patches of the rows' blocks
    rows = {rows.begin / b * b, (rows.end + b - 1) / b * b};
  in_regions[0][0] = out_region[0];
  // Without a keep input the tile ranks its images' whole maps itself.
  if (pruned_conv_reads_keep(in)) in_regions[0][1] = window_input_range(g, 0, rows);
  if (has_input(in, kEpilogueResidualInput)) in_regions[kEpilogueResidualInput] = out_region;
  if (pruned_conv_reads_keep(in)) in_regions[kPrunedConvKeepInput][0] = out_region[0];
}

std::shared_ptr<const void> prepare(const Node& node, std::span<const ValueInfo> in,
                                    std::span<const Tensor* const> constants) {
  if (!claimed(node, in) || constants.size() < 2 || !constants[1]) return nullptr;
  if (const int64_t b = winograd_block(node, in); b > 0) return winograd_nhwc_prepare(*constants[1], b);
  return conv_nhwc_pack(node, *constants[1]);
}

int64_t prepared_bytes(const Node& node, std::span<const ValueInfo> in, const void* prepared) {
  if (winograd_block(node, in) > 0) return winograd_nhwc_prepared_bytes(prepared);
  return conv_nhwc_packed_bytes(prepared);
}

// A worker's buffers for this rule.
struct Workspace {
  std::vector<int64_t> keep;                               // the image's keep row, where the tile ranks x
  AttentionKeepScratch ranking;                            // and the scores it ranks
  KeepFlags flags;                                         // the image's kept channels and positions
  std::vector<unsigned char> computed;                     // per output position: 1 when computed
  std::vector<uint32_t> outputs;                           // the tile's computed output positions
  std::vector<uint32_t> listed;                            // a row group's, counted from its first row
  std::vector<uint32_t> pruned_channels;                   // without the gather: the channels to zero
  std::vector<uint32_t> kept_channels;                     // the row path's channels to add up
  std::vector<uint32_t> k_steps;                           // the GEMM's steps: kept channels of every tap
  std::vector<float> map;                                  // the tile's input rows, [row][column][kept channel]
  std::vector<float> padded;                               // the row path's padded input rows
  std::vector<unsigned char> kept_pixels;                  // per pixel of padded: 0 where it is all zeros
  kernels::ConvRowScratch rows;                            // the row path's tap-by-tap sums
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

// Padded input rows per conv_rows call: the copy stays well inside L2 beside the weights.
constexpr size_t kPaddedBytes = 256 * 1024;

// The outputs of output rows [oy0, oy1) of one image computed on the row path
// (kernels/conv_rows.h), as the dense ConvNhwc runs where the CPU has it: the input rows the
// windows read copied once, padded, zero at the padding and at the positions not kept
// (kept_position, one byte per input position, or null for all), and the taps added up in registers over
// call.kept_channels only: the pruned channels' values are never read and their weights never
// copied. call.n0 names the first output channel; y_image and residual_image point at it.
// outputs (increasing positions of the image's output plane, within the rows) lists the
// outputs to compute, each read where its window lies in the copy; null: every one. The copy
// is ws.padded; with outputs listed and positions pruned, ws.kept_pixels marks its nonzero
// pixels, so the kernel can skip the taps that read a zero one (tap by tap in ws.rows).
void run_rows(const kernels::Conv2dShape& s, const float* x_image, size_t channels, int64_t oy0, int64_t oy1,
              const kernels::PackedB& b, kernels::ConvRowCall call, float* y_image, const float* residual_image,
              size_t m, const unsigned char* kept_position, Workspace& ws, const std::vector<uint32_t>* outputs = nullptr) {
  std::vector<float>& padded = ws.padded;
  std::vector<uint32_t>* listed = &ws.listed;
  // With outputs listed and positions pruned, the copy's zero pixels are marked, so an output's
  // taps that read one are skipped where they are enough of them (ConvRowCall::kept_pixels).
  const bool mark = outputs && kept_position;
  const size_t run = channels;
  const int64_t wp = int64_t((s.out_w - 1) * s.stride_w + (s.kernel_w - 1) * s.dilation_w + 1);
  // A pixel stride that puts the rows one microkernel call reads (stride_w pixels apart) a
  // multiple of 4 KiB apart would put them all in one L1 set: then a cache line more.
  const int64_t pixel = int64_t(s.stride_w * run * sizeof(float)) % 4096 == 0 ? int64_t(run) + 16 : int64_t(run);
  const int64_t row_floats = wp * pixel, span_h = int64_t((s.kernel_h - 1) * s.dilation_h + 1);
  const int64_t fit = std::max<int64_t>(1, int64_t(kPaddedBytes / (size_t(row_floats) * sizeof(float))));
  const int64_t group = std::max<int64_t>(1, (fit - span_h) / int64_t(s.stride_h) + 1);
  call.channels = run;
  call.pixel_floats = size_t(pixel);
  call.tap_row_floats = s.dilation_h * size_t(row_floats);
  call.kernel_h = s.kernel_h, call.kernel_w = s.kernel_w, call.stride_w = s.stride_w, call.dilation_w = s.dilation_w;
  call.out_w = s.out_w;
  call.row_step_floats = s.stride_h * size_t(row_floats);
  call.w = &b;
  call.y_stride = m;
  for (int64_t first = oy0; first < oy1; first += group) {
    const int64_t last = std::min(oy1, first + group), in_rows = (last - first - 1) * int64_t(s.stride_h) + span_h;
    if (outputs) {  // the group's outputs, counted from its first row
      const auto from_q = uint32_t(size_t(first) * s.out_w), to_q = uint32_t(size_t(last) * s.out_w);
      listed->clear();
      for (auto q = std::lower_bound(outputs->begin(), outputs->end(), from_q); q != outputs->end() && *q < to_q; ++q)
        listed->push_back(*q - from_q);
      if (listed->empty()) continue;
      call.outputs = listed->data();
      call.output_count = listed->size();
    }
    padded.resize(size_t(in_rows * row_floats));
    if (mark) {
      ws.kept_pixels.assign(size_t(in_rows * wp), 0);
      call.kept_pixels = ws.kept_pixels.data();
      call.scratch = &ws.rows;
    }
    // The input columns that land in a padded row: pixels [left + from, left + to) of it.
    const int64_t left = int64_t(s.pad_left), from = std::max<int64_t>(0, -left);
    const int64_t to = std::min<int64_t>(int64_t(s.in_w), wp - left);
    for (int64_t r = 0; r < in_rows; ++r) {
      const int64_t iy = first * int64_t(s.stride_h) - int64_t(s.pad_top) + r;
      float* dst = padded.data() + r * row_floats;
      if (iy < 0 || iy >= int64_t(s.in_h) || to <= from) {
        std::fill_n(dst, row_floats, 0.0f);
        continue;
      }
      std::fill(dst, dst + (left + from) * pixel, 0.0f);
      std::fill(dst + (left + to) * pixel, dst + row_floats, 0.0f);
      const float* src = x_image + (iy * int64_t(s.in_w) + from) * int64_t(channels);
      if (!kept_position && pixel == int64_t(channels)) {  // every position: the row's pixels are one run
        std::memcpy(dst + (left + from) * pixel, src, size_t(to - from) * channels * sizeof(float));
        continue;
      }
      for (int64_t ix = from; ix < to; ++ix, src += channels) {
        float* at = dst + (left + ix) * pixel;
        if (!kept_position || kept_position[iy * int64_t(s.in_w) + ix]) {
          std::memcpy(at, src, channels * sizeof(float));
          if (mark) ws.kept_pixels[size_t(r * wp + left + ix)] = 1;
        } else {
          std::fill_n(at, channels, 0.0f);
        }
      }
    }
    call.x = padded.data();
    call.rows = size_t(last - first);
    const size_t at = size_t(first) * s.out_w * m;
    call.y = y_image + at;
    call.residual = residual_image ? residual_image + at : nullptr;
    kernels::conv_rows(call);
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
  const Tensor& x = *in[0];
  const Tensor* keep = pruned_conv_reads_keep(infos) ? in[kPrunedConvKeepInput] : nullptr;
  const Tensor* bias = optional_input(in, kEpilogueBiasInput);
  const Tensor* residual = optional_input(in, kEpilogueResidualInput);
  const WindowGeometry g = geometry(node, x.shape(), in[1]->shape());
  const kernels::Conv2dShape shape = conv2d_shape_2d(g, x.dim(3));
  const int64_t kc = node.attr_int(kAttrKeepChannels, 0), kp = node.attr_int(kAttrKeepPositions, 0);
  const int64_t channels = x.dim(3), width = x.dim(2), in_plane = x.dim(1) * width;
  const bool positions_pruned = kp < keep_units(x.dim(1), width, keep_block(node));
  const size_t taps = shape.kernel_h * shape.kernel_w, out_plane = shape.out_h * shape.out_w;
  const size_t m = static_cast<size_t>(out[0]->dim(3));
  const size_t c0 = static_cast<size_t>(r[3].begin), c1 = static_cast<size_t>(r[3].end), columns = c1 - c0;
  const Range rows = window_input_range(g, 0, r[1]);
  const kernels::GemmBlocking blocking = kernels::gemm_blocking(kernels::active_isa());
  const double flops_per_load = 2.0 * double(blocking.mr * blocking.nr) / double(blocking.mr + blocking.nr);
  const auto activation = epilogue_activation(node);
  const bool rows_path = kernels::conv_row_supported(kernels::active_isa(), kernels::Precision::f32);
  if (const int64_t block = winograd_block(node, infos); block > 0) {
    kernels::Epilogue e;
    e.bias = bias ? bias->data<float>() : nullptr;
    e.residual = residual ? residual->data<float>() : nullptr;
    e.activation = activation;
    for (int64_t n = r[0].begin; n < r[0].end; ++n) {
      const int64_t* kept = pruned_conv_keep_row(node, x, keep, n, true, ws.keep, ws.ranking);
      keep_flags(node, kept, kc, kp, channels, x.dim(1), width, ws.flags);  // checks the row
      ws.kept_channels.assign(kept, kept + kc);  // ascending, as AttentionKeep writes them
      Region image = r;
      image[0] = {n, n + 1};
      // Every channel kept: no list, so the GEMMs take every k step on their plain path (a
      // list of all of them costs the step-by-step loads). No channel kept is still a list.
      static const uint32_t none = 0;
      WinogradNhwcKeep k;
      if (kc < channels) k.channels = kc > 0 ? ws.kept_channels.data() : &none, k.kept = ws.kept_channels.size();
      if (positions_pruned) {
        ws.computed.resize(out_plane);
        computed_outputs(shape, ws.flags.kept_position.data(), ws.computed.data());
        k.positions = ws.flags.kept_position.data(), k.computed = ws.computed.data();
      }
      winograd_nhwc_conv_tile(block, shape, x, *in[1], *out[0], 0, image, e, prepared, scratch, k);
    }
    return;
  }
  const kernels::PackedB& full = conv_nhwc_packed_b(prepared);
  for (int64_t n = r[0].begin; n < r[0].end; ++n) {
    const int64_t* kept = pruned_conv_keep_row(node, x, keep, n, true, ws.keep, ws.ranking);
    keep_flags(node, kept, kc, kp, channels, x.dim(1), width, ws.flags);
    // With every position kept, every output is computed (a window centred in the padding too).
    ws.computed.assign(out_plane, 1);
    if (positions_pruned) computed_outputs(shape, ws.flags.kept_position.data(), ws.computed.data());
    // Outputs not computed are 0; the computed ones are listed.
    float* y = out[0]->data<float>() + size_t(n) * out_plane * m;
    ws.outputs.clear();
    for (size_t q = size_t(r[1].begin) * shape.out_w; q < size_t(r[1].end) * shape.out_w; ++q) {
      if (ws.computed[q]) ws.outputs.push_back(static_cast<uint32_t>(q));
      else std::fill_n(y + q * m + c0, columns, 0.0f);
    }
    const size_t positions = ws.outputs.size();
    if (positions == 0) continue;
    if (rows_path) {
      // The row path over x's kept positions (padding and pruned positions zero), the kernel
      // adding up the kept channels only, the weights as packed; with positions pruned, only
      // the computed outputs, each read where its window lies.
      const bool every = positions == size_t(r[1].size()) * shape.out_w;
      ws.kept_channels.resize(size_t(kc));
      std::copy_n(kept, kc, ws.kept_channels.begin());  // ascending, as AttentionKeep writes them
      kernels::ConvRowCall call;
      call.n0 = c0;
      call.n = columns;
      call.bias = bias ? bias->data<float>() + c0 : nullptr;
      call.activation = activation;
      if (kc < channels) call.kept_channels = ws.kept_channels.data(), call.kept = size_t(kc);
      const float* rn = residual ? residual->data<float>() + size_t(n) * out_plane * m + c0 : nullptr;
      const float* xn = x.data<float>() + n * in_plane * channels;
      run_rows(shape, xn, size_t(channels), r[1].begin, r[1].end, full, call, y + c0, rn, m,
               positions_pruned ? ws.flags.kept_position.data() : nullptr, ws, every ? nullptr : &ws.outputs);
      continue;
    }
    // Otherwise one GEMM over the computed outputs' windows. Where the GEMM takes a list of k
    // steps, the windows are copied whole and the GEMM adds up the kept channels' steps of the
    // packed weights as they are: no weights copied, no product of a pruned channel. Elsewhere
    // gathering the kept channels' weights costs a copy of each, and saves 2 x positions FLOPs
    // per weight of a pruned channel. The GEMM's register tile does about 2 mr nr / (mr + nr)
    // FLOPs per float it loads; below that many saved FLOPs per gathered weight the tile keeps
    // every channel (the pruned ones zero in the map) and reads the packed weights as they are.
    const bool steps = kc < channels && kernels::gemm_takes_k_steps(kernels::active_isa());
    const bool gather = !steps && kc < channels &&
                        2.0 * double(positions) * double(channels - kc) >= flops_per_load * double(kc);
    const size_t run = gather ? size_t(kc) : size_t(channels), k = taps * run;
    ws.pruned_channels.clear();
    for (int64_t c = 0; !gather && !steps && c < channels; ++c)
      if (!ws.flags.kept_channel[size_t(c)]) ws.pruned_channels.push_back(static_cast<uint32_t>(c));
    ws.k_steps.clear();
    for (size_t t = 0; steps && t < taps; ++t)
      for (int64_t i = 0; i < kc; ++i) ws.k_steps.push_back(uint32_t(t * size_t(channels) + size_t(kept[i])));
    if (gather) gather_weights(ws.b, full, kept, run, size_t(channels), taps, c0, c1);
    const kernels::PackedB& b = gather ? ws.b : full;
    // The input rows' kept channels, zero at pruned positions. Without the gather a kept
    // position is copied whole, and its pruned channels zeroed after where the GEMM adds up
    // every step.
    ws.map.resize(size_t(rows.size() * width) * run);
    for (int64_t p = rows.begin * width; p < rows.end * width; ++p) {
      float* dst = ws.map.data() + size_t(p - rows.begin * width) * run;
      const float* src = x.data<float>() + (n * in_plane + p) * channels;
      if (!ws.flags.kept_position[size_t(p)]) {
        std::fill_n(dst, run, 0.0f);
      } else if (gather) {
        for (size_t i = 0; i < run; ++i) dst[i] = src[kept[i]];
      } else {
        std::memcpy(dst, src, run * sizeof(float));
        for (uint32_t c : ws.pruned_channels) dst[c] = 0.0f;
      }
    }
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
      if (steps) call.k_steps = ws.k_steps.data(), call.k_step_count = ws.k_steps.size();
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

}  // namespace pruned_conv_nhwc_rule

void add_pruned_conv_nhwc_rules(RuleTable& t) {
  using namespace pruned_conv_nhwc_rule;
  t[internal_rule_key("PrunedConvNhwc")] = TileRule{cuttable, needs, run_tile, prepare, prepared_bytes};
}

}  // namespace grove::tiling
