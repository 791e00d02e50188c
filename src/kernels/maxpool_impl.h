#pragma once
// The loop of maxpool.h, included by maxpool_{scalar,avx2,avx512}.cpp with their own ISA flags
// (internal linkage: the linker never merges the copies).
#include <algorithm>
#include <limits>

#include "kernels/maxpool.h"
#include "kernels/vector_ext.h"

namespace grove::kernels {
namespace {

// The maximum of some taps with NaN propagating. One vmaxps per tap keeps the maximum's
// dependency chain as short as without NaN (a vmaxps cannot propagate NaN from both sides: it
// returns its second operand when either is NaN); NaN taps are only noted, off that chain,
// and make their lanes NaN at the end. A compare-and-blend per tap instead cost up to 1.8x on
// the channels-last run (docs/correctness.md).
template <class T>
struct MaxOfTaps {
  T best;
  decltype(T{} != T{}) nan_seen;
  MaxOfTaps() : best(splat_floats<T>(std::numeric_limits<float>::lowest())), nan_seen(best != best) {}
  void take(T candidate) {
    best = candidate > best ? candidate : best;
    nan_seen |= candidate != candidate;
  }
  T result() const { return nan_seen ? splat_floats<T>(std::numeric_limits<float>::quiet_NaN()) : best; }
};

// body.template operator()<W>(i) for i covering [begin, end) in steps of W lanes; a span that
// does not end on a step gets one more vector ending at `end` (the overlap is recomputed with
// the same values), and a span narrower than W takes half-width vectors, then single floats.
template <int W, class Body>
inline void over_span(long begin, long end, Body&& body) {
  if constexpr (W > 1) {
    if (end - begin < W) return over_span<W / 2>(begin, end, body);
    long i = begin;
    for (; i + W <= end; i += W) body.template operator()<W>(i);
    if (i < end) body.template operator()<W>(end - W);
  } else {
    for (long i = begin; i < end; ++i) body.template operator()<1>(i);
  }
}

template <int Lanes>
void max_pool2d_rows_impl(const MaxPool2dRowsCall& c) {
  const long ih = long(c.in_h), iw = long(c.in_w), kh = long(c.kernel_h), kw = long(c.kernel_w);
  const long sx = long(c.stride_w), pad = c.pad_left;
  float* col = c.scratch;
  // Output columns whose windows lie inside the row: [inner0, inner1).
  const long first = long(c.col_begin), last = long(c.col_end);
  const long inner0 = std::clamp<long>((pad + sx - 1) / sx, first, last);
  const long inner1 = std::clamp<long>(iw - kw + pad >= 0 ? (iw - kw + pad) / sx + 1 : 0, inner0, last);
  for (size_t oy = c.row_begin; oy < c.row_end; ++oy) {
    const long iy0 = long(oy * c.stride_h) - c.pad_top;
    const long ky0 = std::max<long>(0, -iy0), ky1 = std::min(kh, ih - iy0);
    over_span<Lanes>(0, iw, [&]<int W>(long ix) {
      using V = FloatVec<W>;
      MaxOfTaps<V> m;
      for (long ky = ky0; ky < ky1; ++ky) m.take(load_floats<V>(c.x + (iy0 + ky) * iw + ix));
      store_floats(col + ix, m.result());
    });
    float* y = c.y + long(oy) * long(c.out_w);
    auto edge = [&](long ox) {
      const long ix0 = ox * sx - pad;
      const long kx0 = std::max<long>(0, -ix0), kx1 = std::min(kw, iw - ix0);
      MaxOfTaps<float> m;
      for (long kx = kx0; kx < kx1; ++kx) m.take(col[ix0 + kx]);
      y[ox] = m.result();
    };
    for (long ox = first; ox < inner0; ++ox) edge(ox);
    if (sx == 1) {
      over_span<Lanes>(inner0, inner1, [&]<int W>(long ox) {
        using V = FloatVec<W>;
        MaxOfTaps<V> m;
        for (long kx = 0; kx < kw; ++kx) m.take(load_floats<V>(col + ox - pad + kx));
        store_floats(y + ox, m.result());
      });
    } else if (sx == 2) {
      over_span<Lanes>(inner0, inner1, [&]<int W>(long ox) {
        using V = FloatVec<W>;
        MaxOfTaps<V> m;
        for (long kx = 0; kx < kw; ++kx) m.take(load_even_floats<V>(col + 2 * ox - pad + kx));
        store_floats(y + ox, m.result());
      });
    } else {
      for (long ox = inner0; ox < inner1; ++ox) {
        const float* w = col + ox * sx - pad;
        MaxOfTaps<float> m;
        for (long kx = 0; kx < kw; ++kx) m.take(w[kx]);
        y[ox] = m.result();
      }
    }
    for (long ox = std::max(inner1, first); ox < last; ++ox) edge(ox);
  }
}

// Per pixel, channels in vectors of Lanes (the last one overlapping, as over_span does), each
// vector's maximum over every tap kept in a register and stored once. The run's fields are read
// into locals: the stores may alias anything reached through a pointer.
template <int Lanes>
void max_pool_nhwc_run_impl(const MaxPoolNhwcRun& run) {
  const float* x = run.x;
  const ptrdiff_t* offsets = run.offsets;
  float* y = run.y;
  const size_t taps = run.taps, pixels = run.pixels, x_step = run.x_step, y_step = run.y_step;
  const long channels = long(run.channels);
  for (size_t p = 0; p < pixels; ++p) {
    const float* at = x + p * x_step;
    float* out = y + p * y_step;
    over_span<Lanes>(0, channels, [&]<int W>(long k) {
      using V = FloatVec<W>;
      MaxOfTaps<V> m;
      for (size_t t = 0; t < taps; ++t) m.take(load_floats<V>(at + offsets[t] + k));
      store_floats(out + k, m.result());
    });
  }
}

}  // namespace
}  // namespace grove::kernels
