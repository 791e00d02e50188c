// Tile rule of grove.internal PrunedConv (2-D, group 1, float32, NCHW): cut by images and
// output rows. Per image, the tile gathers the kept channels of its input rows (zero at pruned
// positions) and the weight columns of those channels, and runs the GEMM with K = kept
// channels x kernel taps instead of all channels: the pruned channels' work is skipped, not
// multiplied by zero. The weights are packed once at plan time as the GEMM's A; a kept
// channel's taps are one contiguous run of each packed row tile, so the gather is a copy of
// runs. A tile waits for its image's keep row (the AttentionKeep tile, cut by images too),
// which is how the decision gates the consumer in the tile graph.
#include <algorithm>
#include <memory>

#include "kernels/gemm.h"
#include "kernels/im2col.h"
#include "ops/conv_geometry.h"
#include "ops/feature_pruning.h"
#include "ops/fused_epilogue.h"
#include "ops/op_util.h"
#include "ops/tile_util.h"

namespace grove::tiling {
namespace {

bool claimed(const Node& node, std::span<const ValueInfo> in) {
  return in.size() == kPrunedConvKeepInput + 1 && in[0].shape.size() == 4 && in[1].shape.size() == 4 &&
         node.attr_int("group", 1) == 1;
}

WindowGeometry geometry(const Node& node, const Shape& x, const Shape& w) {
  return window_geometry(node, std::span<const int64_t>(x.data() + 2, 2), {w[2], w[3]}, false);
}

kernels::Conv2dShape conv2d_shape(const WindowGeometry& g, int64_t channels) {
  auto u = [](int64_t v) { return static_cast<size_t>(v); };
  return {.channels = u(channels), .in_h = u(g.input[0]), .in_w = u(g.input[1]), .out_h = u(g.output[0]),
          .out_w = u(g.output[1]), .kernel_h = u(g.kernel[0]), .kernel_w = u(g.kernel[1]),
          .stride_h = u(g.strides[0]), .stride_w = u(g.strides[1]), .dilation_h = u(g.dilations[0]),
          .dilation_w = u(g.dilations[1]), .pad_top = u(g.pads_begin[0]), .pad_left = u(g.pads_begin[1])};
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
  for (size_t d = 0; d < 2; ++d) in_regions[0][d + 2] = window_input_range(g, d, out_region[d + 2]);
  if (has_input(in, kEpilogueResidualInput)) in_regions[kEpilogueResidualInput] = out_region;
  in_regions[kPrunedConvKeepInput][0] = out_region[0];
}

std::shared_ptr<const void> prepare(const Node& node, std::span<const ValueInfo> in,
                                    std::span<const Tensor* const> constants) {
  if (!claimed(node, in) || constants.size() < 2 || !constants[1]) return nullptr;
  const Shape& w = in[1].shape;
  const size_t k = static_cast<size_t>(w[1] * w[2] * w[3]);
  return std::make_shared<kernels::PackedA>(
      kernels::pack_a(constants[1]->data<float>(), static_cast<size_t>(w[0]), k, k));
}

int64_t prepared_bytes(const Node&, std::span<const ValueInfo>, const void* prepared) {
  return int64_t(static_cast<const kernels::PackedA*>(prepared)->bytes());
}

struct Workspace {
  std::vector<float> x;             // the kept channels of one image, [kept][H][W]
  std::vector<unsigned char> kept;  // per position of the plane: 1 when kept
  kernels::PackedA a;               // the kept channels' weights, packed
  std::vector<float> w;             // the same unpacked, when the weights are not constant
  kernels::PackedB b;
  kernels::GemmScratch scratch;
};

// Rows of A for the kept channels only: from the packed weights by runs, else from W.
void gather_weights(Workspace& ws, const Tensor& w, const kernels::PackedA* packed, const int64_t* channels,
                    size_t kept, size_t taps) {
  const size_t m = static_cast<size_t>(w.dim(0)), k = kept * taps;
  if (!packed) {
    const size_t full_k = static_cast<size_t>(w.dim(1)) * taps;
    ws.w.resize(m * k);
    for (size_t o = 0; o < m; ++o)
      for (size_t i = 0; i < kept; ++i)
        std::copy_n(w.data<float>() + o * full_k + size_t(channels[i]) * taps, taps, ws.w.data() + o * k + i * taps);
    return;
  }
  const size_t mr = packed->mr, row_tiles = (m + mr - 1) / mr;
  ws.a.m = m, ws.a.k = k, ws.a.mr = mr, ws.a.isa = packed->isa, ws.a.precision = packed->precision;
  ws.a.tiles.reserve(row_tiles * k * mr);
  for (size_t t = 0; t < row_tiles; ++t) {
    const float* src = packed->tile(t);
    float* dst = ws.a.tiles.data() + t * k * mr;
    for (size_t i = 0; i < kept; ++i) std::copy_n(src + size_t(channels[i]) * taps * mr, taps * mr, dst + i * taps * mr);
  }
}

// Pixels per GEMM call, as the Conv rule chooses them: the packed im2col block stays in L2.
constexpr size_t kPackedFloats = 96 * 1024;
constexpr size_t kMinPixels = 256;

void run_tile(const Node& node, std::span<const Tensor* const> in, std::span<Tensor* const> out, const Region& r,
              const void* prepared) {
  std::vector<ValueInfo> infos = infos_of_tensors(in);
  if (!claimed(node, infos) || in[0]->dtype() != DType::f32) return reference_whole(node, in, out, r);
  check_region(node, r, out[0]->shape());
  for (const Range& d : r)
    if (d.size() <= 0) return;
  if (r[1].begin != 0 || r[1].end != out[0]->dim(1) || r[3].begin != 0 || r[3].end != out[0]->dim(3))
    return reference_whole(node, in, out, r);
  thread_local Workspace ws;
  const Tensor &x = *in[0], &w = *in[1], &keep = *in[kPrunedConvKeepInput];
  const Tensor* bias = optional_input(in, kEpilogueBiasInput);
  const Tensor* residual = optional_input(in, kEpilogueResidualInput);
  const WindowGeometry g = geometry(node, x.shape(), w.shape());
  const int64_t kc = node.attr_int(kAttrKeepChannels, 0), kp = node.attr_int(kAttrKeepPositions, 0);
  const int64_t channels = x.dim(1), in_plane = x.dim(2) * x.dim(3), width = x.dim(3);
  const kernels::Conv2dShape shape = conv2d_shape(g, kc);
  const size_t taps = shape.kernel_h * shape.kernel_w, k = static_cast<size_t>(kc) * taps;
  const size_t out_plane = shape.out_h * shape.out_w, m = static_cast<size_t>(w.dim(0));
  const size_t q0 = static_cast<size_t>(r[2].begin) * shape.out_w, q1 = static_cast<size_t>(r[2].end) * shape.out_w;
  const size_t nr = kernels::gemm_blocking(kernels::active_isa()).nr;
  const size_t chunk = std::max(kMinPixels, kPackedFloats / std::max<size_t>(k, 1) / nr * nr);
  const Range rows = window_input_range(g, 0, r[2]);
  const auto* packed = static_cast<const kernels::PackedA*>(prepared);
  for (int64_t n = r[0].begin; n < r[0].end; ++n) {
    const int64_t* kept = keep.data<int64_t>() + n * (kc + kp);
    for (int64_t i = 0; i < kc + kp; ++i)
      if (kept[i] < 0 || kept[i] >= (i < kc ? channels : in_plane)) throw Error(node.describe() + ": keep index out of range");
    ws.kept.assign(static_cast<size_t>(in_plane), 0);
    for (int64_t i = kc; i < kc + kp; ++i) ws.kept[size_t(kept[i])] = 1;
    ws.x.resize(static_cast<size_t>(kc * in_plane));
    for (int64_t i = 0; i < kc; ++i) {
      const float* src = x.data<float>() + (n * channels + kept[i]) * in_plane;
      float* dst = ws.x.data() + i * in_plane;
      for (int64_t p = rows.begin * width; p < rows.end * width; ++p) dst[p] = ws.kept[size_t(p)] ? src[p] : 0.0f;
    }
    gather_weights(ws, w, packed, kept, static_cast<size_t>(kc), taps);
    for (size_t qa = q0; qa < q1; qa += chunk) {
      const size_t pixels = std::min(chunk, q1 - qa);
      kernels::pack_im2col(ws.b, ws.x.data(), shape, qa, pixels);
      kernels::GemmCall call;
      call.m = m;
      call.a = ws.w.data();
      call.a_stride = k;
      call.n = pixels;
      const size_t at = static_cast<size_t>(n) * m * out_plane + qa;
      call.c = out[0]->data<float>() + at;
      call.c_stride = out_plane;
      call.epilogue.row_bias = bias ? bias->data<float>() : nullptr;
      call.epilogue.residual = residual ? residual->data<float>() + at : nullptr;
      call.epilogue.residual_stride = out_plane;
      call.epilogue.activation = epilogue_activation(node);
      if (packed) kernels::gemm(call, ws.a, 0, ws.b);
      else kernels::gemm(call, ws.b, ws.scratch);
    }
  }
}

// AttentionKeep: one tile per image or block of images, so an image's consumer tiles wait
// for that image's decision only.
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
              const void*) {
  const Tensor& x = *in[0];
  if (x.rank() != 4 || x.dtype() != DType::f32) return reference_whole(node, in, out, r);
  check_region(node, r, out[0]->shape());
  const int64_t kc = node.attr_int(kAttrKeepChannels, 0), kp = node.attr_int(kAttrKeepPositions, 0);
  const int64_t plane = x.dim(2) * x.dim(3);
  for (int64_t n = r[0].begin; n < r[0].end; ++n)
    attention_keep(x.data<float>() + n * x.dim(1) * plane, x.dim(1), plane, kc, kp, out[0]->data<int64_t>() + n * (kc + kp));
}

}  // namespace

void add_pruned_conv_rules(RuleTable& t) {
  t[internal_rule_key("PrunedConv")] = TileRule{cuttable, needs, run_tile, prepare, prepared_bytes};
  t[internal_rule_key("AttentionKeep")] = TileRule{keep_cuttable, keep_needs, keep_run};
}

}  // namespace grove::tiling
