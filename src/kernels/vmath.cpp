#include "kernels/vmath.h"

#include <string>

#include "grove/error.h"

namespace grove::kernels {

const VMathKernels& vmath(Isa isa) {
  if (!isa_supported(isa)) throw Error("vmath: ISA " + std::string(isa_name(isa)) + " is not supported on this CPU");
  switch (isa) {
    case Isa::avx512: return f32_vmath_avx512;
    case Isa::avx2: return f32_vmath_avx2;
    case Isa::scalar: break;
  }
  return f32_vmath_scalar;
}

}  // namespace grove::kernels
