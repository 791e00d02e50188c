#include "kernels/conv_rows.h"

#include <algorithm>

#include "grove/error.h"
#include "kernels/gemm_microkernel.h"

namespace grove::kernels {

bool conv_row_supported(Isa isa, Precision precision) { return isa == Isa::avx512 && precision == Precision::f32; }

void conv_rows(const ConvRowCall& call) {
  const PackedB& w = *call.w;
  if (!conv_row_supported(w.isa, w.precision)) throw Error("conv_rows: needs f32 weights packed for AVX-512");
  const size_t taps = call.kernel_h * call.kernel_w;
  if (w.k != taps * call.channels || call.n0 % w.nr != 0 || call.n0 + call.n > w.n)
    throw Error("conv_rows: weights do not match the conv");
  const GemmBlocking blocking = gemm_blocking(w.isa, w.precision);
  const size_t mr = blocking.mr, nr = w.nr;
  // Positions in blocks of nearly equal height (a 56-wide row: 4 x 14; 7 wide: one block of 7).
  const size_t blocks = (call.out_w + mr - 1) / mr;
  GemmTileArgs t;
  t.kc = call.channels;
  t.a_stride = call.stride_w * call.channels;
  t.c_stride = call.y_stride;
  t.residual_stride = call.y_stride;
  t.activation = call.activation;
  for (size_t jr = 0; jr < call.n; jr += nr) {
    t.n = std::min(nr, call.n - jr);
    const float* panel = w.panel((call.n0 + jr) / nr);
    t.bias = call.bias ? call.bias + jr : nullptr;
    const float* next_panel = jr + nr < call.n ? w.panel((call.n0 + jr + nr) / nr) : nullptr;
    for (size_t tap = 0; tap < taps; ++tap) {
      const size_t ki = tap / call.kernel_w, kj = tap % call.kernel_w;
      t.b = panel + tap * call.channels * nr;
      // The first call of a tap streams its slice; it asks for the next tap's (or panel's).
      const float* next = tap + 1 < taps ? t.b + call.channels * nr : next_panel;
      t.accumulate = tap > 0;
      t.finish = tap + 1 == taps;
      for (size_t row = 0; row < call.rows; ++row) {
        const float* x = call.x + row * call.row_step_floats + ki * call.tap_row_floats;
        const size_t y0 = row * call.out_w;
        for (size_t block = 0; block < blocks; ++block) {
          const size_t o0 = call.out_w * block / blocks, o1 = call.out_w * (block + 1) / blocks;
          t.m = o1 - o0;
          t.b_next = row == 0 && block == 0 ? next : nullptr;
          t.a = x + (o0 * call.stride_w + kj * call.dilation_w) * call.channels;
          t.c = call.y + (y0 + o0) * call.y_stride + jr;
          t.residual = call.residual ? call.residual + (y0 + o0) * call.y_stride + jr : nullptr;
          f32_gemm_14x32_avx512(t);
        }
      }
    }
  }
}

}  // namespace grove::kernels
