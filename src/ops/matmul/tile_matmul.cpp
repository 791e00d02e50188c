// Tile rules of MatMul (numpy batching and broadcasting, 1-D operands) and Gemm, float32:
// cut batch dims, rows (M) and columns (N); a tile reads whole K for its rows of A and its
// columns of B. Tiles run on the SIMD GEMM (kernels/gemm.h): a constant B is packed once at
// plan time (`prepare`), an activation B (attention's K^T and V) per tile. Each output
// element is the kernel's sum over the same k blocks in the same order whatever the tile, and
// a prepared or per-tile packed B holds the same panels, so results do not depend on the grid.
// A fused epilogue (graph/node_decisions.h: MatMul bias input 2, residual input 3, activation)
// rides in the GEMM's epilogue; the residual is read over the tile's own output region.
#include <algorithm>
#include <memory>

#include "kernels/gemm.h"
#include "ops/fused_epilogue.h"
#include "ops/op_util.h"
#include "ops/tile_util.h"

namespace grove::tiling {
namespace matmul_rule {

bool all_f32(std::span<const ValueInfo> in) {
  for (const auto& v : in)
    if (v.present && v.dtype != DType::f32) return false;
  return true;
}

// ---- MatMul ----

struct MatMulDims {
  int64_t m = 1, k = 0, n = 1;
  bool a_vector = false, b_vector = false;  // 1-D operands: their M or N dim is absent from the output
  Shape a_batch, b_batch, batch;
};

MatMulDims matmul_dims(const Node& node, const Shape& a, const Shape& b) {
  if (a.empty() || b.empty()) throw Error(node.describe() + ": MatMul inputs must have rank >= 1");
  MatMulDims d;
  d.a_vector = a.size() == 1;
  d.b_vector = b.size() == 1;
  d.k = a.back();
  if (!d.a_vector) d.m = a[a.size() - 2], d.a_batch.assign(a.begin(), a.end() - 2);
  if (!d.b_vector) d.n = b.back(), d.b_batch.assign(b.begin(), b.end() - 2);
  int64_t kb = d.b_vector ? b[0] : b[b.size() - 2];
  if (kb != d.k) throw Error(node.describe() + ": MatMul inner dimensions differ: " + shape_str(a) + " x " + shape_str(b));
  d.batch = broadcast_shapes(node, d.a_batch, d.b_batch);
  return d;
}

// Weight-stationary cut (tile_util.h): with a constant 2-D B bigger than A, rows (M) are not
// cut, and columns are cut on whole packed panels so each tile streams only its own slice of
// the prepared B.
std::vector<int64_t> weight_aware_cuttable(const ValueInfo& a, const ValueInfo& b, const Shape& out) {
  std::vector<int64_t> blocks = all_cuttable(out);
  if (!b.data || b.shape.size() != 2 || a.shape.size() < 2 || out.size() < 2) return blocks;
  if (!cut_weights_first(numel(b.shape), numel(a.shape))) return blocks;
  blocks[out.size() - 2] = 0;
  blocks[out.size() - 1] = static_cast<int64_t>(kernels::gemm_blocking(kernels::active_isa()).nr);
  return blocks;
}

std::vector<int64_t> matmul_cuttable(const Node&, std::span<const ValueInfo> in, std::span<const ValueInfo> out) {
  if (!all_f32(in)) return none_cuttable(out[0].shape);
  return weight_aware_cuttable(in[0], in[1], out[0].shape);
}

// The output region split into batch, row and column ranges.
struct MatMulRegion {
  Region batch;
  Range rows{0, 1}, cols{0, 1};
};

MatMulRegion split_region(const MatMulDims& d, const Region& r) {
  MatMulRegion s;
  s.batch.assign(r.begin(), r.begin() + static_cast<std::ptrdiff_t>(d.batch.size()));
  size_t at = d.batch.size();
  if (!d.a_vector) s.rows = r[at++];
  if (!d.b_vector) s.cols = r[at];
  return s;
}

void matmul_needs(const Node& node, std::span<const ValueInfo> in, std::span<const ValueInfo>, const Region& out_region,
                  std::span<Region> in_regions) {
  MatMulDims d = matmul_dims(node, in[0].shape, in[1].shape);
  MatMulRegion s = split_region(d, out_region);
  Region a = broadcast_region(d.a_batch, s.batch), b = broadcast_region(d.b_batch, s.batch);
  if (!d.a_vector) a.push_back(s.rows);
  a.push_back({0, d.k});
  b.push_back({0, d.k});
  if (!d.b_vector) b.push_back(s.cols);
  in_regions[0] = a;
  in_regions[1] = b;
  if (has_input(in, kEpilogueBiasInput)) {  // N values, with leading unit dims; a scalar when N is 1
    Region bias(in[kEpilogueBiasInput].shape.size(), Range{0, 1});
    if (!bias.empty()) bias.back() = s.cols;
    in_regions[kEpilogueBiasInput] = bias;
  }
  if (has_input(in, kEpilogueResidualInput)) in_regions[kEpilogueResidualInput] = out_region;
}

// B packed once, per matrix of B's batch dims (row-major over them).
struct PreparedMatMulB {
  std::vector<kernels::PackedB> mats;
};

std::shared_ptr<const void> matmul_prepare(const Node& node, std::span<const ValueInfo> in,
                                           std::span<const Tensor* const> constants) {
  if (in.size() < 2 || constants.size() < 2 || !constants[1] || !all_f32(in)) return nullptr;
  MatMulDims d = matmul_dims(node, in[0].shape, in[1].shape);
  auto prepared = std::make_shared<PreparedMatMulB>();
  const float* b = constants[1]->data<float>();
  const int64_t count = numel(d.b_batch);
  for (int64_t i = 0; i < count; ++i)
    prepared->mats.push_back(kernels::pack_b(b + i * d.k * d.n, static_cast<size_t>(d.k), static_cast<size_t>(d.n),
                                             static_cast<size_t>(d.n), kernels::BLayout::k_by_n, kernels::active_isa(),
                                             gemm_precision(node)));
  return prepared;
}

int64_t matmul_prepared_bytes(const Node&, std::span<const ValueInfo>, const void* prepared) {
  int64_t bytes = 0;
  for (const auto& b : static_cast<const PreparedMatMulB*>(prepared)->mats) bytes += int64_t(b.bytes());
  return bytes;
}

// Per worker thread: B panels packed for the current tile, and the GEMM's packed-A block.
// A worker's buffers for MatMul and Gemm: B packed for a tile off the panels, the GEMM's
// packing, A^T's rows.
struct GemmWorkspace {
  kernels::PackedB b;
  kernels::GemmScratch scratch;
  std::vector<float> a_rows;  // Gemm with transA: the tile's rows of A^T
};

// The packed B covering columns [col0, col0 + cols) of a k x n matrix: the prepared panels
// when the window starts on a panel boundary, else this tile's columns packed now. Returns
// the first column to use inside the result.
const kernels::PackedB& b_window(const kernels::PackedB* prepared, const float* b, size_t k, size_t n, size_t col0,
                                 size_t cols, bool trans_b, kernels::Precision precision, size_t& n0, GemmWorkspace& w) {
  if (prepared && col0 % prepared->nr == 0) {
    n0 = col0;
    return *prepared;
  }
  n0 = 0;
  const kernels::Isa isa = kernels::active_isa();
  if (trans_b) kernels::pack_b_into(w.b, b + col0 * k, k, cols, k, kernels::BLayout::n_by_k, isa, precision);
  else kernels::pack_b_into(w.b, b + col0, k, cols, n, kernels::BLayout::k_by_n, isa, precision);
  return w.b;
}

void matmul_run(const Node& node, std::span<const Tensor* const> in, std::span<Tensor* const> out, const Region& r,
                const void* prepared, TileScratch& scratch) {
  std::vector<ValueInfo> infos = infos_of_tensors(in);
  if (!all_f32(infos)) return reference_whole(node, in, out, r);
  check_region(node, r, out[0]->shape());
  MatMulDims d = matmul_dims(node, in[0]->shape(), in[1]->shape());
  MatMulRegion s = split_region(d, r);
  const auto* packed = static_cast<const PreparedMatMulB*>(prepared);
  const std::vector<int64_t> a_strides = broadcast_strides(d.a_batch, d.batch);
  const std::vector<int64_t> b_strides = broadcast_strides(d.b_batch, d.batch);
  const float* a = in[0]->data<float>();
  const float* b = in[1]->data<float>();
  float* y = out[0]->data<float>();
  const Tensor* bias = optional_input(in, kEpilogueBiasInput);
  const Tensor* residual = optional_input(in, kEpilogueResidualInput);
  const kernels::ActivationParams activation = epilogue_activation(node);
  const size_t k = static_cast<size_t>(d.k), n = static_cast<size_t>(d.n);
  const size_t rows = static_cast<size_t>(s.rows.size()), cols = static_cast<size_t>(s.cols.size());
  GemmWorkspace& ws = scratch.get<GemmWorkspace>();
  // One pass per batch index of the region: a trailing unit dim makes each "row" one matrix.
  Shape batch_shape = d.batch;
  batch_shape.push_back(1);
  Region batch_region = s.batch;
  batch_region.push_back({0, 1});
  for_each_row(batch_shape, batch_region, [&](int64_t y_off, const std::vector<int64_t>& index) {
    int64_t a_off = 0, b_off = 0;
    for (size_t i = 0; i < d.batch.size(); ++i) a_off += index[i] * a_strides[i], b_off += index[i] * b_strides[i];
    const float* b_mat = b + b_off * d.k * d.n;
    size_t n0 = 0;
    const kernels::PackedB& pb = b_window(packed ? &packed->mats.at(static_cast<size_t>(b_off)) : nullptr, b_mat, k, n,
                                          static_cast<size_t>(s.cols.begin), cols, false, gemm_precision(node), n0, ws);
    kernels::GemmCall call;
    call.m = rows;
    call.a = a + a_off * d.m * d.k + s.rows.begin * d.k;
    call.a_stride = k;
    call.n0 = n0;
    call.n = cols;
    const int64_t at = y_off * d.m * d.n + s.rows.begin * d.n + s.cols.begin;
    call.c = y + at;
    call.c_stride = n;
    call.epilogue.bias = bias ? bias->data<float>() + s.cols.begin : nullptr;
    call.epilogue.residual = residual ? residual->data<float>() + at : nullptr;
    call.epilogue.residual_stride = n;
    call.epilogue.activation = activation;
    call.few_rows = static_cast<size_t>(d.m) <= kernels::kFewRows;  // the op's rows: every grid sums alike
    kernels::gemm(call, pb, ws.scratch);
  });
}

// ---- Gemm: Y[M, N] = alpha * op(A) op(B) + beta * C ----

struct GemmDims {
  int64_t m = 0, k = 0, n = 0;
  bool trans_a = false, trans_b = false;
};

GemmDims gemm_dims(const Node& node, const Shape& a, const Shape& b) {
  if (a.size() != 2 || b.size() != 2) throw Error(node.describe() + ": Gemm inputs A and B must be 2-D");
  GemmDims d;
  d.trans_a = node.attr_int("transA", 0) != 0;
  d.trans_b = node.attr_int("transB", 0) != 0;
  d.m = d.trans_a ? a[1] : a[0];
  d.k = d.trans_a ? a[0] : a[1];
  d.n = d.trans_b ? b[0] : b[1];
  if ((d.trans_b ? b[1] : b[0]) != d.k) throw Error(node.describe() + ": Gemm inner dimensions differ");
  return d;
}

void gemm_needs(const Node& node, std::span<const ValueInfo> in, std::span<const ValueInfo>, const Region& out_region,
                std::span<Region> in_regions) {
  GemmDims d = gemm_dims(node, in[0].shape, in[1].shape);
  const Range rows = out_region[0], cols = out_region[1], k{0, d.k};
  in_regions[0] = d.trans_a ? Region{k, rows} : Region{rows, k};
  in_regions[1] = d.trans_b ? Region{cols, k} : Region{k, cols};
  if (in.size() > 2) in_regions[2] = in[2].present ? broadcast_region(in[2].shape, out_region) : Region{};
  if (has_input(in, kEpilogueResidualInput)) in_regions[kEpilogueResidualInput] = out_region;
}

std::shared_ptr<const void> gemm_prepare(const Node& node, std::span<const ValueInfo> in,
                                         std::span<const Tensor* const> constants) {
  if (in.size() < 2 || constants.size() < 2 || !constants[1] || !all_f32(in)) return nullptr;
  GemmDims d = gemm_dims(node, in[0].shape, in[1].shape);
  return std::make_shared<kernels::PackedB>(kernels::pack_b(
      constants[1]->data<float>(), static_cast<size_t>(d.k), static_cast<size_t>(d.n),
      static_cast<size_t>(in[1].shape[1]), d.trans_b ? kernels::BLayout::n_by_k : kernels::BLayout::k_by_n,
      kernels::active_isa(), gemm_precision(node)));
}

int64_t gemm_prepared_bytes(const Node&, std::span<const ValueInfo>, const void* prepared) {
  return int64_t(static_cast<const kernels::PackedB*>(prepared)->bytes());
}

void gemm_run(const Node& node, std::span<const Tensor* const> in, std::span<Tensor* const> out, const Region& r,
              const void* prepared, TileScratch& scratch) {
  std::vector<ValueInfo> infos = infos_of_tensors(in);
  if (!all_f32(infos)) return reference_whole(node, in, out, r);
  check_region(node, r, out[0]->shape());
  GemmDims d = gemm_dims(node, in[0]->shape(), in[1]->shape());
  const float alpha = node.attr_float("alpha", 1.0f), beta = node.attr_float("beta", 1.0f);
  const Tensor* c = optional_input(in, 2);
  std::vector<int64_t> c_strides = c ? broadcast_strides(c->shape(), {d.m, d.n}) : std::vector<int64_t>{};
  const size_t k = static_cast<size_t>(d.k), n = static_cast<size_t>(d.n);
  const size_t rows = static_cast<size_t>(r[0].size()), cols = static_cast<size_t>(r[1].size());
  if (rows == 0 || cols == 0) return;
  GemmWorkspace& w = scratch.get<GemmWorkspace>();
  const float* a = in[0]->data<float>() + r[0].begin * d.k;
  if (d.trans_a) {  // A is [K, M]: gather this tile's rows of A^T
    w.a_rows.resize(rows * k);
    const float* at = in[0]->data<float>();
    for (size_t i = 0; i < rows; ++i)
      for (size_t p = 0; p < k; ++p) w.a_rows[i * k + p] = at[p * static_cast<size_t>(d.m) + r[0].begin + i];
    a = w.a_rows.data();
  }
  float* y = out[0]->data<float>() + r[0].begin * d.n + r[1].begin;
  // alpha 1 and a C that varies only along columns: C is the epilogue's bias.
  const bool c_is_bias = c && alpha == 1.0f && beta == 1.0f && c_strides[0] == 0 && c_strides[1] == 1;
  size_t n0 = 0;
  const kernels::PackedB& pb = b_window(static_cast<const kernels::PackedB*>(prepared), in[1]->data<float>(), k, n,
                                        static_cast<size_t>(r[1].begin), cols, d.trans_b, gemm_precision(node), n0, w);
  kernels::GemmCall call;
  call.m = rows;
  call.a = a;
  call.a_stride = k;
  call.n0 = n0;
  call.n = cols;
  call.c = y;
  call.c_stride = n;
  call.few_rows = static_cast<size_t>(d.m) <= kernels::kFewRows;  // the op's rows: every grid sums alike
  call.epilogue.bias = c_is_bias ? c->data<float>() + r[1].begin : nullptr;
  // A fused residual and activation come after alpha and C: in the kernel's epilogue when
  // those are in it too, else in the loop below.
  const Tensor* residual = optional_input(in, kEpilogueResidualInput);
  const kernels::ActivationParams activation = epilogue_activation(node);
  const bool in_kernel = c_is_bias || (alpha == 1.0f && !c);
  if (in_kernel) {
    call.epilogue.residual = residual ? residual->data<float>() + r[0].begin * d.n + r[1].begin : nullptr;
    call.epilogue.residual_stride = n;
    call.epilogue.activation = activation;
  }
  kernels::gemm(call, pb, w.scratch);
  if (in_kernel) return;
  for (int64_t i = r[0].begin; i < r[0].end; ++i)
    for (int64_t j = r[1].begin; j < r[1].end; ++j) {
      float& value = out[0]->data<float>()[i * d.n + j];
      value *= alpha;
      if (c) value += beta * c->data<float>()[i * c_strides[0] + j * c_strides[1]];
      if (residual) value += residual->data<float>()[i * d.n + j];
      value = kernels::apply_activation(value, activation);
    }
}

std::vector<int64_t> gemm_cuttable(const Node&, std::span<const ValueInfo> in, std::span<const ValueInfo> out) {
  if (!all_f32(in)) return none_cuttable(out[0].shape);
  return weight_aware_cuttable(in[0], in[1], out[0].shape);
}

// A decode step's product (at most kFewRows rows against a constant B bigger than A) is a
// stream of the packed weights, column panel by column panel; a run of whole panels
// computes its columns as the whole tile would and re-reads only A's few rows. So its tiles
// run in pieces of about `piece_bytes` of weights, which an idle core can join.
TilePieces weight_stream_pieces(const Node& node, const ValueInfo& a, const ValueInfo& b, const Shape& out, int64_t m,
                                int64_t k, int64_t piece_bytes) {
  if (out.size() < 2 || k <= 0 || m > static_cast<int64_t>(kernels::kFewRows)) return {};
  const std::vector<int64_t> blocks = weight_aware_cuttable(a, b, out);
  const size_t last = out.size() - 1;
  if (blocks[last - 1] != 0 || blocks[last] <= 0) return {};  // not cut as a weight stream
  // Not with int8 weights: their kernel's set-up per call made the GPT-2 decode step 4% slower
  // in pieces (Zen 5, 2 threads, 6 alternating rounds, every round slower).
  const kernels::Precision precision = gemm_precision(node);
  if (precision == kernels::Precision::int8_weights) return {};
  const int64_t weight_bytes = precision == kernels::Precision::f32 ? 4 : 2;
  const int64_t columns = std::max<int64_t>(1, piece_bytes / (k * weight_bytes));
  return {static_cast<int>(last), (columns + blocks[last] - 1) / blocks[last] * blocks[last]};
}

TilePieces matmul_pieces(const Node& node, std::span<const ValueInfo> in, std::span<const ValueInfo> out,
                         int64_t piece_bytes) {
  if (in.size() < 2 || out.empty() || !all_f32(in)) return {};
  const MatMulDims d = matmul_dims(node, in[0].shape, in[1].shape);
  return weight_stream_pieces(node, in[0], in[1], out[0].shape, d.m, d.k, piece_bytes);
}

TilePieces gemm_pieces(const Node& node, std::span<const ValueInfo> in, std::span<const ValueInfo> out,
                       int64_t piece_bytes) {
  if (in.size() < 2 || out.empty() || !all_f32(in)) return {};
  const GemmDims d = gemm_dims(node, in[0].shape, in[1].shape);
  return weight_stream_pieces(node, in[0], in[1], out[0].shape, d.m, d.k, piece_bytes);
}

}  // namespace matmul_rule

void add_matmul_rules(RuleTable& t) {
  using namespace matmul_rule;
  t["MatMul"] = {matmul_cuttable, matmul_needs, matmul_run, matmul_prepare, matmul_prepared_bytes};
  t["Gemm"] = {gemm_cuttable, gemm_needs, gemm_run, gemm_prepare, gemm_prepared_bytes};
  // B's panels depend on B, its shape and the node's precision only.
  t["MatMul"].prepare_ignores_other_shapes = true;
  t["Gemm"].prepare_ignores_other_shapes = true;
  t["MatMul"].pieces = matmul_pieces;
  t["Gemm"].pieces = gemm_pieces;
}

}  // namespace grove::tiling
