#include "kernels/epilogue.h"

#include <algorithm>
#include <cmath>

namespace grove::kernels {

float apply_activation(float x, const ActivationParams& p) {
  switch (p.kind) {
    case Activation::identity: return x;
    case Activation::relu: return std::max(x, 0.0f);
    case Activation::clip: return std::min(std::max(x, p.alpha), p.beta);
    case Activation::leaky_relu: return x >= 0.0f ? x : p.alpha * x;
    case Activation::sigmoid: return 1.0f / (1.0f + std::exp(-x));
    case Activation::hard_sigmoid: return std::clamp(p.alpha * x + p.beta, 0.0f, 1.0f);
    case Activation::hard_swish: return x * std::clamp(x / 6.0f + 0.5f, 0.0f, 1.0f);
    case Activation::gelu_erf: return 0.5f * x * (1.0f + std::erf(x * 0.70710678118654752f));
    case Activation::gelu_tanh: {
      const float u = 0.79788456080286536f * (x + 0.044715f * x * x * x);
      return 0.5f * x * (1.0f + std::tanh(u));
    }
    case Activation::swish: return x / (1.0f + std::exp(-p.alpha * x));
  }
  return x;
}

}  // namespace grove::kernels
