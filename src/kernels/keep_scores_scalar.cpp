// keep_sums_nhwc built for scalar (keep_scores_impl.h has the loops).
#include "kernels/keep_scores_impl.h"

namespace grove::kernels {

void keep_sums_nhwc_scalar(const float* x, size_t channels, size_t plane, double* lanes, double* position_sums) {
  keep_sums_nhwc_impl(x, channels, plane, lanes, position_sums);
}

}  // namespace grove::kernels
