#include "kernels/attention_rows.h"

namespace grove::kernels {

void key_scores(const float* q, const float* k, size_t row_stride, size_t keys, size_t dim, float* scores, Isa isa) {
  switch (isa) {
    case Isa::avx512: return key_scores_avx512(q, k, row_stride, keys, dim, scores);
    case Isa::avx2: return key_scores_avx2(q, k, row_stride, keys, dim, scores);
    case Isa::scalar: break;
  }
  key_scores_scalar(q, k, row_stride, keys, dim, scores);
}

void weighted_rows(const float* p, const float* v, size_t row_stride, size_t keys, size_t dim, float* out, bool add_to_out,
                   Isa isa) {
  switch (isa) {
    case Isa::avx512: return weighted_rows_avx512(p, v, row_stride, keys, dim, out, add_to_out);
    case Isa::avx2: return weighted_rows_avx2(p, v, row_stride, keys, dim, out, add_to_out);
    case Isa::scalar: break;
  }
  weighted_rows_scalar(p, v, row_stride, keys, dim, out, add_to_out);
}

}  // namespace grove::kernels
