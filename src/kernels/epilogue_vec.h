#pragma once
// The fused epilogue on one vector of outputs, y = act(sum + residual), for the loops written
// once with GCC vectors and built per ISA (dwconv_nhwc_impl.h, conv_direct_impl.h,
// winograd_f4x3_impl.h). ReLU, clip and leaky ReLU (after every conv of a darknet, where lane by
// lane it dominated the Winograd output transform: docs/kernels.md) stay in vector form; the
// rarer activations take the scalar definition lane by lane.
// Internal linkage, like vector_ext.h.
#include <cstring>

#include "kernels/epilogue.h"
#include "kernels/vector_ext.h"

namespace grove::kernels {
namespace {

template <class V>
inline V activate_floats(V sum, const ActivationParams& a) {
  switch (a.kind) {
    case Activation::identity: return sum;
    // Each test is false for NaN and so keeps `sum`: NaN propagates as in ONNX Runtime, and the
    // select is still one vmaxps/vminps (with sum as the operand returned when unordered).
    case Activation::relu: return sum < splat_floats<V>(0.0f) ? splat_floats<V>(0.0f) : sum;
    case Activation::clip:
      sum = sum < splat_floats<V>(a.alpha) ? splat_floats<V>(a.alpha) : sum;
      return sum > splat_floats<V>(a.beta) ? splat_floats<V>(a.beta) : sum;
    case Activation::leaky_relu: return sum >= splat_floats<V>(0.0f) ? sum : sum * splat_floats<V>(a.alpha);
    default: {
      float lanes[sizeof(V) / sizeof(float)];
      std::memcpy(lanes, &sum, sizeof(V));
      for (float& v : lanes) v = apply_activation(v, a);
      std::memcpy(&sum, lanes, sizeof(V));
      return sum;
    }
  }
}

// y[0 .. lanes of V) = act(sum + residual[...]); residual may be null.
template <class V>
inline void finish_floats(float* y, V sum, const float* residual, const ActivationParams& a) {
  if (residual) sum += load_floats<V>(residual);
  store_floats(y, activate_floats(sum, a));
}

}  // namespace
}  // namespace grove::kernels
