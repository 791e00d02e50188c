#include "kernels/half.h"

#include "kernels/isa.h"

namespace grove::kernels {

bool convert_f32_to_f16(const float* x, uint16_t* y, size_t n) {
  if (active_isa() == Isa::scalar) return false;
  avx2::convert_f32_to_f16(x, y, n);
  return true;
}

bool convert_f16_to_f32(const uint16_t* x, float* y, size_t n) {
  if (active_isa() == Isa::scalar) return false;
  avx2::convert_f16_to_f32(x, y, n);
  return true;
}

}  // namespace grove::kernels
