// The max pool rows of maxpool_impl.h, 16 floats per vector.
#include "kernels/maxpool_impl.h"

namespace grove::kernels {

void f32_max_pool2d_rows_avx512(const MaxPool2dRowsCall& call) { max_pool2d_rows_impl<16>(call); }
void f32_max_pool_nhwc_run_avx512(const MaxPoolNhwcRun& run) { max_pool_nhwc_run_impl<16>(run); }

}  // namespace grove::kernels
