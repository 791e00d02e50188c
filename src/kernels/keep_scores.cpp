#include "kernels/keep_scores.h"

namespace grove::kernels {

void keep_sums_nhwc(const float* x, size_t channels, size_t plane, double* lanes, double* position_sums, Isa isa) {
  switch (isa) {
    case Isa::avx512: return keep_sums_nhwc_avx512(x, channels, plane, lanes, position_sums);
    case Isa::avx2: return keep_sums_nhwc_avx2(x, channels, plane, lanes, position_sums);
    case Isa::scalar: break;
  }
  keep_sums_nhwc_scalar(x, channels, plane, lanes, position_sums);
}

}  // namespace grove::kernels
