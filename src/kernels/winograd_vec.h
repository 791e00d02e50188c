#pragma once
// What the Winograd transform headers share (winograd_f4x3_impl.h, winograd_f2x3_impl.h): the
// channels-last epilogue of one output pixel, and the loop that runs a step over vectors of a
// value type (a GCC vector of floats; loads and stores from vector_ext.h) and then over the last
// floats one at a time. Internal linkage, as the headers that include it.
#include <cstddef>

#include "kernels/epilogue_vec.h"

namespace grove::kernels {
namespace {

// out[c ..] = act(v + bias + residual[c ..]), in that order; residual may be null.
template <class T>
inline void store_nhwc_output(T v, const T& bias, const float* residual, size_t c, const ActivationParams& act,
                              float* out) {
  v = v + bias;
  if (residual) v += load_floats<T>(residual + c);
  store_floats(out + c, activate_floats(v, act));
}

// step(V{}, i) for each whole vector of V's lanes in [0, n), then step(float{}, i) for the rest.
template <class V, class Step>
inline void in_vectors(size_t n, Step&& step) {
  constexpr size_t lanes = sizeof(V) / sizeof(float);
  size_t i = 0;
  for (; i + lanes <= n; i += lanes) step(V{}, i);
  for (; i < n; ++i) step(float{}, i);
}

}  // namespace
}  // namespace grove::kernels
