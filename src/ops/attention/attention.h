#pragma once
// Where grove.internal Attention (ops/attention/attention.cpp) finds each head's operands. Two forms:
//  - head-major (the default): Q [B, H, S, D], KT [B, H, D, T], V [B, H, T, Dv], output
//    [B, H, S, Dv], as the MatMuls of the chain it replaced read and wrote them; with attribute
//    `key_rows` 1 the second input is K [B, H, T, D] itself (fuse_attention absorbed the
//    Transpose that made K^T of it: a decoder's K is its cache, and transposing the cache
//    every step copied it), K and V may come in two parts and have fewer heads (below);
//  - sequence-major (attribute `heads` set, by fuse_attention when it also absorbed the
//    Split, Reshape and Transpose nodes around the chain): Q [B, S, Cq], K [B, T, Ck] (not
//    transposed) and V [B, T, Cv] hold the heads side by side along their last axis, head h of
//    Q in columns [q_offset + h D, q_offset + (h + 1) D) and likewise K and V; the output is
//    [B, S, H, Dv]. Q, K and V may be one tensor (a projection of all three) at three offsets.
#include <cstdint>

#include "graph/graph.h"

namespace grove {

struct AttentionLayout {
  int64_t batch = 0, heads = 0, queries = 0, keys = 0, head_dim = 0, value_dim = 0;
  bool sequence_major = false;
  bool keys_as_rows = false;  // key t's head dims are contiguous (sequence-major, or key_rows)
  // Element (b, h, i, d) of each operand is at b * batch_stride + h * head_stride + i *
  // row_stride + d; KT's "rows" are keys when keys_as_rows (column t of KT is contiguous) and
  // head dims otherwise.
  struct Operand {
    int64_t offset = 0, batch_stride = 0, head_stride = 0, row_stride = 0;
  };
  Operand q, k, v, out;
  // Key_rows with inputs 5 and 6 (new keys, new values [B, H, N, D|Dv]): K and V are each two
  // parts along the keys, inputs 1 then 5 and 2 then 6. A decoder's cache and its new tokens,
  // read where they are: the model's Concat of them copied the whole cache every step. The
  // first part holds past_keys of the keys (all of them without parts).
  bool parts = false;
  int64_t past_keys = 0;
  Operand k_new, v_new;
  // Key_rows with attribute kv_group n: K and V (and their new parts) have heads / n heads, and
  // query head h reads their head h / n (grouped-query attention, its repeat absorbed).
  int64_t kv_group = 1;

  Shape scores() const { return {batch, heads, queries, keys}; }
};

// The layout of `node` for inputs of these shapes (k_new and v_new: inputs 5 and 6, when
// present); an Error naming the node when they do not fit it.
AttentionLayout attention_layout(const Node& node, const Shape& q, const Shape& k, const Shape& v,
                                 const Shape* k_new = nullptr, const Shape* v_new = nullptr);

}  // namespace grove
