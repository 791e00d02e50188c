// keep_sums_nhwc for AVX-512, in the order keep_scores.h documents (the scalar and AVX2 builds
// compile keep_scores_impl.h's loops).
//
// Two passes, each keeping its sums in registers:
//  - channels, eight at a time (one vector of doubles): the eight lanes of those channels are
//    eight vectors, pixel p adding into lane p % 8, in increasing p; loaded from the stored lanes
//    and stored back once, not once per pixel;
//  - positions, eight pixels at a time: a pixel alone makes its sum a chain of channels / 8
//    dependent adds, which leaves the adders waiting on their latency; eight pixels make eight
//    independent chains, each pixel's lanes still taking its channels in increasing order.
// So every sum is the documented one bit for bit.
#include <immintrin.h>

#include "kernels/keep_scores.h"

namespace grove::kernels {

namespace {

// The position sums of pixels [p0, p0 + count), count <= 8.
template <int kCount>
[[gnu::always_inline]] inline void position_group(const float* x, size_t channels, size_t p0, int count,
                                                  double* position_sums) {
  const int n = kCount ? kCount : count;
  const size_t whole = channels / 8 * 8;
  __m512d sum[8];
  for (int i = 0; i < 8; ++i) sum[i] = _mm512_setzero_pd();
  for (size_t c = 0; c < whole; c += 8)
#pragma GCC unroll 8
    for (int i = 0; i < n; ++i)
      sum[i] = _mm512_add_pd(sum[i], _mm512_cvtps_pd(_mm256_loadu_ps(x + (p0 + size_t(i)) * channels + c)));
  for (int i = 0; i < n; ++i) {
    const float* pixel = x + (p0 + size_t(i)) * channels;
    alignas(64) double lane[8];
    _mm512_store_pd(lane, sum[i]);
    for (size_t c = whole; c < channels; ++c) lane[c % 8] += double(pixel[c]);
    position_sums[p0 + size_t(i)] = combine_lanes(lane);
  }
}

// The channel lanes of channels [c, c + 8): all eight lanes in registers, one pass down the
// plane (pixel p into lane p % 8), then stored back.
void channel_block(const float* x, size_t channels, size_t plane, size_t c, double* lanes) {
  __m512d acc[8];
  for (int i = 0; i < 8; ++i) acc[i] = _mm512_loadu_pd(lanes + size_t(i) * channels + c);
  size_t p = 0;
  for (; p + 8 <= plane; p += 8)
#pragma GCC unroll 8
    for (int i = 0; i < 8; ++i)
      acc[i] = _mm512_add_pd(acc[i], _mm512_cvtps_pd(_mm256_loadu_ps(x + (p + size_t(i)) * channels + c)));
  for (int i = 0; p < plane; ++p, ++i)
    acc[i] = _mm512_add_pd(acc[i], _mm512_cvtps_pd(_mm256_loadu_ps(x + p * channels + c)));
  for (int i = 0; i < 8; ++i) _mm512_storeu_pd(lanes + size_t(i) * channels + c, acc[i]);
}

}  // namespace

void keep_sums_nhwc_avx512(const float* x, size_t channels, size_t plane, double* lanes, double* position_sums) {
  const size_t whole = channels / 8 * 8;
  if (lanes) {
    for (size_t c = 0; c < whole; c += 8) channel_block(x, channels, plane, c, lanes);
    for (size_t p = 0; p < plane; ++p)  // the channels past the last whole vector
      for (size_t c = whole; c < channels; ++c) lanes[(p % 8) * channels + c] += double(x[p * channels + c]);
  }
  if (!position_sums) return;
  size_t p0 = 0;
  for (; p0 + 8 <= plane; p0 += 8) position_group<8>(x, channels, p0, 8, position_sums);
  if (p0 < plane) position_group<0>(x, channels, p0, int(plane - p0), position_sums);
}

}  // namespace grove::kernels
