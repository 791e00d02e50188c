// Tile rules of the grove.internal ops of feature-map pruning (ops/pruning/feature_pruning.h).
//
// PrunedConv (2-D, group 1, float32, NCHW): cut by images (and rows for a single image). Per
// image, the tile copies the kept channels of its input rows (zero at pruned positions) and
// gathers those channels' weights, then runs the GEMM with K = kept channels x kernel taps:
// the pruned channels' work is skipped, not multiplied by zero. The weights are packed once at
// plan time in both GEMM forms (as A, and as W^T for few pixels); a kept channel's taps are one
// contiguous run of each packed row tile or column panel, so the gather is a copy of runs.
// Where a gathered weight would be used over too few pixels to pay for its copy, the tile runs
// every channel on the zeroed copy instead (run_tile says when).
//
// With positions pruned, only the output positions whose window centre is kept are computed
// (computed_outputs): their im2col columns are gathered into one dense GEMM and the results
// scattered back; the other outputs are 0.
//
// A tile waits for its image's keep row (the AttentionKeep tile, cut by images too), which is
// how the decision gates the consumer in the tile graph; without a keep input it waits for its
// images' whole maps and ranks them itself, as AttentionKeep would. ApplyKeep gives the map's
// other readers the zeroed map.
#include <algorithm>
#include <cstdint>
#include <memory>
#include <span>

#include "kernels/gemm.h"
#include "kernels/im2col.h"
#include "ops/conv/conv_gemm_forms.h"
#include "ops/conv/conv_geometry.h"
#include "ops/pruning/feature_pruning.h"
#include "ops/fused_epilogue.h"
#include "ops/op_util.h"
#include "ops/tile_util.h"

namespace grove::tiling {
namespace pruned_conv_rule {

bool claimed(const Node& node, std::span<const ValueInfo> in) {
  return in.size() >= 2 && in.size() <= kPrunedConvKeepInput + 1 && in[0].shape.size() == 4 && in[1].shape.size() == 4 &&
         node.attr_int("group", 1) == 1;
}

WindowGeometry geometry(const Node& node, const Shape& x, const Shape& w) {
  return window_geometry(node, std::span<const int64_t>(x.data() + 2, 2), {w[2], w[3]}, false);
}

std::vector<int64_t> cuttable(const Node& node, std::span<const ValueInfo> in, std::span<const ValueInfo> out) {
  std::vector<int64_t> blocks = none_cuttable(out[0].shape);
  if (!claimed(node, in)) return blocks;
  // Images, and rows only for a single image: each image's weights are gathered once per
  // tile, so a row cut across several images would gather them once per image and row block.
  // A channel cut would gather the input again.
  blocks[0] = 1;
  if (in[0].shape[0] == 1) blocks[2] = 1;
  return blocks;
}

void needs(const Node& node, std::span<const ValueInfo> in, std::span<const ValueInfo>, const Region& out_region,
           std::span<Region> in_regions) {
  for (size_t i = 0; i < in.size(); ++i) in_regions[i] = in[i].present ? full_region(in[i].shape) : Region{};
  if (!claimed(node, in)) return;
  const WindowGeometry g = geometry(node, in[0].shape, in[1].shape);
  in_regions[0][0] = out_region[0];
  if (has_input(in, kEpilogueResidualInput)) in_regions[kEpilogueResidualInput] = out_region;
  if (!pruned_conv_reads_keep(in)) return;  // the tile ranks its images' whole maps itself
  for (size_t d = 0; d < 2; ++d) in_regions[0][d + 2] = window_input_range(g, d, out_region[d + 2]);
  in_regions[kPrunedConvKeepInput][0] = out_region[0];
}

// The weights packed once both ways, as the Conv rule packs them: as A for W . im2col, and
// as B (W^T, output channels in the panels) for the transposed form.
struct PreparedWeights {
  kernels::PackedA a;
  kernels::PackedB b_t;
};

std::shared_ptr<const void> prepare(const Node& node, std::span<const ValueInfo> in,
                                    std::span<const Tensor* const> constants) {
  if (!claimed(node, in) || constants.size() < 2 || !constants[1]) return nullptr;
  const Shape& w = in[1].shape;
  const size_t m = static_cast<size_t>(w[0]), k = static_cast<size_t>(w[1] * w[2] * w[3]);
  const float* data = constants[1]->data<float>();
  return std::make_shared<PreparedWeights>(
      PreparedWeights{kernels::pack_a(data, m, k, k), kernels::pack_b(data, k, m, k, kernels::BLayout::n_by_k)});
}

int64_t prepared_bytes(const Node&, std::span<const ValueInfo>, const void* prepared) {
  const auto* p = static_cast<const PreparedWeights*>(prepared);
  return int64_t(p->a.bytes() + p->b_t.bytes());
}

struct Workspace {
  std::vector<int64_t> keep;        // the image's keep row, where the tile ranks x
  AttentionKeepScratch ranking;     // and the scores it ranks
  std::vector<float> x;             // the kept channels of one image, [kept][H][W]
  KeepFlags flags;                  // the image's kept channels and positions
  kernels::PackedA a;               // a block of the kept channels' weights, packed as A
  kernels::PackedB b_t;             // or as B of the transposed form
  std::vector<float> w;             // unpacked, when the weights are not constant
  kernels::PackedB b;               // the im2col block
  std::vector<float> rows, c_t, residual_t;  // the transposed form's im2col, C^T and residual^T
  std::vector<unsigned char> computed;       // positions pruned: per output position, 1 when computed
  std::vector<uint32_t> outputs;             // the tile's computed output positions
  std::vector<int64_t> corner;               // a panel's window corners: nr tops, nr lefts
  kernels::GemmScratch scratch;
};

// In the packed layouts a kept channel's taps are one run of steps: taps * lanes floats of
// each row tile (A) or column panel (B), copied from the tile or panel at `src` to `dst`.
void gather_runs(const float* src, float* dst, const int64_t* channels, size_t kept, size_t taps, size_t lanes) {
  for (size_t i = 0; i < kept; ++i) std::copy_n(src + size_t(channels[i]) * taps * lanes, taps * lanes, dst + i * taps * lanes);
}

// Rows [row0, row1) of A (row0 a multiple of mr) for the kept channels.
void gather_a(kernels::PackedA& out, const kernels::PackedA& full, const int64_t* channels, size_t kept, size_t taps,
              size_t row0, size_t row1) {
  const size_t mr = full.mr, tiles = (row1 - row0 + mr - 1) / mr, k = kept * taps;
  out.m = row1 - row0, out.k = k, out.mr = mr, out.isa = full.isa, out.precision = full.precision;
  out.tiles.reserve(tiles * k * mr);
  for (size_t t = 0; t < tiles; ++t) gather_runs(full.tile(row0 / mr + t), out.tiles.data() + t * k * mr, channels, kept, taps, mr);
}

// Columns [col0, col1) of B^T (col0 a multiple of nr) for the kept channels.
void gather_b(kernels::PackedB& out, const kernels::PackedB& full, const int64_t* channels, size_t kept, size_t taps,
              size_t col0, size_t col1) {
  const size_t nr = full.nr, panels = (col1 - col0 + nr - 1) / nr, k = kept * taps;
  out.k = k, out.n = col1 - col0, out.nr = nr, out.isa = full.isa, out.precision = full.precision;
  out.panels.reserve(panels * k * nr);
  for (size_t j = 0; j < panels; ++j) gather_runs(full.panel(col0 / nr + j), out.panels.data() + j * k * nr, channels, kept, taps, nr);
}

struct PrunedGemm {
  const kernels::Conv2dShape& shape;  // of the kept channels
  const float* x;                     // their planes
  const int64_t* channels;            // which they are; null: all, with zeros where pruned
  size_t kept, taps, m;               // m: output channels
  const float* bias;
  const float* residual;              // the image's residual planes, or null
  kernels::ActivationParams activation;
  float* y;                           // the image's output planes
};

// W . im2col, the weights gathered a block of rows at a time (as big as the GEMM's own
// cached block of A) and used at once, while still in cache.
void gemm_direct(const PrunedGemm& g, Workspace& ws, const PreparedWeights* prepared, const Tensor& w, size_t qa,
                 size_t pixels) {
  const size_t k = g.kept * g.taps, out_plane = g.shape.out_h * g.shape.out_w;
  kernels::pack_im2col(ws.b, g.x, g.shape, qa, pixels);
  const kernels::GemmBlocking blocking = kernels::gemm_blocking(kernels::active_isa());
  const size_t mr = prepared ? prepared->a.mr : 1;
  const size_t block = prepared && g.channels ? std::max(mr, blocking.mc * blocking.kc / std::max<size_t>(k, 1) / mr * mr) : g.m;
  if (!prepared) {  // weights computed at run time: gathered unpacked, packed by the GEMM
    const size_t full_k = static_cast<size_t>(w.dim(1)) * g.taps;
    ws.w.resize(g.m * k);
    for (size_t o = 0; o < g.m; ++o)
      for (size_t i = 0; i < g.kept; ++i)
        std::copy_n(w.data<float>() + o * full_k + size_t(g.channels[i]) * g.taps, g.taps, ws.w.data() + o * k + i * g.taps);
  }
  for (size_t row0 = 0; row0 < g.m; row0 += block) {
    const size_t row1 = std::min(g.m, row0 + block);
    kernels::GemmCall call;
    call.m = row1 - row0;
    call.a = ws.w.data() + row0 * k;
    call.a_stride = k;
    call.n = pixels;
    call.c = g.y + row0 * out_plane + qa;
    call.c_stride = out_plane;
    call.epilogue.row_bias = g.bias ? g.bias + row0 : nullptr;
    call.epilogue.residual = g.residual ? g.residual + row0 * out_plane + qa : nullptr;
    call.epilogue.residual_stride = out_plane;
    call.epilogue.activation = g.activation;
    if (!prepared) {
      kernels::gemm(call, ws.b, ws.scratch);
      continue;
    }
    if (!g.channels) {
      kernels::gemm(call, prepared->a, row0, ws.b);
      continue;
    }
    gather_a(ws.a, prepared->a, g.channels, g.kept, g.taps, row0, row1);
    kernels::gemm(call, ws.a, 0, ws.b);
  }
}

// C^T = im2col^T . W^T for few pixels: the output channels fill the panels. The weights are
// gathered a group of panels at a time, as above.
void gemm_transposed(const PrunedGemm& g, Workspace& ws, const PreparedWeights& prepared, size_t qa, size_t pixels) {
  const size_t k = g.kept * g.taps, out_plane = g.shape.out_h * g.shape.out_w, nr = prepared.b_t.nr;
  ws.rows.resize(k * pixels);
  kernels::im2col_matrix(ws.rows.data(), g.x, g.shape, qa, pixels);
  const kernels::GemmBlocking blocking = kernels::gemm_blocking(kernels::active_isa());
  const size_t block = g.channels ? std::max(nr, blocking.mc * blocking.kc / std::max<size_t>(k, 1) / nr * nr) : g.m;
  for (size_t col0 = 0; col0 < g.m; col0 += block) {
    const size_t col1 = std::min(g.m, col0 + block), cols = col1 - col0;
    if (g.channels) gather_b(ws.b_t, prepared.b_t, g.channels, g.kept, g.taps, col0, col1);
    ws.c_t.resize(pixels * cols);
    kernels::GemmCall call;
    call.m = pixels;
    call.a = ws.rows.data();
    call.a_stride = pixels;
    call.a_transposed = true;
    call.n0 = g.channels ? 0 : col0;
    call.n = cols;
    call.c = ws.c_t.data();
    call.c_stride = cols;
    call.epilogue.bias = g.bias ? g.bias + col0 : nullptr;
    call.epilogue.activation = g.activation;
    if (g.residual) {
      ws.residual_t.resize(pixels * cols);
      transpose_block(g.residual + col0 * out_plane + qa, out_plane, cols, pixels, ws.residual_t.data(), cols);
      call.epilogue.residual = ws.residual_t.data();
      call.epilogue.residual_stride = cols;
    }
    if (g.channels) kernels::gemm(call, ws.b_t, ws.scratch);
    else kernels::gemm(call, prepared.b_t, ws.scratch);
    transpose_block(ws.c_t.data(), cols, pixels, cols, g.y + col0 * out_plane + qa, out_plane);
  }
}

// Positions pruned: the outputs `computed` names (indices into the plane) are computed, as one
// GEMM over their im2col columns gathered, and written back; the caller zeroes the others. A
// window's taps are read from the zeroed copy of the kept channels, as the dense path does.
void gemm_kept_outputs(const PrunedGemm& g, Workspace& ws, const PreparedWeights* prepared, const Tensor& w,
                       std::span<const uint32_t> computed) {
  const kernels::Conv2dShape& s = g.shape;
  const size_t k = g.kept * g.taps, out_plane = s.out_h * s.out_w, in_plane = s.in_h * s.in_w, p = computed.size();
  // im2col columns of the computed outputs, written straight into B's panels of nr columns
  // (the last one zero-padded): each output's window corner once, then a tap adds its offset.
  const kernels::Isa isa = kernels::active_isa();
  const size_t nr = kernels::gemm_blocking(isa).nr, panels = (p + nr - 1) / nr;
  ws.b.k = k, ws.b.n = p, ws.b.nr = nr, ws.b.isa = isa, ws.b.precision = kernels::Precision::f32;
  ws.b.panels.reserve(panels * k * nr);
  ws.corner.resize(2 * nr);
  for (size_t panel = 0; panel < panels; ++panel) {
    const size_t first = panel * nr, cols = std::min(nr, p - first);
    int64_t* top = ws.corner.data();
    int64_t* left = ws.corner.data() + nr;
    for (size_t j = 0; j < cols; ++j) {
      top[j] = int64_t(computed[first + j] / s.out_w * s.stride_h) - int64_t(s.pad_top);
      left[j] = int64_t(computed[first + j] % s.out_w * s.stride_w) - int64_t(s.pad_left);
    }
    float* dst = ws.b.panels.data() + panel * k * nr;
    for (size_t c = 0; c < g.kept; ++c) {
      const float* plane = g.x + c * in_plane;
      for (size_t kh = 0; kh < s.kernel_h; ++kh)
        for (size_t kw = 0; kw < s.kernel_w; ++kw, dst += nr) {
          const int64_t dh = int64_t(kh * s.dilation_h), dw = int64_t(kw * s.dilation_w);
          for (size_t j = 0; j < cols; ++j) {
            const int64_t ih = top[j] + dh, iw = left[j] + dw;
            dst[j] = uint64_t(ih) < s.in_h && uint64_t(iw) < s.in_w ? plane[ih * int64_t(s.in_w) + iw] : 0.0f;
          }
          std::fill(dst + cols, dst + nr, 0.0f);
        }
    }
  }
  ws.c_t.resize(g.m * p);
  kernels::GemmCall call;
  call.m = g.m;
  call.n = p;
  call.c = ws.c_t.data();
  call.c_stride = p;
  call.epilogue.row_bias = g.bias;
  call.epilogue.activation = g.activation;
  if (g.residual) {
    ws.residual_t.resize(g.m * p);
    for (size_t o = 0; o < g.m; ++o)
      for (size_t j = 0; j < p; ++j) ws.residual_t[o * p + j] = g.residual[o * out_plane + computed[j]];
    call.epilogue.residual = ws.residual_t.data();
    call.epilogue.residual_stride = p;
  }
  if (!prepared) {  // weights computed at run time: gathered unpacked, packed by the GEMM
    const size_t full_k = static_cast<size_t>(w.dim(1)) * g.taps;
    ws.w.resize(g.m * k);
    for (size_t o = 0; o < g.m; ++o)
      for (size_t i = 0; i < g.kept; ++i)
        std::copy_n(w.data<float>() + o * full_k + size_t(g.channels ? g.channels[i] : int64_t(i)) * g.taps, g.taps,
                    ws.w.data() + o * k + i * g.taps);
    call.a = ws.w.data();
    call.a_stride = k;
    kernels::gemm(call, ws.b, ws.scratch);
  } else if (g.channels) {
    gather_a(ws.a, prepared->a, g.channels, g.kept, g.taps, 0, g.m);
    kernels::gemm(call, ws.a, 0, ws.b);
  } else {
    kernels::gemm(call, prepared->a, 0, ws.b);
  }
  for (size_t o = 0; o < g.m; ++o)
    for (size_t j = 0; j < p; ++j) g.y[o * out_plane + computed[j]] = ws.c_t[o * p + j];
}

void run_tile(const Node& node, std::span<const Tensor* const> in, std::span<Tensor* const> out, const Region& r,
              const void* prepared, TileScratch& scratch) {
  std::vector<ValueInfo> infos = infos_of_tensors(in);
  if (!claimed(node, infos) || in[0]->dtype() != DType::f32) return reference_whole(node, in, out, r);
  check_region(node, r, out[0]->shape());
  for (const Range& d : r)
    if (d.size() <= 0) return;
  if (r[1].begin != 0 || r[1].end != out[0]->dim(1) || r[3].begin != 0 || r[3].end != out[0]->dim(3))
    return reference_whole(node, in, out, r);
  Workspace& ws = scratch.get<Workspace>();
  const Tensor &x = *in[0], &w = *in[1];
  const Tensor* keep = pruned_conv_reads_keep(infos) ? in[kPrunedConvKeepInput] : nullptr;
  const Tensor* bias = optional_input(in, kEpilogueBiasInput);
  const Tensor* residual = optional_input(in, kEpilogueResidualInput);
  const WindowGeometry g = geometry(node, x.shape(), w.shape());
  const int64_t kc = node.attr_int(kAttrKeepChannels, 0), kp = node.attr_int(kAttrKeepPositions, 0);
  const int64_t channels = x.dim(1), in_plane = x.dim(2) * x.dim(3), width = x.dim(3);
  const kernels::Conv2dShape shape = conv2d_shape_2d(g, kc);
  const size_t taps = shape.kernel_h * shape.kernel_w, k = static_cast<size_t>(kc) * taps;
  const size_t out_plane = shape.out_h * shape.out_w, m = static_cast<size_t>(w.dim(0));
  const size_t q0 = static_cast<size_t>(r[2].begin) * shape.out_w, q1 = static_cast<size_t>(r[2].end) * shape.out_w;
  const size_t nr = kernels::gemm_blocking(kernels::active_isa()).nr;
  const size_t chunk = pixels_per_gemm_call(k, nr);
  const Range rows = window_input_range(g, 0, r[2]);
  const auto* packed = static_cast<const PreparedWeights*>(prepared);
  // Skipping a pruned channel saves 2 x pixels FLOPs per weight, and gathering costs a copy
  // of each kept weight. The GEMM's register tile does about 2 mr nr / (mr + nr) FLOPs per
  // float it loads, so below that many saved FLOPs per gathered weight the tile runs every
  // channel on the zeroed map instead (the deep layers' few pixels per image).
  const kernels::GemmBlocking blocking = kernels::gemm_blocking(kernels::active_isa());
  const double flops_per_load = 2.0 * double(blocking.mr * blocking.nr) / double(blocking.mr + blocking.nr);
  // With positions pruned, the pixels a tile computes are about kp / units of its own.
  const int64_t units = keep_units(x.dim(2), width, keep_block(node));
  const bool skip_positions = kp < units;
  const double pixels = skip_positions ? double(q1 - q0) * double(kp) / double(units) : double(q1 - q0);
  const bool gather = !packed || 2.0 * pixels * double(channels - kc) >= flops_per_load * double(kc);
  for (int64_t n = r[0].begin; n < r[0].end; ++n) {
    const int64_t* kept = pruned_conv_keep_row(node, x, keep, n, false, ws.keep, ws.ranking);
    keep_flags(node, kept, kc, kp, channels, x.dim(2), width, ws.flags);
    const int64_t planes = gather ? kc : channels;
    ws.x.resize(static_cast<size_t>(planes * in_plane));
    if (!gather) std::fill(ws.x.begin(), ws.x.end(), 0.0f);
    for (int64_t i = 0; i < kc; ++i) {
      const float* src = x.data<float>() + (n * channels + kept[i]) * in_plane;
      float* dst = ws.x.data() + (gather ? i : kept[i]) * in_plane;
      for (int64_t p = rows.begin * width; p < rows.end * width; ++p) dst[p] = ws.flags.kept_position[size_t(p)] ? src[p] : 0.0f;
    }
    const size_t image = static_cast<size_t>(n) * m * out_plane;
    const kernels::Conv2dShape used = gather ? shape : conv2d_shape_2d(g, channels);
    const PrunedGemm job{used, ws.x.data(), gather ? kept : nullptr, static_cast<size_t>(planes), taps, m,
                         bias ? bias->data<float>() : nullptr, residual ? residual->data<float>() + image : nullptr,
                         epilogue_activation(node), out[0]->data<float>() + image};
    if (skip_positions) {
      ws.computed.resize(out_plane);
      computed_outputs(used, ws.flags.kept_position.data(), ws.computed.data());
      ws.outputs.clear();
      for (size_t q = q0; q < q1; ++q)
        if (ws.computed[q]) ws.outputs.push_back(static_cast<uint32_t>(q));
      for (size_t o = 0; o < m; ++o) std::fill(job.y + o * out_plane + q0, job.y + o * out_plane + q1, 0.0f);
      for (size_t at = 0; at < ws.outputs.size(); at += chunk)
        gemm_kept_outputs(job, ws, packed, w, std::span<const uint32_t>(ws.outputs).subspan(at, std::min(chunk, ws.outputs.size() - at)));
      continue;
    }
    for (size_t qa = q0; qa < q1; qa += chunk) {
      const size_t pixels = std::min(chunk, q1 - qa);
      if (packed && transposed_is_better(pixels, m, nr)) gemm_transposed(job, ws, *packed, qa, pixels);
      else gemm_direct(job, ws, packed, w, qa, pixels);
    }
  }
}

// AttentionKeep and AttentionKeepNhwc: one tile per image or block of images, so an image's
// consumer tiles wait for that image's decision only.
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
  const bool nhwc = node.op_type == "AttentionKeepNhwc";  // x [N, H, W, C]
  const int64_t channels = nhwc ? x.dim(3) : x.dim(1), height = nhwc ? x.dim(1) : x.dim(2);
  const int64_t width = nhwc ? x.dim(2) : x.dim(3), plane = height * width, block = keep_block(node);
  const auto keep_row = nhwc ? &attention_keep_nhwc : &attention_keep;
  for (int64_t n = r[0].begin; n < r[0].end; ++n)
    keep_row(x.data<float>() + n * channels * plane, channels, height, width, kc, kp,
             out[0]->data<int64_t>() + n * (kc + kp), scratch.get<AttentionKeepScratch>(), block);
}

// ApplyKeep and ApplyKeepNhwc: cut by images and by the second dim (channels NCHW, rows
// channels-last); a tile copies its kept channels at kept positions and zeroes the rest.
std::vector<int64_t> mask_cuttable(const Node&, std::span<const ValueInfo> in, std::span<const ValueInfo> out) {
  std::vector<int64_t> blocks = none_cuttable(out[0].shape);
  if (in.size() == 2 && in[0].shape.size() == 4 && in[0].dtype == DType::f32) blocks[0] = blocks[1] = 1;
  return blocks;
}

void mask_needs(const Node&, std::span<const ValueInfo> in, std::span<const ValueInfo>, const Region& out_region,
                std::span<Region> in_regions) {
  in_regions[0] = out_region;
  in_regions[1] = full_region(in[1].shape);
  in_regions[1][0] = out_region[0];
}

void mask_run(const Node& node, std::span<const Tensor* const> in, std::span<Tensor* const> out, const Region& r,
              const void*, TileScratch& scratch) {
  const Tensor &x = *in[0], &keep = *in[1];
  if (x.rank() != 4 || x.dtype() != DType::f32) return reference_whole(node, in, out, r);
  check_region(node, r, out[0]->shape());
  const int64_t kc = node.attr_int(kAttrKeepChannels, 0), kp = node.attr_int(kAttrKeepPositions, 0);
  const bool nhwc = node.op_type == "ApplyKeepNhwc";  // x and y [N, H, W, C]
  const int64_t channels = nhwc ? x.dim(3) : x.dim(1), height = nhwc ? x.dim(1) : x.dim(2);
  const int64_t width = nhwc ? x.dim(2) : x.dim(3), plane = height * width;
  KeepFlags& flags = scratch.get<KeepFlags>();
  const std::vector<unsigned char>& kept_channel = flags.kept_channel;
  const std::vector<unsigned char>& kept_position = flags.kept_position;
  for (int64_t n = r[0].begin; n < r[0].end; ++n) {
    keep_flags(node, keep.data<int64_t>() + n * (kc + kp), kc, kp, channels, height, width, flags);
    const float* src = x.data<float>() + n * channels * plane;
    float* dst = out[0]->data<float>() + n * channels * plane;
    if (nhwc) {  // the tile's rows: a kept position's channels, or zeros
      for (int64_t p = r[1].begin * x.dim(2); p < r[1].end * x.dim(2); ++p)
        for (int64_t c = 0; c < channels; ++c)
          dst[p * channels + c] = kept_position[size_t(p)] && kept_channel[size_t(c)] ? src[p * channels + c] : 0.0f;
      continue;
    }
    for (int64_t c = r[1].begin; c < r[1].end; ++c) {  // the tile's channels: a kept plane, or zeros
      if (!kept_channel[size_t(c)]) {
        std::fill_n(dst + c * plane, plane, 0.0f);
        continue;
      }
      for (int64_t p = 0; p < plane; ++p) dst[c * plane + p] = kept_position[size_t(p)] ? src[c * plane + p] : 0.0f;
    }
  }
}

}  // namespace pruned_conv_rule

void add_pruned_conv_rules(RuleTable& t) {
  using namespace pruned_conv_rule;
  t[internal_rule_key("ApplyKeep")] = TileRule{mask_cuttable, mask_needs, mask_run};
  t[internal_rule_key("ApplyKeepNhwc")] = TileRule{mask_cuttable, mask_needs, mask_run};
  t[internal_rule_key("PrunedConv")] = TileRule{cuttable, needs, run_tile, prepare, prepared_bytes};
  t[internal_rule_key("AttentionKeep")] = TileRule{keep_cuttable, keep_needs, keep_run};
  t[internal_rule_key("AttentionKeepNhwc")] = TileRule{keep_cuttable, keep_needs, keep_run};  // the same cut: images
}

}  // namespace grove::tiling
