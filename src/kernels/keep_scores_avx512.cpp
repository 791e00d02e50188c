// keep_sums_nhwc built for avx512 (keep_scores_impl.h has the loops).
#include "kernels/keep_scores_impl.h"

namespace grove::kernels {

void keep_sums_nhwc_avx512(const float* x, size_t channels, size_t plane, double* lanes, double* position_sums) {
  keep_sums_nhwc_impl(x, channels, plane, lanes, position_sums);
}

}  // namespace grove::kernels
