#pragma once
// The two products of attention for one query row against keys and values kept as rows
// (K [keys][dim], V [keys][dim], each row `row_stride` floats apart), with nothing packed.
// A decode step's query is one row, and it meets each cached key and value once: packing K^T
// and V for the GEMM would read and write every byte of the cache again to save nothing
// (ops/attention/tile_attention.cpp takes these when a tile has few query rows).
//
// Orders, the same on every ISA (the vector builds do the same additions, lane by lane):
//  - key_scores: scores[t] = sum over d of q[d] * k[t][d]; product d goes to lane d % 16, each
//    lane adding in increasing d; the 16 lanes are then halved pairwise: lane j += lane j + 8,
//    then j += j + 4, j + 2, j + 1.
//  - weighted_rows: out[j] = sum over t of p[t] * v[t][j], adding in increasing t (onto out[j]
//    with add_to_out, else onto 0).
#include <cstddef>

#include "kernels/isa.h"

namespace grove::kernels {

void key_scores(const float* q, const float* k, size_t row_stride, size_t keys, size_t dim, float* scores,
                Isa isa = active_isa());
// add_to_out: the sum goes on from out's values (keys after those of an earlier call) instead
// of from 0.
void weighted_rows(const float* p, const float* v, size_t row_stride, size_t keys, size_t dim, float* out,
                   bool add_to_out = false, Isa isa = active_isa());

void key_scores_scalar(const float* q, const float* k, size_t row_stride, size_t keys, size_t dim, float* scores);
void key_scores_avx2(const float* q, const float* k, size_t row_stride, size_t keys, size_t dim, float* scores);
void key_scores_avx512(const float* q, const float* k, size_t row_stride, size_t keys, size_t dim, float* scores);
void weighted_rows_scalar(const float* p, const float* v, size_t row_stride, size_t keys, size_t dim, float* out,
                          bool add_to_out);
void weighted_rows_avx2(const float* p, const float* v, size_t row_stride, size_t keys, size_t dim, float* out,
                          bool add_to_out);
void weighted_rows_avx512(const float* p, const float* v, size_t row_stride, size_t keys, size_t dim, float* out,
                          bool add_to_out);

}  // namespace grove::kernels
