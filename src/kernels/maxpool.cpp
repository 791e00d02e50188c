#include "kernels/maxpool.h"

namespace grove::kernels {

void max_pool2d_rows(const MaxPool2dRowsCall& call, Isa isa) {
  switch (isa) {
    case Isa::avx512: return f32_max_pool2d_rows_avx512(call);
    case Isa::avx2: return f32_max_pool2d_rows_avx2(call);
    case Isa::scalar: break;
  }
  f32_max_pool2d_rows_scalar(call);
}

void max_pool_nhwc_run(const MaxPoolNhwcRun& run, Isa isa) {
  switch (isa) {
    case Isa::avx512: return f32_max_pool_nhwc_run_avx512(run);
    case Isa::avx2: return f32_max_pool_nhwc_run_avx2(run);
    case Isa::scalar: break;
  }
  f32_max_pool_nhwc_run_scalar(run);
}

}  // namespace grove::kernels
