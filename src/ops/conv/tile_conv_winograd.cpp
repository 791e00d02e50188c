#include "ops/conv/tile_conv_winograd.h"

#include "graph/node_decisions.h"
#include "grove/error.h"
#include "kernels/cpu_info.h"
#include "kernels/winograd_f2x3_nhwc.h"
#include "kernels/winograd_f4x3.h"
#include "kernels/winograd_f4x3_nhwc.h"

namespace grove::tiling {

namespace conv_winograd_rule {

// Measured (docs/kernels.md, "Winograd"): alone, 8 -> 8 channels at 56 x 56 is still 1.6x
// faster than im2col, and a plane down to 14 x 14 wins. Inside a model it depends on the cut:
// a batch-1 plane gives ceil(Ho/4) x (ceil(Wo/4) + 1) GEMM columns (56 x 56: 210, 28 x 28:
// 56, 14 x 14: 20), and row tiles split them further. Traced in ResNet-50 at 2 threads with
// row tiles (GFLOP/s of direct-conv FLOPs per busy core, Winograd vs im2col): 56 x 56 117 vs
// 80, 28 x 28 58 vs 65, 14 x 14 31 vs 68. So planes of >= 128 columns are cut by rows; planes
// of 48-127 columns (28 x 28) are cut by images or output channels and keep all their columns
// (ResNet-50's 28 x 28 layers 2.9 -> 2.0 ms busy per run); smaller ones stay on im2col (14 x
// 14 with a channel cut: 2.8 -> 3.0 ms).
// Channels-last: the NHWC Winograd's GEMMs take every tile of the plane as their
// rows, and 13 x 13 and 14 x 14 planes (20 columns) win there (docs/layout.md has the
// measurements); smaller ones do not reach a full row tile of the microkernel. On such a
// plane a weight serves few blocks, and the transformed weights, four times the conv's, are
// streamed for little work: beyond half the last-level cache they come from memory on every
// run. Those layers stay on the row GEMM, which also bounds the memory the choice adds
// (YOLOv3's 13 x 13 layers of 512 -> 1024 channels would add 380 MiB).
// A channel tile transforms the whole input again; a row tile reads all the transformed
// weights again (36 x Cin x Cout) where a channel tile reads its own slice. The first repeat
// grows with Cin x columns, the second with Cin x Cout, so Cout per column decides. Traced at
// batch 1, 2 threads, 2 tiles (AMD EPYC Zen 5; span of the layer, channel cut -> row cut):
// 14x14 planes (20 columns) of 64 channels 55 -> 40 us, 128: 130 -> 105, 192: 260 -> 215-260,
// 256 (ResNet-18's layer3) 480 -> 655; 28x28 (56 columns) of 128 (ResNet-18's layer2) 365 ->
// 320, 256: 1260 -> 1210, 384: 2800 -> 2830. Rows win up to about 6.4 channels per column,
// are level to 9.6 and lose at 12.8.
constexpr int64_t kRowCutChannelsPerColumn = 8;
constexpr size_t kMinChannels = 8;
constexpr size_t kMinGemmColumns = 48;
constexpr size_t kMinChannelsLastGemmColumns = 16;
constexpr size_t kRowCutGemmColumns = 128;
// The budget where the cache size is unknown.
constexpr int64_t kDefaultSmallPlaneWeightBytes = int64_t{16} << 20;

int64_t small_plane_weight_budget() {
  const int64_t l3 = kernels::cpu_info().l3_bytes;
  return l3 > 0 ? l3 / 2 : kDefaultSmallPlaneWeightBytes;
}

size_t gemm_columns(const kernels::Conv2dShape& s) { return (s.out_h + 3) / 4 * ((s.out_w + 3) / 4 + 1); }

// A worker's buffers: the transforms' working memory, weights transformed for an unprepared call.
struct WinogradTileScratch {
  kernels::WinogradF4x3Scratch transforms;
  kernels::WinogradF4x3Weights unprepared;
};

// The channels-last forms' weights: one of the two, as `block` says.
struct WinogradNhwcPrepared {
  int64_t block = 4;
  kernels::WinogradF4x3NhwcWeights f4x3;
  kernels::WinogradF2x3NhwcWeights f2x3;

  void pack(const Tensor& w, int64_t form) {
    block = form;
    const size_t cout = size_t(w.shape()[0]), cin = size_t(w.shape()[1]);
    if (block == 2) kernels::winograd_f2x3_nhwc_pack_weights(f2x3, w.data<float>(), cout, cin);
    else kernels::winograd_f4x3_nhwc_pack_weights(f4x3, w.data<float>(), cout, cin);
  }
  size_t bytes() const { return block == 2 ? f2x3.bytes() : f4x3.bytes(); }
};

// A worker's buffers for the channels-last forms.
struct WinogradNhwcTileScratch {
  kernels::WinogradNhwcScratch transforms;
  WinogradNhwcPrepared unprepared;
};

}  // namespace conv_winograd_rule

bool winograd_fits(const kernels::Conv2dShape& s, int64_t group, int64_t out_channels) {
  using namespace conv_winograd_rule;
  return group == 1 && s.kernel_h == 3 && s.kernel_w == 3 && s.stride_h == 1 && s.stride_w == 1 && s.dilation_h == 1 &&
         s.dilation_w == 1 && s.channels >= kMinChannels && size_t(out_channels) >= kMinChannels;
}

bool winograd_by_rule(const kernels::Conv2dShape& s, int64_t group, int64_t out_channels) {
  using namespace conv_winograd_rule;
  return winograd_fits(s, group, out_channels) && gemm_columns(s) >= kMinGemmColumns;
}

int64_t winograd_transformed_weight_bytes(const kernels::Conv2dShape& s, int64_t out_channels) {
  using namespace conv_winograd_rule;
  return 36 * static_cast<int64_t>(s.channels) * out_channels * static_cast<int64_t>(sizeof(float));
}

bool winograd_channels_last_by_rule(const kernels::Conv2dShape& s, int64_t group, int64_t out_channels) {
  using namespace conv_winograd_rule;
  if (!winograd_fits(s, group, out_channels) || gemm_columns(s) < kMinChannelsLastGemmColumns) return false;
  return gemm_columns(s) >= kMinGemmColumns ||
         winograd_transformed_weight_bytes(s, out_channels) <= small_plane_weight_budget();
}

bool winograd_cut_rows(const kernels::Conv2dShape& s) {
  using namespace conv_winograd_rule;
  return gemm_columns(s) >= kRowCutGemmColumns;
}

bool winograd_nhwc_cut_rows(const kernels::Conv2dShape& s, int64_t out_channels, int64_t images) {
  using namespace conv_winograd_rule;
  if (winograd_cut_rows(s)) return true;
  return images == 1 && out_channels <= kRowCutChannelsPerColumn * static_cast<int64_t>(gemm_columns(s));
}

std::shared_ptr<const void> winograd_prepare(const Tensor& w) {
  using namespace conv_winograd_rule;
  auto packed = std::make_shared<kernels::WinogradF4x3Weights>();
  kernels::winograd_f4x3_pack_weights(*packed, w.data<float>(), size_t(w.shape()[0]), size_t(w.shape()[1]));
  return packed;
}

int64_t winograd_prepared_bytes(const void* prepared) {
  using namespace conv_winograd_rule;
  return int64_t(static_cast<const kernels::WinogradF4x3Weights*>(prepared)->bytes());
}

void winograd_conv_tile(const kernels::Conv2dShape& shape, const Tensor& x, const Tensor& w, Tensor& y,
                        const Region& r, const kernels::Epilogue& epilogue, const void* prepared, TileScratch& tile_scratch) {
  using namespace conv_winograd_rule;
  WinogradTileScratch& ws = tile_scratch.get<WinogradTileScratch>();
  kernels::WinogradF4x3Scratch& scratch = ws.transforms;
  kernels::WinogradF4x3Weights& unprepared = ws.unprepared;
  const auto* weights = static_cast<const kernels::WinogradF4x3Weights*>(prepared);
  if (!weights) {
    kernels::winograd_f4x3_pack_weights(unprepared, w.data<float>(), size_t(w.shape()[0]), size_t(w.shape()[1]));
    weights = &unprepared;
  }
  const size_t cin = size_t(x.shape()[1]), cout = size_t(y.shape()[1]);
  const size_t in_plane = shape.in_h * shape.in_w, out_plane = shape.out_h * shape.out_w;
  for (int64_t n = r[0].begin; n < r[0].end; ++n) {
    kernels::WinogradF4x3Call call;
    call.x = x.data<float>() + size_t(n) * cin * in_plane;
    call.y = y.data<float>() + size_t(n) * cout * out_plane;
    call.oc_begin = size_t(r[1].begin);
    call.oc_end = size_t(r[1].end);
    call.row_begin = size_t(r[2].begin);
    call.row_end = size_t(r[2].end);
    call.shape = shape;
    call.epilogue = epilogue;
    if (epilogue.residual) call.epilogue.residual = epilogue.residual + size_t(n) * cout * out_plane;
    kernels::winograd_f4x3_conv(call, *weights, scratch);
  }
}

std::shared_ptr<const void> winograd_nhwc_prepare(const Tensor& w, int64_t block) {
  using namespace conv_winograd_rule;
  auto packed = std::make_shared<WinogradNhwcPrepared>();
  packed->pack(w, block);
  return packed;
}

int64_t winograd_nhwc_prepared_bytes(const void* prepared) {
  using namespace conv_winograd_rule;
  return int64_t(static_cast<const WinogradNhwcPrepared*>(prepared)->bytes());
}

int64_t winograd_nhwc_block(const Node& node) {
  const ConvPrimitive p = conv_primitive_choice(node);
  if (p == ConvPrimitive::winograd || p == ConvPrimitive::winograd_nhwc) return kWinogradRows;
  return p == ConvPrimitive::winograd_f2x3_nhwc ? 2 : 0;
}

void winograd_nhwc_conv_tile(int64_t block, const kernels::Conv2dShape& shape, const Tensor& x, const Tensor& w,
                             Tensor& y, int64_t y_channel, const Region& r, const kernels::Epilogue& epilogue,
                             const void* prepared, TileScratch& tile_scratch, const WinogradNhwcKeep& keep) {
  using namespace conv_winograd_rule;
  WinogradNhwcTileScratch& ws = tile_scratch.get<WinogradNhwcTileScratch>();
  const auto* weights = static_cast<const WinogradNhwcPrepared*>(prepared);
  if (!weights) {
    ws.unprepared.pack(w, block);
    weights = &ws.unprepared;
  }
  if (weights->block != block) throw Error("Winograd: weights prepared for another block size");
  const size_t in_image = shape.in_h * shape.in_w * shape.channels;
  const size_t y_image = shape.out_h * shape.out_w * size_t(y.shape()[3]);
  const size_t out_image = shape.out_h * shape.out_w * size_t(w.shape()[0]);  // the residual's
  for (int64_t n = r[0].begin; n < r[0].end; ++n) {
    kernels::WinogradNhwcCall call;
    call.x = x.data<float>() + size_t(n) * in_image;
    call.y = y.data<float>() + size_t(n) * y_image + size_t(y_channel);
    call.y_stride = size_t(y.shape()[3]);
    call.row_begin = size_t(r[1].begin);
    call.row_end = size_t(r[1].end);
    call.oc_begin = size_t(r[3].begin);
    call.oc_end = size_t(r[3].end);
    call.shape = shape;
    call.epilogue = epilogue;
    if (epilogue.residual) call.epilogue.residual = epilogue.residual + size_t(n) * out_image;
    call.kept_channels = keep.channels, call.kept = keep.kept;
    call.kept_positions = keep.positions, call.computed = keep.computed;
    if (block == 2) kernels::winograd_f2x3_nhwc_conv(call, weights->f2x3, ws.transforms);
    else kernels::winograd_f4x3_nhwc_conv(call, weights->f4x3, ws.transforms);
  }
}

}  // namespace grove::tiling
