#pragma once
// Graph passes run on a bound graph (after bind_shapes, which already folded constants).
#include <set>
#include <string>

#include "graph/graph.h"

namespace grove {

// Orders nodes so each value is produced before it is read, keeping the file's order where it
// is already valid; a cycle is an Error naming its nodes. Runs at import, before binding.
void sort_topologically(Graph& graph);

// Identity and inference-mode Dropout forward their input: consumers read the input directly.
void remove_identities(Graph& graph);

// Drops nodes none of whose outputs reach a graph output.
void remove_dead_nodes(Graph& graph);

// Pow(x, constant c) for c in {1, 2, 3, 4, 0.5, -0.5, -1, -2} becomes Identity, Mul, Sqrt and
// Reciprocal nodes; returns how many Pows it rewrote.
int rewrite_constant_pow(Graph& graph);

// ReduceMean, Sub, Mul(d, d), ReduceMean, Add eps, Sqrt, Div (or Mul by Reciprocal), [Mul
// gamma], [Add beta] over the last axis becomes one LayerNormalization, and the same without
// the mean and beta from Mul(x, x) one RMSNormalization; returns how many.
int fuse_layernorm(Graph& graph);

// Folds an inference BatchNormalization that follows a Conv (constant weights, the Conv's
// only consumer) into the Conv's weights and bias.
void fold_batchnorm_into_conv(Graph& graph);

// DequantizeLinear -> Conv/MatMul [-> Relu] -> QuantizeLinear chains with constant integer
// weights become QLinearConv/QLinearMatMul (fuse_qdq.cpp says when).
void fuse_qdq(Graph& graph);

// On a VNNI CPU, each QLinearConv the 8-bit kernel can take runs channels-last as
// grove.internal QLinearConvNhwc, with Transposes where the layout changes; residual
// QLinearAdds between such convs stay channels-last too (layout_int8.cpp). Returns how many.
int to_channels_last_int8(Graph& graph);

// Each float32 Conv the channels-last path takes (2-D, 16 or more input channels, not in `keep`,
// no primitive chosen; one group with output channels that fill the GEMM's panels and not on
// Winograd, or depthwise) runs as grove.internal ConvNhwc or DepthwiseConvNhwc, with Transposes
// where the layout changes; chains of convs stay channels-last (layout_f32.cpp).
// `transpose_flops`: what one element a Transpose moves is worth in FLOPs (plan.h), to weigh a
// group's Transposes. Run by make_plan, after the precision marks. Returns how many.
// A Conv node chosen "nhwc" (graph/node_decisions.h) runs channels-last whatever the rule says.
// A Winograd layer of at least `winograd_min_channels` input channels stays on Winograd
// channels-last; one of fewer runs on the channels-last GEMM; with `winograd_small_planes`,
// so do 3x3 convs on planes too small for the NCHW Winograd (PlanOptions).
int to_channels_last_f32(Graph& graph, const std::set<std::string>& keep, double transpose_flops,
                         int64_t winograd_min_channels, bool winograd_small_planes);
// Each float32 Conv chosen "nchwc" (graph/node_decisions.h) runs as grove.internal ConvNchwc on
// blocks of `block` channels (kernels::conv_nchwc_block), with reorders where the layout changes;
// chains of such convs stay blocked (layout_nchwc.cpp). Run by make_plan after the
// channels-last pass, whose copies it reorders from and to directly. A chosen conv it cannot
// run is an error naming it.
// Returns how many.
int to_blocked_f32(Graph& graph, int64_t block);
// Whether it can run this node: a float32 Conv that ops/conv/channels_blocked.h's conv_fits_nchwc
// takes, with constant weights.
bool can_run_nchwc(const Graph& graph, const Node& node, int64_t block);
// Whether the channels-last path can run this node at all: a float32 2-D Conv of one group with
// constant weights (the rule of to_channels_last_f32 asks more).
bool can_run_channels_last(const Graph& graph, const Node& node);
// A float32 conv of fewer than 16 input channels and a kernel wider than 1x1 (a network's stem
// on an image), which the channels-last pass sends to the row conv (kernels/conv_rows.h) when
// it stays float32.
bool is_few_channel_stem(const Graph& graph, const Node& node);
// Each channels-last 1x1 expand conv (or, where the CPU runs the row conv, any float conv)
// whose output only a depthwise conv reads (an inverted residual block, a MobileNet's stem) and
// that depthwise conv become one grove.internal ExpandDepthwiseNhwc, which keeps the expanded
// rows in cache (fuse_expand_depthwise.cpp); nodes in `keep` stay apart. Run by make_plan after
// the channels-last pass. Returns how many.
int fuse_expand_depthwise(Graph& graph, const std::set<std::string>& keep);
// After it: each ExpandDepthwiseNhwc whose output (one image's, over half of L2) only a 1x1
// project conv reads, and that conv, become one grove.internal InvertedResidualNhwc. Returns
// how many.
int fuse_depthwise_project(Graph& graph, const std::set<std::string>& keep);
// Each channels-last float conv whose output only a max pool reads (a network's stem) and that
// max pool become one grove.internal ConvMaxPoolNhwc, which keeps the conv's rows in cache
// (fuse_conv_max_pool.cpp), where the CPU runs the row conv; nodes in `keep` stay apart. Run
// by make_plan after the channels-last pass. Returns how many.
int fuse_conv_max_pool(Graph& graph, const std::set<std::string>& keep);

// Replaces each scaled dot-product attention chain (MatMul, scale, [Where], [Add mask],
// Softmax, MatMul) by one grove.internal Attention node; returns how many it fused.
int fuse_attention(Graph& graph);
// Fuses a bias Add, a residual Add and an activation after a Conv, MatMul or Gemm into the
// node's epilogue (graph/node_decisions.h says how; fuse_epilogue.cpp which chains).
void fuse_epilogues(Graph& graph);
// Each grouped float conv (not depthwise, at most 16 groups, no fused residual) becomes one
// conv per group between channel Slices and a Concat, consecutive ones chained group to group
// (split_grouped_convs.cpp says why); returns how many it split.
int split_grouped_convs(Graph& graph);

// Run by the importer, before binding: float16 activations computed in float32
// (widen_float16.cpp says how); a graph without float16 is left as it is.
void widen_float16(Graph& graph);

// All of the above but widen_float16, in an order where each helps the next.
void optimize(Graph& graph);

}  // namespace grove
