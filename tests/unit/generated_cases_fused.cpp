// Generators of the grove.internal ops the passes make (the importer never sees them): the
// channels-last and channel-blocked convs with every fused epilogue the epilogue pass
// writes, the convs joined with the depthwise, project or max-pool node after them, the
// channels-last pools, fused attention in both of its layouts, the feature-pruning ops and
// the 8-bit fused forms. Each draws the node as its pass writes it; the references are the
// unfused ops' on rotated, blocked or masked tensors (ops/), so a tile that differs from the
// reference differs from the ops the pass replaced.
#include <algorithm>
#include <cmath>

#include "generated_cases.h"
#include "graph/node_decisions.h"
#include "ops/conv/channels_blocked.h"
#include "ops/conv/channels_last.h"
#include "ops/conv_fused/conv_max_pool.h"
#include "ops/conv_fused/expand_depthwise.h"
#include "ops/pruning/feature_pruning.h"
#include "ops/op.h"
#include "ops/conv/tile_conv_winograd.h"

namespace grove::gen {
namespace {

// "grove.internal:ConvNhwc" -> a ConvNhwc node of that domain.
Node internal(const std::string& key, size_t inputs) {
  return node(key.substr(key.find(':') + 1), 13, inputs, 1, kGroveDomain);
}

DType any_8bit(Draw& d) { return d.chance(0.5) ? DType::u8 : DType::i8; }
Tensor bytes_of(Draw& d, DType t, const Shape& s) { return t == DType::u8 ? d.ints(t, s, 0, 255) : d.ints(t, s, -128, 127); }

// A 2-D window: kernel, strides, dilations and explicit pads (the passes write pads, never
// auto_pad), and the input and output planes it takes.
struct Window2d {
  std::vector<int64_t> kernel, strides, dilations, pads;  // pads: top, left, bottom, right
  int64_t h = 0, w = 0, oh = 0, ow = 0;
};

Window2d window2d(Draw& d, const std::vector<int64_t>& kernels, bool strided, bool dilated, int64_t most = 14) {
  Window2d g;
  g.pads.assign(4, 0);
  for (int i = 0; i < 2; ++i) {
    const int64_t k = d.pick(kernels), dil = dilated && d.chance(0.2) ? 2 : 1;
    const int64_t s = strided && d.chance(0.35) ? d.between(2, 3) : 1, extent = (k - 1) * dil + 1;
    const int64_t in = std::max(extent, d.between(1, most));
    g.kernel.push_back(k), g.strides.push_back(s), g.dilations.push_back(dil);
    if (d.chance(0.6)) g.pads[i] = d.between(0, extent - 1), g.pads[i + 2] = d.between(0, extent - 1);
    (i == 0 ? g.h : g.w) = in;
    (i == 0 ? g.oh : g.ow) = (in + g.pads[i] + g.pads[i + 2] - extent) / s + 1;
  }
  return g;
}

void set_window2d(Draw& d, Node& n, const Window2d& g, const std::string& prefix = "", bool kernel_shape = false) {
  if (kernel_shape || d.chance(0.5)) set_attr(n, prefix + "kernel_shape", g.kernel);
  if (g.strides != std::vector<int64_t>{1, 1} || d.chance(0.3)) set_attr(n, prefix + "strides", g.strides);
  if (g.dilations != std::vector<int64_t>{1, 1} || d.chance(0.3)) set_attr(n, prefix + "dilations", g.dilations);
  if (g.pads != std::vector<int64_t>(4, 0) || d.chance(0.3)) set_attr(n, prefix + "pads", g.pads);
}

// A fused epilogue as passes/fuse_epilogue.cpp writes it (graph/node_decisions.h), into the
// decisions of a node or of one part of a fused node: one of the activations with its
// parameters, after a residual where `residual`. `kinds` limits the activations where a fused
// form takes fewer.
void draw_epilogue(Draw& d, Decisions& to, bool residual,
                   const std::vector<std::string>& kinds = {"", "relu", "clip", "leaky_relu", "sigmoid", "hard_sigmoid",
                                                            "hard_swish", "gelu_erf", "gelu_tanh", "swish"}) {
  const std::string kind = d.pick(kinds);
  FusedEpilogue& e = to.epilogue;
  std::string fused = residual ? "Add" : "";
  if (!kind.empty()) {
    e.activation = parse_fused_activation(kind).value();
    fused += std::string(residual ? "+" : "") + kind;
  }
  if (kind == "clip") e.alpha = d.chance(0.7) ? 0.0f : -1.0f, e.beta = d.chance(0.7) ? 6.0f : 0.5f;
  if (kind == "leaky_relu") e.alpha = d.chance(0.5) ? 0.1f : 0.01f;
  if (kind == "hard_sigmoid") e.alpha = 0.2f, e.beta = 0.5f;
  if (kind == "swish") e.alpha = d.chance(0.5) ? 1.0f : 1.702f;
  e.fused = fused;
}

Shape nhwc(int64_t n, int64_t h, int64_t w, int64_t c) { return {n, h, w, c}; }

// ConvNhwc (one group; a stem may read x as NCHW; Winograd where it fits) and
// DepthwiseConvNhwc, each with any epilogue and a channels-last residual.
Case conv_nhwc(Draw& d, const std::string& op) {
  const bool depthwise = op.ends_with("DepthwiseConvNhwc");
  const int64_t images = d.between(1, 2);
  const int64_t cin = depthwise ? d.pick(std::vector<int64_t>{1, 3, 8, 16, 17, 21, 40})
                                : d.pick(std::vector<int64_t>{1, 3, 4, 8, 16, 17, 32});
  const int64_t cout = depthwise ? cin : d.pick(std::vector<int64_t>{1, 4, 8, 16, 17, 33, 40});
  const Window2d g = window2d(d, {1, 1, 3, 3, 5}, true, true);
  const bool residual = d.chance(0.3), stem = !depthwise && d.chance(0.2);
  Case c{internal(op, residual ? 4 : 3), {}, {}, 1e-4};
  set_window2d(d, c.node, g);
  if (depthwise) set_attr(c.node, "group", cin);
  draw_epilogue(d, c.node.decisions, residual);
  c.node.decisions.x_nchw = stem;
  const Shape w = {cout, depthwise ? 1 : cin, g.kernel[0], g.kernel[1]};
  if (!depthwise && !stem && d.chance(0.4)) {
    Node twin = nchw_twin(c.node);
    if (tiling::conv_node_fits_winograd(twin, {images, cin, g.h, g.w}, w))
      c.node.decisions.conv = d.chance(0.5) ? ConvPrimitive::winograd : ConvPrimitive::winograd_f2x3_nhwc;
  }
  c.inputs = {d.f32(stem ? Shape{images, cin, g.h, g.w} : nhwc(images, g.h, g.w, cin)), d.f32(w, -0.5, 0.5),
              d.chance(0.7) ? d.f32({cout}) : Tensor()};
  if (residual) c.inputs.push_back(d.f32(nhwc(images, g.oh, g.ow, cout)));
  c.constant = {false, true, true, false};
  return c;
}

// ConvNchwc on x blocked by 8 or 16 channels: one group or depthwise, no dilation, the
// residual blocked like y.
Case conv_nchwc(Draw& d, const std::string& op) {
  const int64_t block = d.chance(0.5) ? 8 : 16;
  const bool depthwise = d.chance(0.3);
  const int64_t cin = block * d.between(1, 3), cout = depthwise ? cin : block * d.between(1, 3);
  const Window2d g = window2d(d, {1, 1, 3, 3, 5, 7}, true, false);
  const bool residual = d.chance(0.3);
  const int64_t images = d.between(1, 2);
  Case c{internal(op, residual ? 4 : 3), {}, {}, 1e-4};
  set_window2d(d, c.node, g);
  if (depthwise) set_attr(c.node, "group", cin);
  draw_epilogue(d, c.node.decisions, residual);
  c.inputs = {nchw_to_blocked(d.f32({images, cin, g.h, g.w}), block),
              d.f32({cout, depthwise ? 1 : cin, g.kernel[0], g.kernel[1]}, -0.5, 0.5),
              d.chance(0.7) ? d.f32({cout}) : Tensor()};
  if (residual) c.inputs.push_back(nchw_to_blocked(d.f32({images, cout, g.oh, g.ow}), block));
  c.constant = {false, true, true, false};
  return c;
}

// ExpandDepthwiseNhwc: an expand conv (1x1, or a stem's 3x3 reading NCHW) and the depthwise
// conv after it; InvertedResidualNhwc joins the 1x1 project conv and its residual too.
Case expand_depthwise(Draw& d, const std::string& op) {
  const bool project = op.ends_with("InvertedResidualNhwc");
  const bool stem = d.chance(0.25);
  const int64_t images = d.between(1, 2), cin = stem ? 3 : d.pick(std::vector<int64_t>{3, 4, 8, 16, 17});
  const int64_t mid = d.pick(std::vector<int64_t>{8, 16, 24, 32, 40, 48});
  Window2d e;  // the expand conv: 1x1, or the stem's 3x3 stride 2
  e.kernel = {stem ? 3 : 1, stem ? 3 : 1}, e.strides = {stem ? 2 : 1, stem ? 2 : 1}, e.dilations = {1, 1};
  e.pads = stem ? std::vector<int64_t>{1, 1, 1, 1} : std::vector<int64_t>(4, 0);
  e.h = d.between(3, 20), e.w = d.between(3, 20);
  e.oh = stem ? (e.h + 2 - 3) / 2 + 1 : e.h, e.ow = stem ? (e.w + 2 - 3) / 2 + 1 : e.w;
  // The depthwise conv reads the expand conv's output plane.
  Window2d g = window2d(d, {3, 3, 5}, true, true, 1);
  for (int i = 0; i < 2; ++i) {
    const int64_t in = i == 0 ? e.oh : e.ow, extent = (g.kernel[i] - 1) * g.dilations[i] + 1;
    int64_t& pb = g.pads[i];
    int64_t& pe = g.pads[i + 2];
    while (in + pb + pe < extent) ++pe;
    (i == 0 ? g.oh : g.ow) = (in + pb + pe - extent) / g.strides[i] + 1;
  }
  const bool residual = project && d.chance(0.5);
  const int64_t out_channels = project ? (residual ? d.pick(std::vector<int64_t>{8, 16, 24}) : d.pick(std::vector<int64_t>{4, 8, 16, 24})) : mid;
  Case c{internal(op, project ? (residual ? 8 : 7) : 5), {}, {}, 1e-4};
  set_attr(c.node, "group", mid);
  set_window2d(d, c.node, g, "", true);
  draw_epilogue(d, c.node.decisions, false, {"", "relu", "clip"});
  const std::string ep = kExpandPrefix;
  if (stem) set_attr(c.node, ep + "strides", e.strides), set_attr(c.node, ep + "pads", e.pads);
  Decisions expand;
  expand.x_nchw = stem;
  draw_epilogue(d, expand, false, {"", "relu", "clip"});
  if (expand != Decisions{}) c.node.decisions.expand = expand;
  c.inputs = {d.f32(stem ? Shape{images, cin, e.h, e.w} : nhwc(images, e.h, e.w, cin)),
              d.f32({mid, cin, e.kernel[0], e.kernel[1]}, -0.5, 0.5), d.chance(0.8) ? d.f32({mid}) : Tensor(),
              d.f32({mid, 1, g.kernel[0], g.kernel[1]}, -0.5, 0.5), d.chance(0.8) ? d.f32({mid}) : Tensor()};
  c.constant = {false, true, true, true, true};
  if (project) {
    c.inputs.push_back(d.f32({out_channels, mid, 1, 1}, -0.5, 0.5));
    c.inputs.push_back(d.chance(0.8) ? d.f32({out_channels}) : Tensor());
    c.constant.push_back(true), c.constant.push_back(true);
    if (residual) {
      c.inputs.push_back(d.f32(nhwc(images, g.oh, g.ow, out_channels)));
      c.constant.push_back(false);
      c.node.decisions.project = Decisions{.epilogue = {.fused = "Add"}};
    }
  }
  return c;
}

// ConvMaxPoolNhwc: a ConvNhwc (a stem reading NCHW, or channels-last) and the max pool
// after it, ceil mode and pool pads included.
Case conv_max_pool(Draw& d, const std::string& op) {
  const bool stem = d.chance(0.4);
  const int64_t images = d.between(1, 2), cin = stem ? 3 : d.pick(std::vector<int64_t>{3, 4, 8, 16});
  const int64_t cout = d.pick(std::vector<int64_t>{8, 16, 17, 32, 40});
  const Window2d g = window2d(d, {1, 3, 3, 5, 7}, true, false, 24);
  Case c{internal(op, 3), {}, {}, 1e-4};
  set_window2d(d, c.node, g);
  c.node.decisions.x_nchw = stem;
  draw_epilogue(d, c.node.decisions, false, {"", "relu", "relu", "clip"});
  const std::string pool = kPoolPrefix;
  const int64_t pk = std::min<int64_t>(d.pick(std::vector<int64_t>{2, 3, 3}), std::min(g.oh, g.ow));
  const int64_t ps = d.between(1, 2), pp = pk > 1 && d.chance(0.4) ? 1 : 0;
  set_attr(c.node, pool + "kernel_shape", std::vector<int64_t>{pk, pk});
  set_attr(c.node, pool + "strides", std::vector<int64_t>{ps, ps});
  if (pp || d.chance(0.3)) set_attr(c.node, pool + "pads", std::vector<int64_t>{pp, pp, pp, pp});
  if (d.chance(0.4)) set_attr(c.node, pool + "ceil_mode", int64_t{d.chance(0.6)});
  c.inputs = {d.f32(stem ? Shape{images, cin, g.h, g.w} : nhwc(images, g.h, g.w, cin)),
              d.f32({cout, cin, g.kernel[0], g.kernel[1]}, -0.5, 0.5), d.chance(0.7) ? d.f32({cout}) : Tensor()};
  c.constant = {false, true, true};
  return c;
}

// MaxPoolNhwc on bytes or floats, and GlobalAveragePoolNhwc on floats.
Case pool_nhwc(Draw& d, const std::string& op) {
  const int64_t images = d.between(1, 2), channels = d.pick(std::vector<int64_t>{1, 3, 5, 16, 17, 37, 64, 70});
  if (op.ends_with("GlobalAveragePoolNhwc")) {
    Case c{internal(op, 1), {d.f32(nhwc(images, d.between(1, 13), d.between(1, 13), channels))}, {false}, 1e-5};
    return c;
  }
  Window2d g = window2d(d, {1, 2, 3, 3, 5}, true, true);
  for (int i = 0; i < 2; ++i)  // a pool's pad stays below its kernel
    g.pads[i] = std::min(g.pads[i], g.kernel[i] - 1), g.pads[i + 2] = std::min(g.pads[i + 2], g.kernel[i] - 1);
  Case c{internal(op, 1), {}, {}, 0};
  set_window2d(d, c.node, g, "", true);
  if (d.chance(0.4)) set_attr(c.node, "ceil_mode", int64_t{d.chance(0.6)});
  const int t = static_cast<int>(d.between(0, 2));
  const Shape x = nhwc(images, g.h, g.w, channels);
  c.inputs = {t == 0 ? d.f32(x) : bytes_of(d, t == 1 ? DType::u8 : DType::i8, x)};
  c.constant = {false};
  return c;
}

// Fused attention: head-major Q [B, H, S, D], KT [B, H, D, T] (or K [B, H, T, D]), V [B, H, T, Dv], or
// sequence-major Q, K, V [B, *, C] holding the heads side by side at offsets; an added mask
// and a boolean keep, each broadcast to the scores.
Case attention(Draw& d, const std::string& op) {
  // One query row a quarter of the time: a decode step's, which reads K and V in place.
  const int64_t batch = d.between(1, 2), heads = d.between(1, 4), queries = d.chance(0.25) ? 1 : d.dim(17);
  const int64_t keys = d.chance(0.2) ? d.between(60, 150) : d.dim(17);
  const int64_t head_dim = d.pick(std::vector<int64_t>{1, 3, 8, 16, 17, 64, 70}), value_dim = d.chance(0.7) ? head_dim : d.between(1, 9);
  const bool mask = d.chance(0.4), keep = d.chance(0.3);
  // Head-major with K as rows a third of the time (a decoder's cache), and of those half with
  // K and V in two parts along the keys (the cache, then the new tokens: inputs 5 and 6).
  const bool head_major = d.chance(0.5), key_rows = head_major && d.chance(0.35), parts = key_rows && d.chance(0.5);
  const int64_t past = parts ? d.between(0, keys) : keys;
  // Grouped-query attention: each key/value head read by `group` query heads.
  const int64_t group = key_rows && d.chance(0.4) ? d.between(2, 3) : 1, query_heads = heads * group;
  Case c{internal(op, parts ? 7 : 3 + (mask || keep) + keep), {}, {}, 1e-5};
  const bool divide = d.chance(0.3);
  if (divide || d.chance(0.3)) set_attr(c.node, "scale_op", std::string(divide ? "Div" : "Mul"));
  set_attr(c.node, "scale", static_cast<float>(divide ? std::sqrt(double(head_dim)) : 1.0 / std::sqrt(double(head_dim))));
  if (keep) set_attr(c.node, "fill", d.chance(0.5) ? -10000.0f : -1e9f);
  if (head_major) {
    if (key_rows) set_attr(c.node, "key_rows", int64_t{1});
    if (group > 1) set_attr(c.node, "kv_group", group);
    c.inputs = {d.f32({batch, query_heads, queries, head_dim}),
                d.f32(key_rows ? Shape{batch, heads, past, head_dim} : Shape{batch, heads, head_dim, keys}),
                d.f32({batch, heads, past, value_dim})};
  } else {
    set_attr(c.node, "heads", heads), set_attr(c.node, "head_dim", head_dim), set_attr(c.node, "value_dim", value_dim);
    const auto width = [&](int64_t columns, const char* offset) {
      const int64_t before = d.chance(0.4) ? d.between(1, 5) : 0;
      if (before || d.chance(0.2)) set_attr(c.node, offset, before);
      return before + columns + (d.chance(0.3) ? d.between(1, 4) : 0);
    };
    c.inputs = {d.f32({batch, queries, width(heads * head_dim, "q_offset")}),
                d.f32({batch, keys, width(heads * head_dim, "k_offset")}),
                d.f32({batch, keys, width(heads * value_dim, "v_offset")})};
  }
  const Shape scores = {batch, query_heads, queries, keys};
  if (mask || keep) c.inputs.push_back(mask ? d.f32(broadcast_from(d, scores), -3, 0) : Tensor());
  if (keep) c.inputs.push_back(d.booleans(broadcast_from(d, scores)));
  if (parts) {
    c.inputs.resize(5);
    c.inputs.push_back(d.f32({batch, heads, keys - past, head_dim}));
    c.inputs.push_back(d.f32({batch, heads, keys - past, value_dim}));
  }
  c.constant.assign(c.inputs.size(), false);
  if (mask) c.constant[3] = d.chance(0.5);
  return c;
}

// The feature-pruning ops: AttentionKeep (each image's kept channels and positions),
// ApplyKeep (x zeroed outside them) and PrunedConv (the conv of the zeroed map, with an
// epilogue), keep drawn as AttentionKeep computes it, or for a third of the PrunedConvs left
// out (each tile then ranks its images' maps itself); and their channels-last forms (x and the
// residual rotated), whose references are the NCHW ops'.
Case feature_pruning(Draw& d, const std::string& op) {
  const bool channels_last = op.ends_with("Nhwc");
  // A channels-last conv the plan left on Winograd runs Winograd adding up the kept channels,
  // reading the kept positions and computing the outputs centred on them (plan/
  // feature_pruning.cpp): a third of PrunedConvNhwc's cases have its shape.
  const bool winograd = op.ends_with("PrunedConvNhwc") && d.chance(0.35);
  const int64_t images = d.between(1, 3);
  const int64_t channels = d.pick(winograd ? std::vector<int64_t>{8, 17, 40, 64} : std::vector<int64_t>{1, 3, 6, 8, 17, 40, 64});
  const Window2d g = window2d(d, winograd ? std::vector<int64_t>{3} : std::vector<int64_t>{1, 3, 3}, !winograd, !winograd,
                              channels_last ? 15 : 9);
  // Positions one by one, or in blocks (kAttrKeepBlock: a Winograd conv skips blocks of outputs).
  const int64_t block = d.chance(0.6) ? 1 : d.between(2, 5), plane = g.h * g.w;
  const int64_t units = keep_units(g.h, g.w, block);
  // Every position kept often enough for the path that computes every output (channels pruned only).
  // The edges a third of the time: every channel (the dense paths), all but one, and one.
  const int64_t kept_channels = d.chance(0.35) ? d.pick(std::vector<int64_t>{channels, std::max<int64_t>(1, channels - 1), 1})
                                               : d.between(1, channels);
  const int64_t kept_positions = d.chance(0.3) ? units : d.between(1, units);
  const Tensor x = d.f32({images, channels, g.h, g.w}, -1, 1);
  Tensor keep(DType::i64, {images, kept_channels + kept_positions});
  AttentionKeepScratch scratch;
  for (int64_t n = 0; n < images; ++n)
    attention_keep(x.data<float>() + n * channels * plane, channels, g.h, g.w, kept_channels, kept_positions,
                   keep.data<int64_t>() + n * (kept_channels + kept_positions), scratch, block);
  auto image = [&](const Tensor& t) { return channels_last && !t.empty() ? nchw_to_nhwc(t) : t; };
  const bool is_keep = op.ends_with("AttentionKeep") || op.ends_with("AttentionKeepNhwc");
  const bool apply = op.ends_with("ApplyKeep") || op.ends_with("ApplyKeepNhwc");
  Case c{internal(op, is_keep ? 1 : apply ? 2 : 5), {}, {}, is_keep || apply ? 0 : 1e-4};
  set_attr(c.node, kAttrKeepChannels, kept_channels), set_attr(c.node, kAttrKeepPositions, kept_positions);
  if (block > 1) set_attr(c.node, kAttrKeepBlock, block);
  if (is_keep) return c.inputs = {image(x)}, c.constant = {false}, c;
  if (apply) return c.inputs = {image(x), keep}, c.constant = {false, false}, c;
  const int64_t cout = d.pick(winograd ? std::vector<int64_t>{8, 16, 33, 64} : std::vector<int64_t>{1, 4, 5, 16, 33, 64});
  set_attr(c.node, "strides", g.strides);
  set_attr(c.node, "pads", g.pads);
  if (g.dilations != std::vector<int64_t>{1, 1}) set_attr(c.node, "dilations", g.dilations);
  const bool residual = d.chance(0.4);
  draw_epilogue(d, c.node.decisions, residual, {"", "relu", "relu", "clip"});
  const Shape w = {cout, channels, g.kernel[0], g.kernel[1]};
  if (winograd && tiling::conv_node_fits_winograd(pruned_conv_twin(c.node), {images, channels, g.h, g.w}, w))
    c.node.decisions.conv = d.chance(0.5) ? ConvPrimitive::winograd : ConvPrimitive::winograd_f2x3_nhwc;
  c.inputs = {image(x), d.f32(w, -0.5, 0.5), d.chance(0.8) ? d.f32({cout}) : Tensor(),
              residual ? image(d.f32({images, cout, g.oh, g.ow})) : Tensor(), keep};
  c.constant = {false, true, true, false, false};
  if (d.chance(0.35)) {  // no keep input: the op ranks x itself
    c.node.inputs.pop_back();
    c.inputs.pop_back();
    c.constant.pop_back();
  }
  return c;
}

// The 8-bit fused forms: ConvIntegerScaled (ConvInteger, Cast, Mul by a scale per tensor or
// channel, a bias, a Relu), QLinearAdd (a QDQ residual add on bytes), QLinearConvNhwc with
// and without the residual QLinearAdd fused after it.
Case quantized_fused(Draw& d, const std::string& op) {
  if (op.ends_with("QLinearAdd")) {
    const DType t = any_8bit(d);
    const Shape s = d.shape(static_cast<size_t>(d.between(1, 4)), 1500);
    Case c{internal(op, 8), {}, {}, 0};
    if (d.chance(0.5)) c.node.decisions.epilogue.activation = FusedActivation::relu;
    c.inputs = {bytes_of(d, t, s), scalar(DType::f32, d.real(0.01, 0.1)), bytes_of(d, t, {}),
                bytes_of(d, t, s), scalar(DType::f32, d.real(0.01, 0.1)), bytes_of(d, t, {}),
                scalar(DType::f32, d.real(0.02, 0.2)), bytes_of(d, t, {})};
    c.constant = {false, true, true, false, true, true, true, true};
    return c;
  }
  const int64_t images = d.between(1, 2), cin = d.pick(std::vector<int64_t>{1, 3, 4, 8, 16, 19});
  const int64_t cout = d.pick(std::vector<int64_t>{1, 5, 8, 20, 33, 40});
  const Window2d g = window2d(d, {1, 1, 3, 3, 5}, true, true);
  if (op.ends_with("ConvIntegerScaled")) {
    const int64_t group = cin > 1 && cout % cin == 0 && d.chance(0.2) ? cin : 1;
    const DType tx = any_8bit(d), tw = any_8bit(d);
    Case c{internal(op, 6), {}, {}, 1e-5};
    set_window2d(d, c.node, g);
    if (group > 1 || d.chance(0.2)) set_attr(c.node, "group", group);
    if (d.chance(0.5)) c.node.decisions.epilogue.activation = FusedActivation::relu, c.node.decisions.epilogue.fused = "Relu";
    c.inputs = {bytes_of(d, tx, {images, cin, g.h, g.w}), bytes_of(d, tw, {cout, cin / group, g.kernel[0], g.kernel[1]}),
                d.chance(0.8) ? bytes_of(d, tx, {}) : Tensor(),
                d.chance(0.8) ? bytes_of(d, tw, d.chance(0.5) ? Shape{} : Shape{cout}) : Tensor(),
                d.f32(d.chance(0.5) ? Shape{} : Shape{cout}, 0.0005, 0.01), d.chance(0.7) ? d.f32({cout}) : Tensor()};
    c.constant = {false, true, true, true, true, true};
    return c;
  }
  // QLinearConvNhwc: int8 weights; zero weight zero points take the 8-bit kernel, others the reference.
  const DType tx = any_8bit(d), ty = any_8bit(d);
  const bool residual = d.chance(0.4);
  Case c{internal(op, residual ? 16 : 9), {}, {}, 0};
  set_window2d(d, c.node, g);
  if (d.chance(0.4)) c.node.decisions.epilogue.activation = FusedActivation::relu;
  Tensor w_zero = d.chance(0.85) ? d.ints(DType::i8, {cout}, 0, 0) : d.ints(DType::i8, {cout}, -3, 3);
  const Tensor y_zero = bytes_of(d, ty, {});
  c.inputs = {bytes_of(d, tx, nhwc(images, g.h, g.w, cin)), scalar(DType::f32, d.real(0.01, 0.1)), bytes_of(d, tx, {}),
              d.ints(DType::i8, {cout, cin, g.kernel[0], g.kernel[1]}, -128, 127), d.f32({cout}, 0.0005, 0.005),
              std::move(w_zero), scalar(DType::f32, d.real(0.1, 0.5)), y_zero,
              d.chance(0.8) ? d.ints(DType::i32, {cout}, -1000, 1000) : Tensor()};
  c.constant = {false, true, true, true, true, true, true, true, true};
  if (residual) {
    if (d.chance(0.5)) c.node.decisions.epilogue.residual_activation = FusedActivation::relu;
    // r, r_scale, r_zero, then the conv's y as the add reads it (c_scale, c_zero), z_scale, z_zero.
    c.inputs.push_back(bytes_of(d, ty, nhwc(images, g.oh, g.ow, cout)));
    c.inputs.push_back(scalar(DType::f32, d.real(0.02, 0.1)));
    c.inputs.push_back(bytes_of(d, ty, {}));
    const Tensor y_scale = c.inputs[6];
    c.inputs.push_back(y_scale);
    c.inputs.push_back(y_zero);
    c.inputs.push_back(scalar(DType::f32, d.real(0.05, 0.5)));
    c.inputs.push_back(bytes_of(d, ty, {}));
    c.constant.insert(c.constant.end(), {false, true, true, true, true, true, true});
  }
  return c;
}

}  // namespace

void add_fused_families(std::vector<Family>& families) {
  const std::string g = std::string(kGroveDomain) + ":";
  families.push_back({"ConvNhwc", {g + "ConvNhwc", g + "DepthwiseConvNhwc"}, &conv_nhwc});
  families.push_back({"ConvNchwc", {g + "ConvNchwc"}, &conv_nchwc});
  families.push_back({"ExpandDepthwise", {g + "ExpandDepthwiseNhwc", g + "InvertedResidualNhwc"}, &expand_depthwise});
  families.push_back({"ConvMaxPool", {g + "ConvMaxPoolNhwc"}, &conv_max_pool});
  families.push_back({"PoolNhwc", {g + "MaxPoolNhwc", g + "GlobalAveragePoolNhwc"}, &pool_nhwc});
  families.push_back({"FusedAttention", {g + "Attention"}, &attention});
  families.push_back({"FeaturePruning",
                      {g + "AttentionKeep", g + "ApplyKeep", g + "PrunedConv", g + "AttentionKeepNhwc",
                       g + "ApplyKeepNhwc", g + "PrunedConvNhwc"},
                      &feature_pruning});
  families.push_back(
      {"QuantizedFused", {g + "ConvIntegerScaled", g + "QLinearAdd", g + "QLinearConvNhwc"}, &quantized_fused});
}

}  // namespace grove::gen
