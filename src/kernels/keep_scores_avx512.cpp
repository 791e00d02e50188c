// keep_means_nhwc for AVX-512, in the order keep_scores.h documents (the scalar and AVX2 builds
// compile keep_scores_impl.h's loops).
//
// Two passes, each keeping its sums in registers:
//  - channels, eight at a time (one vector of doubles): the eight lanes of those channels are
//    eight vectors, pixel p adding into lane p % 8, in increasing p; loaded from the stored lanes
//    and stored back once, not once per pixel;
//  - positions, eight pixels at a time: a pixel alone makes its sum a chain of channels / 8
//    dependent adds, which leaves the adders waiting on their latency; eight pixels make eight
//    independent chains, each pixel's lanes still taking its channels in increasing order, and
//    their lanes are combined together (combine_eight).
// So every sum is the documented one bit for bit.
#include <immintrin.h>

#include <algorithm>

#include "kernels/keep_scores.h"

namespace grove::kernels {

namespace {

// Eight pixels' lane vectors (s[i]: pixel i's 8 lanes) to one vector of their sums, each
// pixel's lanes combined as combine_lanes does: pairs, then pairs of pairs, then the halves.
// The shuffles line up two pixels' operands of one level side by side, so every level is one
// add for all eight pixels, where the scalar combine cost more than the sums themselves.
[[gnu::always_inline]] inline __m512d combine_eight(const __m512d* s) {
  __m512d pairs[4];  // [a01 b01 a23 b23 a45 b45 a67 b67] for pixels a = 2k, b = 2k + 1
  for (int k = 0; k < 4; ++k)
    pairs[k] = _mm512_add_pd(_mm512_unpacklo_pd(s[2 * k], s[2 * k + 1]), _mm512_unpackhi_pd(s[2 * k], s[2 * k + 1]));
  const __m512i low_pairs = _mm512_setr_epi64(0, 1, 8, 9, 4, 5, 12, 13);
  const __m512i high_pairs = _mm512_setr_epi64(2, 3, 10, 11, 6, 7, 14, 15);
  __m512d quads[2];  // [a0123 b0123 c0123 d0123 a4567 b4567 c4567 d4567], pixels 4k .. 4k + 3
  for (int k = 0; k < 2; ++k)
    quads[k] = _mm512_add_pd(_mm512_permutex2var_pd(pairs[2 * k], low_pairs, pairs[2 * k + 1]),
                             _mm512_permutex2var_pd(pairs[2 * k], high_pairs, pairs[2 * k + 1]));
  const __m512i low_halves = _mm512_setr_epi64(0, 1, 2, 3, 8, 9, 10, 11);
  const __m512i high_halves = _mm512_setr_epi64(4, 5, 6, 7, 12, 13, 14, 15);
  return _mm512_add_pd(_mm512_permutex2var_pd(quads[0], low_halves, quads[1]),
                       _mm512_permutex2var_pd(quads[0], high_halves, quads[1]));
}

// The position means of pixels [p0, p0 + count), count <= 8. The channels past the last whole
// vector add into lanes 0 .. channels % 8 - 1 by a masked add, which leaves the other lanes'
// bits as they are (adding 0 would turn a -0 into +0). Missing pixels sum to 0 and are not stored.
template <int kCount>
[[gnu::always_inline]] inline void position_group(const float* x, size_t channels, size_t p0, int count,
                                                  double* position_means) {
  const int n = kCount ? kCount : count;
  const size_t whole = channels / 8 * 8;
  const __mmask8 tail = static_cast<__mmask8>((1u << (channels - whole)) - 1);
  __m512d sum[8];
  for (int i = 0; i < 8; ++i) sum[i] = _mm512_setzero_pd();
  for (size_t c = 0; c < whole; c += 8)
#pragma GCC unroll 8
    for (int i = 0; i < n; ++i)
      sum[i] = _mm512_add_pd(sum[i], _mm512_cvtps_pd(_mm256_loadu_ps(x + (p0 + size_t(i)) * channels + c)));
  if (tail)
    for (int i = 0; i < n; ++i)
      sum[i] = _mm512_mask_add_pd(sum[i], tail, sum[i],
                                  _mm512_cvtps_pd(_mm256_maskz_loadu_ps(tail, x + (p0 + size_t(i)) * channels + whole)));
  const __m512d means = _mm512_div_pd(combine_eight(sum), _mm512_set1_pd(double(channels)));
  _mm512_mask_storeu_pd(position_means + p0, static_cast<__mmask8>((1u << n) - 1), means);
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

void keep_means_nhwc_avx512(const float* x, size_t channels, size_t plane, double* lanes, double* channel_means,
                            double* position_means) {
  const size_t whole = channels / 8 * 8;
  if (channel_means) {
    std::fill(lanes, lanes + 8 * channels, 0.0);
    for (size_t c = 0; c < whole; c += 8) channel_block(x, channels, plane, c, lanes);
    for (size_t p = 0; p < plane; ++p)  // the channels past the last whole vector
      for (size_t c = whole; c < channels; ++c) lanes[(p % 8) * channels + c] += double(x[p * channels + c]);
    // Eight channels at a time: their lanes lie side by side, so combine_lanes is vertical adds.
    const __m512d divisor = _mm512_set1_pd(double(plane));
    size_t c = 0;
    for (; c + 8 <= channels; c += 8) {
      __m512d l[8];
      for (size_t j = 0; j < 8; ++j) l[j] = _mm512_loadu_pd(lanes + j * channels + c);
      const __m512d sum = _mm512_add_pd(_mm512_add_pd(_mm512_add_pd(l[0], l[1]), _mm512_add_pd(l[2], l[3])),
                                        _mm512_add_pd(_mm512_add_pd(l[4], l[5]), _mm512_add_pd(l[6], l[7])));
      _mm512_storeu_pd(channel_means + c, _mm512_div_pd(sum, divisor));
    }
    for (; c < channels; ++c) {
      double l[8];
      for (size_t j = 0; j < 8; ++j) l[j] = lanes[j * channels + c];
      channel_means[c] = combine_lanes(l) / double(plane);
    }
  }
  if (!position_means) return;
  size_t p0 = 0;
  for (; p0 + 8 <= plane; p0 += 8) position_group<8>(x, channels, p0, 8, position_means);
  if (p0 < plane) position_group<0>(x, channels, p0, int(plane - p0), position_means);
}

}  // namespace grove::kernels
