// Tile rules of MatMul (numpy batching and broadcasting, 1-D operands) and Gemm, float32:
// cut batch dims, rows (M) and columns (N); a tile reads whole K for its rows of A and its
// columns of B. Each output element sums over k in ascending order from 0, whatever the
// tile, so results do not depend on the grid. The (i, p, j) loop vectorises over j.
#include <algorithm>

#include "ops/op_util.h"
#include "ops/tile_util.h"

namespace grove::tiling {
namespace {

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

std::vector<int64_t> matmul_cuttable(const Node&, std::span<const ValueInfo> in, std::span<const ValueInfo> out) {
  return all_f32(in) ? all_cuttable(out[0].shape) : none_cuttable(out[0].shape);
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
}

void matmul_run(const Node& node, std::span<const Tensor* const> in, std::span<Tensor* const> out, const Region& r) {
  std::vector<ValueInfo> infos = infos_of_tensors(in);
  if (!all_f32(infos)) return reference_whole(node, in, out, r);
  check_region(node, r, out[0]->shape());
  MatMulDims d = matmul_dims(node, in[0]->shape(), in[1]->shape());
  MatMulRegion s = split_region(d, r);
  const std::vector<int64_t> a_strides = broadcast_strides(d.a_batch, d.batch);
  const std::vector<int64_t> b_strides = broadcast_strides(d.b_batch, d.batch);
  const float* a = in[0]->data<float>();
  const float* b = in[1]->data<float>();
  float* y = out[0]->data<float>();
  const int64_t cols = s.cols.size();
  std::vector<float> acc(static_cast<size_t>(std::max<int64_t>(cols, 0)));
  // One pass per batch index of the region: a trailing unit dim makes each "row" one matrix.
  Shape batch_shape = d.batch;
  batch_shape.push_back(1);
  Region batch_region = s.batch;
  batch_region.push_back({0, 1});
  for_each_row(batch_shape, batch_region, [&](int64_t y_off, const std::vector<int64_t>& index) {
    int64_t a_off = 0, b_off = 0;
    for (size_t i = 0; i < d.batch.size(); ++i) a_off += index[i] * a_strides[i], b_off += index[i] * b_strides[i];
    const float* a_mat = a + a_off * d.m * d.k;
    const float* b_mat = b + b_off * d.k * d.n;
    float* y_mat = y + y_off * d.m * d.n;
    for (int64_t i = s.rows.begin; i < s.rows.end; ++i) {
      std::fill(acc.begin(), acc.end(), 0.0f);
      for (int64_t p = 0; p < d.k; ++p) {
        const float av = a_mat[i * d.k + p];
        const float* b_row = b_mat + p * d.n + s.cols.begin;
        for (int64_t j = 0; j < cols; ++j) acc[static_cast<size_t>(j)] += av * b_row[j];
      }
      std::copy(acc.begin(), acc.end(), y_mat + i * d.n + s.cols.begin);
    }
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
}

void gemm_run(const Node& node, std::span<const Tensor* const> in, std::span<Tensor* const> out, const Region& r) {
  std::vector<ValueInfo> infos = infos_of_tensors(in);
  if (!all_f32(infos)) return reference_whole(node, in, out, r);
  check_region(node, r, out[0]->shape());
  GemmDims d = gemm_dims(node, in[0]->shape(), in[1]->shape());
  const float alpha = node.attr_float("alpha", 1.0f), beta = node.attr_float("beta", 1.0f);
  const Tensor* c = optional_input(in, 2);
  std::vector<int64_t> c_strides = c ? broadcast_strides(c->shape(), {d.m, d.n}) : std::vector<int64_t>{};
  const float* a = in[0]->data<float>();
  const float* b = in[1]->data<float>();
  float* y = out[0]->data<float>();
  const int64_t cols = r[1].size();
  std::vector<float> acc(static_cast<size_t>(std::max<int64_t>(cols, 0)));
  for (int64_t i = r[0].begin; i < r[0].end; ++i) {
    if (d.trans_b) {  // B is [N, K]: a dot product per column over contiguous rows of B
      for (int64_t j = 0; j < cols; ++j) {
        const float* b_row = b + (r[1].begin + j) * d.k;
        float sum = 0;
        for (int64_t p = 0; p < d.k; ++p) sum += (d.trans_a ? a[p * d.m + i] : a[i * d.k + p]) * b_row[p];
        acc[static_cast<size_t>(j)] = sum;
      }
    } else {
      std::fill(acc.begin(), acc.end(), 0.0f);
      for (int64_t p = 0; p < d.k; ++p) {
        const float av = d.trans_a ? a[p * d.m + i] : a[i * d.k + p];
        const float* b_row = b + p * d.n + r[1].begin;
        for (int64_t j = 0; j < cols; ++j) acc[static_cast<size_t>(j)] += av * b_row[j];
      }
    }
    for (int64_t j = 0; j < cols; ++j) {
      float value = alpha * acc[static_cast<size_t>(j)];
      if (c) value += beta * c->data<float>()[i * c_strides[0] + (r[1].begin + j) * c_strides[1]];
      y[i * d.n + r[1].begin + j] = value;
    }
  }
}

std::vector<int64_t> gemm_cuttable(const Node&, std::span<const ValueInfo> in, std::span<const ValueInfo> out) {
  return all_f32(in) ? all_cuttable(out[0].shape) : none_cuttable(out[0].shape);
}

}  // namespace

void add_matmul_rules(RuleTable& t) {
  t["MatMul"] = {matmul_cuttable, matmul_needs, matmul_run};
  t["Gemm"] = {gemm_cuttable, gemm_needs, gemm_run};
}

}  // namespace grove::tiling
