// Tile rule of grove.internal Attention (ops/attention/attention.cpp): cut batch, heads and query rows;
// a tile reads its query rows and the whole K^T and V of its heads, in either layout of
// ops/attention/attention.h (the sequence-major one changes strides and packs K^T from K's rows).
// For each head it packs K^T and V for the GEMM, computes the scores of its query block into per-thread scratch
// ([rows x T], never the whole [S x T] of every head), then scale, keep/fill, mask and the
// softmax row by row (kernels/vmath.h), and the product with V straight into the output.
// A tile of one or two query rows over K kept as rows (a decode step) packs nothing: its
// products read K and V where they are (kernels/attention_rows.h), each in its two parts (the
// cache, the new tokens) when the node has them.
//
// Marked bf16 by the plan (graph/node_decisions.h), both GEMMs round their operands to bf16
// (the scores and the softmax stay float).
//
// A score element is the GEMM's sum over the same k blocks whatever the query block, and
// each row's softmax depends only on that row, so results do not depend on the tiling.
#include <algorithm>
#include <cstdint>
#include <cstring>

#include "kernels/attention_rows.h"
#include "kernels/gemm.h"
#include "kernels/vmath.h"
#include "ops/attention/attention.h"
#include "ops/op.h"
#include "ops/op_util.h"
#include "ops/tile_util.h"

namespace grove::tiling {
namespace attention_rule {

// Cut batch, heads and query rows: dims 0-2 of the output in either form (ops/attention/attention.h).
std::vector<int64_t> attention_cuttable(const Node&, std::span<const ValueInfo>, std::span<const ValueInfo>) {
  return {1, 1, 1, 0};
}

// The batch, head and query ranges of an output region.
struct Block {
  Range batch, heads, queries;
};

Block block_of(const AttentionLayout& l, const Region& r) {
  return l.sequence_major ? Block{r[0], r[2], r[1]} : Block{r[0], r[1], r[2]};
}

AttentionLayout layout_of(const Node& node, std::span<const ValueInfo> in) {
  const bool parts = in.size() > 6 && in[5].present;
  return attention_layout(node, in[0].shape, in[1].shape, in[2].shape, parts ? &in[5].shape : nullptr,
                          parts ? &in[6].shape : nullptr);
}

AttentionLayout layout_of(const Node& node, std::span<const Tensor* const> in) {
  const Tensor* k_new = optional_input(in, 5);
  const Tensor* v_new = optional_input(in, 6);
  return attention_layout(node, in[0]->shape(), in[1]->shape(), in[2]->shape(), k_new ? &k_new->shape() : nullptr,
                          v_new ? &v_new->shape() : nullptr);
}

void attention_needs(const Node& node, std::span<const ValueInfo> in, std::span<const ValueInfo>, const Region& r,
                     std::span<Region> in_regions) {
  const AttentionLayout l = layout_of(node, in);
  const Block blk = block_of(l, r);
  if (l.sequence_major) {
    const auto heads = [&](int64_t offset, int64_t width) {
      return Range{offset + blk.heads.begin * width, offset + blk.heads.end * width};
    };
    in_regions[0] = {blk.batch, blk.queries, heads(l.q.offset, l.head_dim)};
    in_regions[1] = {blk.batch, {0, l.keys}, heads(l.k.offset, l.head_dim)};
    in_regions[2] = {blk.batch, {0, l.keys}, heads(l.v.offset, l.value_dim)};
  } else {
    in_regions[0] = {blk.batch, blk.heads, blk.queries, {0, l.head_dim}};
    // The key/value heads the query heads read (query head h reads h / kv_group).
    const Range kv{blk.heads.begin / l.kv_group, (blk.heads.end - 1) / l.kv_group + 1};
    in_regions[1] = l.keys_as_rows ? Region{blk.batch, kv, {0, l.past_keys}, {0, l.head_dim}}
                                   : Region{blk.batch, blk.heads, {0, l.head_dim}, {0, l.keys}};
    in_regions[2] = {blk.batch, kv, {0, l.past_keys}, {0, l.value_dim}};
    if (l.parts) {
      in_regions[5] = {blk.batch, kv, {0, l.keys - l.past_keys}, {0, l.head_dim}};
      in_regions[6] = {blk.batch, kv, {0, l.keys - l.past_keys}, {0, l.value_dim}};
    }
  }
  const Region score_region{blk.batch, blk.heads, blk.queries, {0, l.keys}};
  for (size_t i = 3; i < std::min<size_t>(in.size(), 5); ++i)
    in_regions[i] = in[i].present ? broadcast_region(in[i].shape, score_region) : Region{};
}

// A tile of at most this many query rows over keys kept as rows runs kernels/attention_rows.h
// on K and V in place. Packing costs one read and one write of K and V per tile whatever its
// rows; the GEMM then reads the packed panels once per block of rows where the in-place
// products read K and V once per row, so packing pays from a few rows on.
constexpr int64_t kInPlaceRows = 2;

// Per worker thread, reused across tiles so the hot path does not allocate.
struct AttentionWorkspace {
  kernels::PackedB kt, v;
  kernels::GemmScratch scratch;
  std::vector<float> k_rows, v_rows;  // one head's K and V parts side by side, for packing
  std::vector<float> scores;
};
// One past the last true byte of keep[0, n) (0 when none is).
size_t kept_prefix(const bool* keep, size_t n) {
  while (n >= 8) {
    uint64_t word;
    std::memcpy(&word, keep + n - 8, sizeof word);
    if (word != 0) break;
    n -= 8;
  }
  while (n > 0 && !keep[n - 1]) --n;
  return n;
}

// A tile of few query rows over keys kept as rows reads every key and value of its heads once
// and does 2 FLOPs on each: it runs at the memory's speed (tiling.h, streamed_elements).
int64_t attention_streamed(const Node& node, std::span<const ValueInfo> in, std::span<const ValueInfo>) {
  const AttentionLayout l = layout_of(node, in);
  if (!l.keys_as_rows || l.queries > kInPlaceRows) return 0;
  return l.batch * l.heads * l.keys * (l.head_dim + l.value_dim);
}

void attention_run(const Node& node, std::span<const Tensor* const> in, std::span<Tensor* const> out, const Region& r,
                   const void*, TileScratch& scratch) {
  check_region(node, r, out[0]->shape());
  const AttentionLayout l = layout_of(node, in);
  const Block blk = block_of(l, r);
  const int64_t d = l.head_dim, keys = l.keys, dv = l.value_dim;
  const Shape scores = l.scores();
  const Tensor* mask = optional_input(in, 3);
  const Tensor* keep = optional_input(in, 4);
  const std::vector<int64_t> ms = mask ? broadcast_strides(mask->shape(), scores) : std::vector<int64_t>(4, 0);
  const std::vector<int64_t> ks = keep ? broadcast_strides(keep->shape(), scores) : std::vector<int64_t>(4, 0);
  const float scale = node.attr_float("scale", 1.0f);
  const bool divide = node.attr_string("scale_op", "Mul") == "Div";
  const float fill = node.attr_float("fill", 0.0f);
  const kernels::VMathKernels& vm = kernels::vmath();
  const kernels::Precision precision = gemm_precision(node);  // of Q.K^T and P.V; the softmax stays fp32
  // KT's rows are keys where keys_as_rows (column t of KT contiguous), else head dims.
  const kernels::BLayout kt_layout = l.keys_as_rows ? kernels::BLayout::n_by_k : kernels::BLayout::k_by_n;
  // A tile of few query rows over keys kept as rows (a decode step's) reads K and V in place:
  // packing them for the GEMM would copy all of both to use each byte once or twice.
  const bool in_place = l.keys_as_rows && precision == kernels::Precision::f32 && blk.queries.size() <= kInPlaceRows;
  const auto at = [](const Tensor* t, const AttentionLayout::Operand& o, int64_t b, int64_t h, int64_t row) {
    return t->data<float>() + o.offset + b * o.batch_stride + h * o.head_stride + row * o.row_stride;
  };
  AttentionWorkspace& w = scratch.get<AttentionWorkspace>();
  const auto rows = static_cast<size_t>(blk.queries.size());
  const auto past = static_cast<size_t>(l.past_keys), fresh = static_cast<size_t>(keys - l.past_keys);
  // The rows of one head's two parts, `width` floats each, copied one after the other into `buf`.
  const auto joined = [&](std::vector<float>& buf, const float* first, size_t first_stride, const float* second,
                          size_t second_stride, size_t width) {
    buf.resize(static_cast<size_t>(keys) * width);
    for (size_t t = 0; t < past; ++t) std::copy_n(first + t * first_stride, width, buf.data() + t * width);
    for (size_t t = 0; t < fresh; ++t) std::copy_n(second + t * second_stride, width, buf.data() + (past + t) * width);
    return static_cast<const float*>(buf.data());
  };
  w.scores.resize(rows * static_cast<size_t>(keys));
  // Scale, keep/fill, mask and softmax of query row i's scores, in place.
  const auto normalise = [&](int64_t b, int64_t h, int64_t i, float* row) {
    const auto n = static_cast<size_t>(keys);
    const bool* k = keep ? keep->data<bool>() + b * ks[0] + h * ks[1] + i * ks[2] : nullptr;
    // Keys past the last kept one (a causal row's future) all become `fill`: scale and
    // keep only the live part, and let the softmax skip the tail's exps when they are 0.
    const size_t live = k && ks[3] == 1 && !mask ? kept_prefix(k, n) : n;
    vm.binary(divide ? kernels::BinaryOp::div : kernels::BinaryOp::mul, kernels::BinaryForm::vector_scalar, live, row,
              &scale, row);
    if (k) {
      if (ks[3] == 1) {
        vm.fill_unkept(live, k, fill, row);
        std::fill(row + live, row + n, fill);
      } else if (ks[3] == 0) {
        if (!k[0]) std::fill(row, row + n, fill);  // one keep value for the whole row
      } else {
        for (int64_t j = 0; j < keys; ++j)
          if (!k[j * ks[3]]) row[j] = fill;
      }
    }
    if (mask) {
      const float* m = mask->data<float>() + b * ms[0] + h * ms[1] + i * ms[2];
      vm.binary(kernels::BinaryOp::add,
                ms[3] == 1 ? kernels::BinaryForm::vector_vector : kernels::BinaryForm::vector_scalar, n, row, m, row);
    }
    if (live < n) vm.softmax_tail(n, live, fill, row, row);
    else vm.softmax(n, row, row);
  };
  const auto out_row = [&](int64_t b, int64_t h, int64_t i) {
    return out[0]->data<float>() + l.out.offset + b * l.out.batch_stride + h * l.out.head_stride + i * l.out.row_stride;
  };
  for (int64_t b = blk.batch.begin; b < blk.batch.end; ++b)
    for (int64_t h = blk.heads.begin; h < blk.heads.end; ++h) {
      const int64_t g = h / l.kv_group;  // the key/value head of query head h
      if (in_place) {
        for (int64_t i = blk.queries.begin; i < blk.queries.end; ++i) {
          float* row = w.scores.data() + (i - blk.queries.begin) * keys;
          kernels::key_scores(at(in[0], l.q, b, h, i), at(in[1], l.k, b, g, 0), static_cast<size_t>(l.k.row_stride),
                              past, static_cast<size_t>(d), row);
          if (l.parts)
            kernels::key_scores(at(in[0], l.q, b, h, i), at(in[5], l.k_new, b, g, 0),
                                static_cast<size_t>(l.k_new.row_stride), fresh, static_cast<size_t>(d), row + past);
          normalise(b, h, i, row);
          kernels::weighted_rows(row, at(in[2], l.v, b, g, 0), static_cast<size_t>(l.v.row_stride), past,
                                 static_cast<size_t>(dv), out_row(b, h, i));
          if (l.parts)
            kernels::weighted_rows(row + past, at(in[6], l.v_new, b, g, 0), static_cast<size_t>(l.v_new.row_stride),
                                   fresh, static_cast<size_t>(dv), out_row(b, h, i), /*add_to_out=*/true);
        }
        continue;
      }
      // In two parts, the GEMM path (a prompt's many query rows) packs from one copy of both.
      const float* k_head = at(in[1], l.k, b, g, 0);
      const float* v_head = at(in[2], l.v, b, g, 0);
      size_t k_stride = static_cast<size_t>(l.k.row_stride), v_stride = static_cast<size_t>(l.v.row_stride);
      if (l.parts) {
        k_head = joined(w.k_rows, k_head, k_stride, at(in[5], l.k_new, b, g, 0), static_cast<size_t>(l.k_new.row_stride),
                        static_cast<size_t>(d));
        v_head = joined(w.v_rows, v_head, v_stride, at(in[6], l.v_new, b, g, 0), static_cast<size_t>(l.v_new.row_stride),
                        static_cast<size_t>(dv));
        k_stride = static_cast<size_t>(d), v_stride = static_cast<size_t>(dv);
      }
      kernels::pack_b_into(w.kt, k_head, static_cast<size_t>(d), static_cast<size_t>(keys), k_stride, kt_layout,
                           kernels::active_isa(), precision);
      kernels::GemmCall qk;
      qk.m = rows;
      qk.a = at(in[0], l.q, b, h, blk.queries.begin);
      qk.a_stride = static_cast<size_t>(l.q.row_stride);
      qk.n = static_cast<size_t>(keys);
      qk.c = w.scores.data();
      qk.c_stride = static_cast<size_t>(keys);
      kernels::gemm(qk, w.kt, w.scratch);
      for (int64_t i = blk.queries.begin; i < blk.queries.end; ++i)
        normalise(b, h, i, w.scores.data() + (i - blk.queries.begin) * keys);
      kernels::pack_b_into(w.v, v_head, static_cast<size_t>(keys), static_cast<size_t>(dv), v_stride,
                           kernels::BLayout::k_by_n, kernels::active_isa(), precision);
      kernels::GemmCall pv;
      pv.m = rows;
      pv.a = w.scores.data();
      pv.a_stride = static_cast<size_t>(keys);
      pv.n = static_cast<size_t>(dv);
      pv.c = out_row(b, h, blk.queries.begin);
      pv.c_stride = static_cast<size_t>(l.out.row_stride);
      kernels::gemm(pv, w.v, w.scratch);
    }
}

}  // namespace attention_rule

std::string internal_rule_key(const std::string& op_type) {
  using namespace attention_rule;
  std::string key = kGroveDomain;
  key += ':';
  key += op_type;
  return key;
}

void add_attention_rules(RuleTable& t) {
  using namespace attention_rule;
  TileRule rule{attention_cuttable, attention_needs, attention_run};
  rule.streamed_elements = attention_streamed;
  t[internal_rule_key("Attention")] = rule;
}

}  // namespace grove::tiling
