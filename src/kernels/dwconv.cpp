#include "kernels/dwconv.h"

namespace grove::kernels {

void dwconv2d(const DwConv2dCall& call, Isa isa) {
  switch (isa) {
    case Isa::avx512: return f32_dwconv2d_avx512(call);
    case Isa::avx2: return f32_dwconv2d_avx2(call);
    case Isa::scalar: break;
  }
  f32_dwconv2d_scalar(call);
}

}  // namespace grove::kernels
