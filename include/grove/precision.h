#pragma once
namespace grove {

// The arithmetic of the GEMM-based ops (Conv, MatMul, Gemm with constant weights). `fp32` is
// exact float32 everywhere. `bf16` rounds both operands of those products to bfloat16 (8 bits
// of mantissa) and accumulates in float32 on AVX512-BF16 dot products; everything else
// (activations between ops, softmax, normalisation, reductions) stays float32. On a CPU
// without AVX512-BF16 a bf16 session runs fp32 and its plan says so (docs/precision.md).
// `int8_weights` stores the weights of MatMul and Gemm (constant B) as int8 with one scale per
// output column, symmetric (weight-only: activations and sums stay float32): a quarter of the
// bytes for a product bound by reading its weights, a decoder's generation step above all
// (docs/generation.md). Convs and everything else stay fp32.
enum class Precision { fp32, bf16, int8_weights };

}  // namespace grove
