// The max pool rows of maxpool_impl.h, 8 floats per vector.
#include "kernels/maxpool_impl.h"

namespace grove::kernels {

void f32_max_pool2d_rows_avx2(const MaxPool2dRowsCall& call) { max_pool2d_rows_impl<8>(call); }
void f32_max_pool_nhwc_run_avx2(const MaxPoolNhwcRun& run) { max_pool_nhwc_run_impl<8>(run); }

}  // namespace grove::kernels
