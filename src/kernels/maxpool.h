#pragma once
// 2-D max pool of one NCHW plane (no dilation), by output rows: per row, the maximum down the
// window's rows for every input column (contiguous: one vector op per lane group), then across
// each window's columns (stride 1: shifted vector loads; stride 2: the even lanes of two
// vectors per tap; other strides element by element).
// The same taps as the definition, and `a > b ? a : b` throughout, so a NaN never wins and
// every ISA gives the same bits. Per-ISA builds of one GCC-vector source (maxpool_impl.h), as
// the library itself is built for the baseline x86-64 only.
#include <cstddef>
#include <cstdint>

#include "kernels/isa.h"

namespace grove::kernels {

struct MaxPool2dRowsCall {
  const float* x = nullptr;  // in_h x in_w plane
  float* y = nullptr;        // out_h x out_w plane
  size_t in_h = 0, in_w = 0, out_w = 0;
  size_t kernel_h = 1, kernel_w = 1, stride_h = 1, stride_w = 1;
  long pad_top = 0, pad_left = 0;
  size_t row_begin = 0, row_end = 0;  // output rows
  size_t col_begin = 0, col_end = 0;  // output columns
  float* scratch = nullptr;           // in_w + 1 floats (a stride-2 vector reads one past the row)
};

void max_pool2d_rows(const MaxPool2dRowsCall& call, Isa isa = active_isa());

// A run of output pixels of a channels-last max pool whose windows have the same taps at the
// same offsets: pixel p's tap t is the `channels` floats at x + p * x_step + offsets[t], and its
// output goes to y + p * y_step. out[k] = the largest of the taps' k-th floats, from lowest()
// up in tap order by the same `a > b ? a : b` as the planes, so a NaN tap never wins; no taps
// give lowest(). A row's inner pixels are one run; a pixel whose window leaves the plane is a
// run of one with only its taps inside.
struct MaxPoolNhwcRun {
  const float* x = nullptr;
  const ptrdiff_t* offsets = nullptr;  // floats from a pixel's x to each tap
  size_t taps = 0, channels = 0, pixels = 0;
  size_t x_step = 0;  // floats from one pixel's x to the next
  float* y = nullptr;
  size_t y_step = 0;  // floats from one pixel's output to the next
};

void max_pool_nhwc_run(const MaxPoolNhwcRun& run, Isa isa = active_isa());

void f32_max_pool2d_rows_scalar(const MaxPool2dRowsCall& call);
void f32_max_pool2d_rows_avx2(const MaxPool2dRowsCall& call);
void f32_max_pool2d_rows_avx512(const MaxPool2dRowsCall& call);
void f32_max_pool_nhwc_run_scalar(const MaxPoolNhwcRun& run);
void f32_max_pool_nhwc_run_avx2(const MaxPoolNhwcRun& run);
void f32_max_pool_nhwc_run_avx512(const MaxPoolNhwcRun& run);

}  // namespace grove::kernels
