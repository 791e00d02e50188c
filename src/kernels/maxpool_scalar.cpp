// The max pool rows of maxpool_impl.h, 4 floats per vector.
#include "kernels/maxpool_impl.h"

namespace grove::kernels {

void f32_max_pool2d_rows_scalar(const MaxPool2dRowsCall& call) { max_pool2d_rows_impl<4>(call); }
void f32_max_pool_nhwc_run_scalar(const MaxPoolNhwcRun& run) { max_pool_nhwc_run_impl<4>(run); }

}  // namespace grove::kernels
