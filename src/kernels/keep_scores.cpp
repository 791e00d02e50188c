#include "kernels/keep_scores.h"

namespace grove::kernels {

void keep_means_nhwc(const float* x, size_t channels, size_t plane, double* lanes, double* channel_means,
                     double* position_means, Isa isa) {
  switch (isa) {
    case Isa::avx512: return keep_means_nhwc_avx512(x, channels, plane, lanes, channel_means, position_means);
    case Isa::avx2: return keep_means_nhwc_avx2(x, channels, plane, lanes, channel_means, position_means);
    case Isa::scalar: break;
  }
  keep_means_nhwc_scalar(x, channels, plane, lanes, channel_means, position_means);
}

}  // namespace grove::kernels
