#include "kernels/im2col.h"

#include <algorithm>
#include <cstdint>
#include <vector>

#ifdef __SSE2__
#include <xmmintrin.h>
#endif

#include "grove/error.h"

namespace grove::kernels {

namespace {

// Floats of f32 im2col laid out per step of pack_im2col_bf16: a quarter of a typical L2.
constexpr size_t kBlockFloats = 64 * 1024;

// d[t] = row[first + 2 t] for t in [t, end) (a stride-2 tap), W the row's length. Four at a
// time with an SSE even-element shuffle while both loads stay inside the row: the scalar
// gather was ~40% of im2col time in ResNet-50 (stem and stride-2 3x3 convs).
int64_t copy_stride2(float* d, const float* row, int64_t first, int64_t t, int64_t end, int64_t W) {
#ifdef __SSE2__
  for (; t + 4 <= end && first + 2 * t + 8 <= W; t += 4) {
    const __m128 lo = _mm_loadu_ps(row + first + 2 * t), hi = _mm_loadu_ps(row + first + 2 * t + 4);
    _mm_storeu_ps(d + t, _mm_shuffle_ps(lo, hi, _MM_SHUFFLE(2, 0, 2, 0)));
  }
#endif
  for (; t < end; ++t) d[t] = row[first + 2 * t];
  return t;
}

// The im2col block in panels of `nr` pixels: panel j holds its k rows of nr floats back to
// back (B's packed layout). With nr >= n there is one panel: the plain k x n matrix.
// A 1-D conv mapped onto [L, 1] planes: every output row holds one pixel, so the general walk
// below would pay its per-row set-up for each element. Walk each k row's pixels directly.
void im2col_column_panels(float* panels, size_t nr, const float* x, const Conv2dShape& s, size_t q0, size_t n) {
  const size_t k = s.channels * s.kernel_h, panel_stride = k * nr;
  const int64_t H = static_cast<int64_t>(s.in_h), sh = static_cast<int64_t>(s.stride_h);
  for (size_t c = 0; c < s.channels; ++c)
    for (size_t kh = 0; kh < s.kernel_h; ++kh) {
      const float* column = x + c * s.in_h;
      float* d = panels + (c * s.kernel_h + kh) * nr;
      int64_t ih = static_cast<int64_t>(q0) * sh + static_cast<int64_t>(kh * s.dilation_h) - static_cast<int64_t>(s.pad_top);
      size_t lane = 0;
      for (size_t q = 0; q < n; ++q, ih += sh) {
        d[lane] = ih >= 0 && ih < H ? column[ih] : 0.0f;
        if (++lane == nr) lane = 0, d += panel_stride;
      }
    }
}

bool is_column(const Conv2dShape& s) {
  return s.in_w == 1 && s.kernel_w == 1 && s.out_w == 1 && s.pad_left == 0;
}

void im2col_panels(float* panels, size_t nr, const float* x, const Conv2dShape& s, size_t q0, size_t n) {
  if (is_column(s)) return im2col_column_panels(panels, nr, x, s, q0, n);
  const size_t k = s.channels * s.kernel_h * s.kernel_w, plane = s.in_h * s.in_w;
  const int64_t W = static_cast<int64_t>(s.in_w), H = static_cast<int64_t>(s.in_h);
  const int64_t OW = static_cast<int64_t>(s.out_w), sw = static_cast<int64_t>(s.stride_w);
  // Per kernel column: the output columns [lo, hi) whose tap lands inside the input row.
  std::vector<int64_t> lo(s.kernel_w), hi(s.kernel_w), shift(s.kernel_w);
  for (size_t kw = 0; kw < s.kernel_w; ++kw) {
    shift[kw] = static_cast<int64_t>(kw * s.dilation_w) - static_cast<int64_t>(s.pad_left);  // iw = ow * sw + shift
    const int64_t first = shift[kw] >= 0 ? 0 : (-shift[kw] + sw - 1) / sw;
    const int64_t last = W - 1 - shift[kw] < 0 ? -1 : (W - 1 - shift[kw]) / sw;
    lo[kw] = std::min(first, OW);
    hi[kw] = std::clamp<int64_t>(last + 1, lo[kw], OW);
  }
  const size_t q_end = q0 + n, first_row = q0 / s.out_w, panel_stride = k * nr;
  for (size_t c = 0; c < s.channels; ++c)
    for (size_t kh = 0; kh < s.kernel_h; ++kh)
      for (size_t kw = 0; kw < s.kernel_w; ++kw) {
        const size_t kk = (c * s.kernel_h + kh) * s.kernel_w + kw;
        float* d = panels + kk * nr;  // the next pixel's place: row kk of the current panel
        size_t lane = 0;              // the next pixel's column inside its panel
        for (size_t oh = first_row, q = q0; q < q_end; ++oh) {
          const size_t row_end = std::min(q_end, (oh + 1) * s.out_w);
          const int64_t ih = static_cast<int64_t>(oh * s.stride_h + kh * s.dilation_h) - static_cast<int64_t>(s.pad_top);
          const bool row_inside = ih >= 0 && ih < H;
          const float* in_row = x + c * plane + (row_inside ? ih : 0) * W;
          // Walk the row's pixels in pieces that stay inside one panel (no divisions: this
          // runs once per k row and output row).
          while (q < row_end) {
            const size_t len = std::min(row_end - q, nr - lane);
            const int64_t ow = static_cast<int64_t>(q - oh * s.out_w), len_i = static_cast<int64_t>(len);
            int64_t t = 0;
            if (row_inside) {
              const int64_t copy_begin = std::clamp<int64_t>(lo[kw] - ow, 0, len_i);
              const int64_t copy_end = std::clamp<int64_t>(hi[kw] - ow, copy_begin, len_i);
              for (; t < copy_begin; ++t) d[lane + t] = 0.0f;
              if (sw == 1) {
                const float* src = in_row + ow + shift[kw];
                for (; t < copy_end; ++t) d[lane + t] = src[t];
              } else if (sw == 2) {
                t = copy_stride2(d + lane, in_row, ow * sw + shift[kw], t, copy_end, W);
              } else {
                for (; t < copy_end; ++t) d[lane + t] = in_row[(ow + t) * sw + shift[kw]];
              }
            }
            for (; t < len_i; ++t) d[lane + t] = 0.0f;
            q += len;
            lane += len;
            if (lane == nr && q < q_end) lane = 0, d += panel_stride;
          }
        }
      }
}

}  // namespace

void pack_im2col(PackedB& out, const float* x, const Conv2dShape& s, size_t q0, size_t n, Isa isa) {
  const size_t taps = s.kernel_h * s.kernel_w, k = s.channels * taps;
  if (q0 + n > s.out_h * s.out_w) throw Error("pack_im2col: pixels past the output plane");
  // 1x1, stride 1, no padding: B is the input planes themselves (k rows of plane floats).
  if (is_plain_1x1(s)) return pack_b_into(out, x + q0, k, n, s.in_h * s.in_w, BLayout::k_by_n, isa);
  shape_packed_b(out, k, n, isa);
  im2col_panels(out.panels.data(), out.nr, x, s, q0, n);
}

void pack_im2col_bf16(PackedB& out, const float* x, const Conv2dShape& s, size_t q0, size_t n, Precision to,
                      std::vector<float>& block) {
  const size_t k = s.channels * s.kernel_h * s.kernel_w;
  if (q0 + n > s.out_h * s.out_w) throw Error("pack_im2col_bf16: pixels past the output plane");
  shape_packed_b_bf16(out, k, n, active_isa(), to);
  const size_t nr = out.nr, chunk = std::max(nr, kBlockFloats / std::max<size_t>(k, 1) / nr * nr);
  block.resize(k * std::min(chunk, std::max<size_t>(n, 1)));
  for (size_t first = 0; first < n; first += chunk) {
    const size_t count = std::min(chunk, n - first);
    im2col_panels(block.data(), count, x, s, q0 + first, count);  // one panel: k rows of count pixels
    for (size_t j = 0; j * nr < count; ++j)
      round_panel_to_bf16(block.data() + j * nr, count, std::min(nr, count - j * nr), out, first / nr + j);
  }
}

bool is_plain_1x1(const Conv2dShape& s) {
  return s.kernel_h == 1 && s.kernel_w == 1 && s.stride_h == 1 && s.stride_w == 1 && s.pad_top == 0 &&
         s.pad_left == 0 && s.out_h == s.in_h && s.out_w == s.in_w;
}

void im2col_matrix(float* out, const float* x, const Conv2dShape& s, size_t q0, size_t n) {
  if (q0 + n > s.out_h * s.out_w) throw Error("im2col_matrix: pixels past the output plane");
  im2col_panels(out, std::max<size_t>(n, 1), x, s, q0, n);
}

}  // namespace grove::kernels
