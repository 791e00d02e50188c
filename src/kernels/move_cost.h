#pragma once
// What moving one element costs next to the GEMM's arithmetic, on this machine: the planner
// weighs the work a finer cut repeats (im2col packing, Winograd input transforms, weight
// panels streamed again) against the FLOPs it spreads (plan/plan_tiles.cpp).

namespace grove::kernels {

// FLOPs the f32 GEMM does in the time pack_im2col packs one element, measured now (about a
// millisecond: the best of a few timed calls of each on one small conv layer), rounded to a
// power of four so that plans made one after another agree (the choice it feeds moves with
// its square root, so a factor of two either way changes little).
double measure_move_flops();

// FLOPs the f32 GEMM does in the time transpose_4byte moves one element of an NCHW activation
// to NHWC (the layout changes around channels-last convs), measured now on half a megabyte,
// rounded to a power of two.
double measure_transpose_flops();

// What one FLOP of the AMX bf16 GEMM costs in f32 GEMM FLOPs, measured now on the same small
// GEMM (the best of a few calls of each), rounded to a power of two; 1 where there is no AMX.
double measure_amx_flop_cost();

// How many times faster the AVX512-BF16 dot-product GEMM (Precision::bf16, no AMX) runs the
// same small GEMM than the f32 one, measured now (the best of a few calls of each), rounded to
// a tenth; 0 where the CPU has no AVX512-BF16. Where a core issues FMAs on two ports and the dot
// product on one, it is no faster, and the packing that rounds to bf16 makes the model slower.
double measure_bf16_dot_gain();

}  // namespace grove::kernels
