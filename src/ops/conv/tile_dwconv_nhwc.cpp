// Tile rule of grove.internal DepthwiseConvNhwc (channels_last.cpp): the float32 depthwise Conv
// (group = input channels = output channels) with x as [N, H, W, C] and y as [N, OH, OW, C],
// on kernels/dwconv_nhwc.h. Tiles cut images, output rows and channels (in whole vectors of
// the kernel, so no tile runs the one-float tail loop that the layer itself does not); a tile
// reads the input rows its windows cover and only its own channels. The taps are repacked
// once at plan time as [kh * kw][C].
#include <memory>
#include <vector>

#include "graph/node_decisions.h"
#include "kernels/dwconv_nhwc.h"
#include "ops/fused_epilogue.h"
#include "ops/op_util.h"
#include "ops/tile_util.h"

namespace grove::tiling {
namespace dwconv_nhwc_rule {

struct PackedTaps {
  std::vector<float> w;  // [kh * kw][C]
};

// Float32 throughout (the plan never stores a depthwise conv's values as bf16), W [C, 1, kh, kw]
// with one group per channel, and at most the kernel's rows.
bool claimed(const Node& node, std::span<const ValueInfo> in) {
  if (in.size() < 2 || !in[0].present || !in[1].present) return false;
  for (const ValueInfo& v : in)
    if (v.present && v.dtype != DType::f32) return false;
  const Shape &x = in[0].shape, &w = in[1].shape;
  if (x.size() != 4 || w.size() != 4) return false;
  return node.attr_int("group", 1) == x[3] && w[0] == x[3] && w[1] == 1 &&
         w[2] <= static_cast<int64_t>(kernels::kDwConvNhwcMaxKernelRows);
}

// Channels are cut in whole vectors of the active ISA.
int64_t lanes() {
  switch (kernels::active_isa()) {
    case kernels::Isa::avx512: return 16;
    case kernels::Isa::avx2: return 8;
    case kernels::Isa::scalar: break;
  }
  return 4;
}

WindowGeometry geometry_of(const Node& node, const Shape& x, const Shape& w) {
  return window_geometry(node, std::span<const int64_t>(x.data() + 1, 2), {w[2], w[3]}, false);
}

std::vector<int64_t> cuttable(const Node& node, std::span<const ValueInfo> in, std::span<const ValueInfo> out) {
  const Shape& y = out[0].shape;
  if (!claimed(node, in) || y.size() != 4) return none_cuttable(y);
  return {1, 1, 0, lanes()};
}

void needs(const Node& node, std::span<const ValueInfo> in, std::span<const ValueInfo>, const Region& out_region,
           std::span<Region> in_regions) {
  for (size_t i = 0; i < in.size(); ++i)
    if (has_input(in, i)) in_regions[i] = full_region(in[i].shape);
  if (!claimed(node, in)) return;
  const WindowGeometry g = geometry_of(node, in[0].shape, in[1].shape);
  in_regions[0] = {out_region[0], window_input_range(g, 0, out_region[1]), {0, in[0].shape[2]}, out_region[3]};
  Region w = full_region(in[1].shape);
  w[0] = out_region[3];
  in_regions[1] = w;
  if (has_input(in, 2)) in_regions[2] = Region{out_region[3]};
  if (has_input(in, kEpilogueResidualInput)) in_regions[kEpilogueResidualInput] = out_region;
}

std::shared_ptr<PackedTaps> pack(const Tensor& w) {
  auto p = std::make_shared<PackedTaps>();
  const auto channels = static_cast<size_t>(w.dim(0)), taps = static_cast<size_t>(w.dim(2) * w.dim(3));
  p->w.resize(channels * taps);
  kernels::pack_dwconv_nhwc_weights(w.data<float>(), channels, taps, p->w.data());
  return p;
}

std::shared_ptr<const void> prepare(const Node& node, std::span<const ValueInfo> in,
                                    std::span<const Tensor* const> constants) {
  if (!claimed(node, in) || constants.size() < 2 || !constants[1]) return nullptr;
  return pack(*constants[1]);
}

int64_t prepared_bytes(const Node&, std::span<const ValueInfo>, const void* prepared) {
  return static_cast<int64_t>(static_cast<const PackedTaps*>(prepared)->w.size() * sizeof(float));
}

void run_tile(const Node& node, std::span<const Tensor* const> in, std::span<Tensor* const> out, const Region& r,
              const void* prepared, TileScratch&) {
  Tensor& y = *out[0];
  check_region(node, r, y.shape());
  if (!claimed(node, infos_of_tensors(in)) || y.dtype() != DType::f32 || r[2].begin != 0 || r[2].end != y.dim(2))
    return reference_whole(node, in, out, r);
  for (const Range& d : r)
    if (d.size() <= 0) return;
  const Tensor& x = *in[0];
  std::shared_ptr<const PackedTaps> own;
  const auto* p = static_cast<const PackedTaps*>(prepared);
  if (!p) {
    own = pack(*in[1]);
    p = own.get();
  }
  const WindowGeometry g = geometry_of(node, x.shape(), in[1]->shape());
  const Tensor* bias = optional_input(in, 2);
  const Tensor* residual = optional_input(in, kEpilogueResidualInput);
  kernels::DwConvNhwcCall call;
  call.w = p->w.data();
  call.bias = bias ? bias->data<float>() : nullptr;
  call.channels = static_cast<size_t>(x.dim(3));
  call.c_begin = static_cast<size_t>(r[3].begin), call.c_end = static_cast<size_t>(r[3].end);
  call.row_begin = static_cast<size_t>(r[1].begin), call.row_end = static_cast<size_t>(r[1].end);
  kernels::Conv2dShape& s = call.shape;
  s.in_h = static_cast<size_t>(g.input[0]), s.in_w = static_cast<size_t>(g.input[1]);
  s.out_h = static_cast<size_t>(g.output[0]), s.out_w = static_cast<size_t>(g.output[1]);
  s.kernel_h = static_cast<size_t>(g.kernel[0]), s.kernel_w = static_cast<size_t>(g.kernel[1]);
  s.stride_h = static_cast<size_t>(g.strides[0]), s.stride_w = static_cast<size_t>(g.strides[1]);
  s.dilation_h = static_cast<size_t>(g.dilations[0]), s.dilation_w = static_cast<size_t>(g.dilations[1]);
  s.pad_top = static_cast<size_t>(g.pads_begin[0]), s.pad_left = static_cast<size_t>(g.pads_begin[1]);
  call.activation = epilogue_activation(node);
  const int64_t in_image = x.dim(1) * x.dim(2) * x.dim(3), out_image = y.dim(1) * y.dim(2) * y.dim(3);
  for (int64_t n = r[0].begin; n < r[0].end; ++n) {
    call.x = x.data<float>() + n * in_image;
    call.y = y.data<float>() + n * out_image;
    call.residual = residual ? residual->data<float>() + n * out_image : nullptr;
    kernels::dwconv2d_nhwc(call);
  }
}

}  // namespace dwconv_nhwc_rule

void add_dwconv_nhwc_rules(RuleTable& t) {
  using namespace dwconv_nhwc_rule;
  t[internal_rule_key("DepthwiseConvNhwc")] = TileRule{cuttable, needs, run_tile, prepare, prepared_bytes};
}

}  // namespace grove::tiling
