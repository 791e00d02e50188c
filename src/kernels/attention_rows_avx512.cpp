// The attention_rows.h loops built for avx512 (attention_rows_impl.h has them).
#include "kernels/attention_rows_impl.h"

namespace grove::kernels {

void key_scores_avx512(const float* q, const float* k, size_t row_stride, size_t keys, size_t dim, float* scores) {
  key_scores_impl(q, k, row_stride, keys, dim, scores);
}

void weighted_rows_avx512(const float* p, const float* v, size_t row_stride, size_t keys, size_t dim, float* out,
                          bool add_to_out) {
  weighted_rows_impl(p, v, row_stride, keys, dim, out, add_to_out);
}

}  // namespace grove::kernels
