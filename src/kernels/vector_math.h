#pragma once
// The vector maths of every fast path, written once over GCC vector types of
// GROVE_VMATH_WIDTH floats: e^x, erf, tanh, sigmoid and the activations built on them. The
// vmath kernels (vmath_impl.h: the Erf, Gelu, Tanh and Sigmoid ops, softmax) and the GEMM
// epilogues (gemm_epilogue_avx512.h, f32_gemm_avx2.cpp: an activation fused into a MatMul,
// Gemm or Conv) both call these, each file built with its ISA's flags, so a fused activation
// gives the same bits as the op it replaced (tests/kernels/test_fused_activations.cpp).
// Internal linkage (anonymous namespace) so the linker never merges copies built for
// different ISAs; a file includes it for one width only.
#include <cstddef>
#include <cstdint>

#ifndef GROVE_VMATH_WIDTH
#error "define GROVE_VMATH_WIDTH (floats per vector) before including vector_math.h"
#endif

namespace grove::kernels {
namespace {

constexpr size_t kVectorFloats = GROVE_VMATH_WIDTH;
typedef float vf __attribute__((vector_size(kVectorFloats * sizeof(float))));
typedef int32_t vi __attribute__((vector_size(kVectorFloats * sizeof(float))));

inline vf splat(float v) { return vf{} + v; }

// e^x: x = k ln2 + r with |r| <= ln2/2, e^r by its Taylor polynomial to degree 7 (truncation
// below 1e-8 relative), 2^k built in the exponent bits. Below -87.3 (where 2^k would leave
// the normal range) the result is 0; above 88 it saturates at e^88.
constexpr float kExpCutoff = -87.3f;  // vexp is exactly 0 below it

inline vf vexp(vf x) {
  const vf lo = splat(kExpCutoff);
  vf xc = x < lo ? lo : x;
  xc = xc > splat(88.0f) ? splat(88.0f) : xc;
  // Round x / ln2 to the nearest integer with the 1.5 * 2^23 trick (no rounding-mode calls).
  const vf magic = splat(12582912.0f);
  const vf k = (xc * splat(1.44269504088896341f) + magic) - magic;
  // ln2 split in two so k * ln2_hi is exact for |k| < 2^9.
  const vf r = (xc - k * splat(0.693145751953125f)) - k * splat(1.42860682030941723e-6f);
  vf p = splat(1.0f / 5040.0f);
  p = p * r + splat(1.0f / 720.0f);
  p = p * r + splat(1.0f / 120.0f);
  p = p * r + splat(1.0f / 24.0f);
  p = p * r + splat(1.0f / 6.0f);
  p = p * r + splat(0.5f);
  p = p * r + splat(1.0f);
  p = p * r + splat(1.0f);
  const vi bits = (__builtin_convertvector(k, vi) + 127) << 23;
  const vf result = p * (vf)bits;
  return x < lo ? splat(0.0f) : result;
}

// erfc(|x|) by Abramowitz & Stegun 7.1.26: t = 1 / (1 + p|x|), erfc = poly(t) e^{-x^2},
// absolute error below 1.5e-7 for every x. Returned for |x| so callers pick the sign.
inline vf verfc_abs(vf x) {
  const vf ax = x < splat(0.0f) ? -x : x;
  const vf t = splat(1.0f) / (splat(1.0f) + splat(0.3275911f) * ax);
  vf p = splat(1.061405429f);
  p = p * t + splat(-1.453152027f);
  p = p * t + splat(1.421413741f);
  p = p * t + splat(-0.284496736f);
  p = p * t + splat(0.254829592f);
  return p * t * vexp(-ax * ax);
}

inline vf verf(vf x) {
  const vf one_minus = splat(1.0f) - verfc_abs(x);
  return x < splat(0.0f) ? -one_minus : one_minus;
}

// x * Phi(x) = 0.5 x (1 + erf(x / sqrt2)); for x < 0, 1 + erf is erfc(|x| / sqrt2) directly,
// which keeps the small tail values accurate instead of cancelling against 1.
inline vf vgelu_erf(vf x) {
  const vf c = verfc_abs(x * splat(0.70710678118654752f));
  const vf one_plus_erf = x < splat(0.0f) ? c : splat(2.0f) - c;
  return splat(0.5f) * x * one_plus_erf;
}

// tanh x = sign(x) (1 - 2 / (e^{2|x|} + 1)); below |x| = 1/8 that cancels, so the odd Taylor
// series to x^7 is used there (truncation below 1e-10 relative).
inline vf vtanh(vf x) {
  const vf ax = x < splat(0.0f) ? -x : x;
  const vf big = splat(1.0f) - splat(2.0f) / (vexp(splat(2.0f) * ax) + splat(1.0f));
  const vf x2 = x * x;
  vf p = splat(-17.0f / 315.0f);
  p = p * x2 + splat(2.0f / 15.0f);
  p = p * x2 + splat(-1.0f / 3.0f);
  const vf small = x + x * x2 * p;
  const vf signed_big = x < splat(0.0f) ? -big : big;
  return ax < splat(0.125f) ? small : signed_big;
}

inline vf vsigmoid(vf x) { return splat(1.0f) / (splat(1.0f) + vexp(-x)); }

// The GELU of the tanh approximation, 0.5 x (1 + tanh u) = x sigmoid(2u),
// u = sqrt(2/pi) (x + 0.044715 x^3).
inline vf vgelu_tanh(vf x) {
  const vf two_u = x * (x * x * splat(0.044715f) + splat(1.0f)) * splat(2.0f * 0.79788456080286536f);
  return x * vsigmoid(two_u);
}

// x sigmoid(alpha x): SiLU at alpha 1 (alpha x is then x exactly, so it equals x times the
// Sigmoid op's result), the sigmoid GELU at 1.702.
inline vf vswish(vf x, float alpha) { return x * vsigmoid(splat(alpha) * x); }

}  // namespace
}  // namespace grove::kernels
