// Tile rules of MatMulInteger and QLinearMatMul: cut by batch dims and rows of A; a tile
// reads its rows of A, all of B, and runs the integer GEMM (kernels/igemm.h), which gives the
// int64 reference's exact sums (int32 wrap-around aside), so any cut gives the same bits;
// QLinearMatMul then requantizes them as its reference does.
#include <cstdlib>
#include <limits>
#include <memory>

#include "kernels/igemm.h"
#include "kernels/qgemm.h"
#include "ops/op_util.h"
#include "ops/matmul/quant_matmul.h"
#include "ops/quant_util.h"
#include "ops/tile_util.h"

namespace grove::tiling {
namespace quant_matmul_rule {

// A worker's buffers for the integer MatMul rules: the GEMM's packing, int32 sums, rows of a
// flipped to unsigned, the per-column requantization terms.
struct QuantMatMulScratch {
  kernels::IntGemmScratch gemm;
  kernels::U8GemmScratch u8_gemm;
  std::vector<int32_t> sums, add;
  std::vector<float> multiplier;
  std::vector<uint8_t> rows;
};

// The output region as batch ranges, a row range and a column range (1-D A or B: no such dim).
struct IntMatMulRegion {
  Region batch;
  Range rows{0, 1}, cols{0, 1};
};

IntMatMulRegion split(const IntMatMulShape& s, const Shape& a, const Shape& b, const Region& r) {
  IntMatMulRegion out;
  out.batch.assign(r.begin(), r.begin() + static_cast<std::ptrdiff_t>(s.batch.size()));
  size_t at = s.batch.size();
  if (a.size() > 1) out.rows = r[at++];
  out.cols = b.size() > 1 ? r[at] : Range{0, 1};
  return out;
}

std::vector<int64_t> cuttable(const Node&, std::span<const ValueInfo> in, std::span<const ValueInfo> out) {
  std::vector<int64_t> blocks = all_cuttable(out[0].shape);
  if (in[1].shape.size() > 1 && !blocks.empty()) blocks.back() = 0;  // columns stay whole: one panel pass per tile
  return blocks;
}

void needs(const Node& node, std::span<const ValueInfo> in, std::span<const ValueInfo>, const Region& out_region,
           std::span<Region> in_regions) {
  IntMatMulShape s = int_matmul_shape(node, in[0].shape, in[1].shape);
  IntMatMulRegion r = split(s, in[0].shape, in[1].shape, out_region);
  Shape a_batch(in[0].shape.begin(), in[0].shape.end() - std::min<std::ptrdiff_t>(2, in[0].shape.size()));
  Shape b_batch(in[1].shape.begin(), in[1].shape.end() - std::min<std::ptrdiff_t>(2, in[1].shape.size()));
  Region a = broadcast_region(a_batch, r.batch), b = broadcast_region(b_batch, r.batch);
  if (in[0].shape.size() > 1) a.push_back(r.rows);
  a.push_back({0, s.k});
  b.push_back({0, s.k});
  if (in[1].shape.size() > 1) b.push_back({0, s.n});
  in_regions[0] = a;
  in_regions[1] = b;
  for (size_t i = 2; i < in.size(); ++i)
    if (has_input(in, i)) in_regions[i] = full_region(in[i].shape);
}

std::vector<int32_t> zero_points(const Tensor* t) {
  std::vector<int32_t> z;
  if (t)
    for (int64_t v : t->to_i64()) z.push_back(static_cast<int32_t>(v));
  return z;
}

// Runs the integer GEMM for every matrix of the region: `block(call, first_output_row)` gets
// the call with A, B and the zero points set for the region's rows (it sets c and runs it);
// first_output_row is the row index, in the output seen as [batch * m, n], of the block's row 0.
template <class Block>
void for_each_block(const Node& node, const Tensor& a, const Tensor& b, const Tensor* a_zero, const Tensor* b_zero,
                    const Region& out_region, Block&& block) {
  IntMatMulShape s = int_matmul_shape(node, a.shape(), b.shape());
  IntMatMulRegion r = split(s, a.shape(), b.shape(), out_region);
  const std::vector<int32_t> za = zero_points(a_zero), zb = zero_points(b_zero);

  kernels::IntGemmCall call;
  call.m = static_cast<size_t>(r.rows.size());
  call.n = static_cast<size_t>(s.n);
  call.k = static_cast<size_t>(s.k);
  call.a_stride = call.k;
  call.a_signed = a.dtype() == DType::i8;
  call.b_stride = call.n;
  call.b_signed = b.dtype() == DType::i8;
  call.a_zero_per_row = za.size() > 1;
  call.a_zero = za.empty() ? nullptr : za.data() + (call.a_zero_per_row ? r.rows.begin : 0);
  call.b_zero_per_column = zb.size() > 1;
  call.b_zero = zb.empty() ? nullptr : zb.data();
  call.c_stride = call.n;

  const auto* a_bytes = reinterpret_cast<const uint8_t*>(a.raw());
  const auto* b_bytes = reinterpret_cast<const uint8_t*>(b.raw());
  const std::vector<int64_t> out_batch_strides = strides_of(s.batch);
  Shape region_batch;
  for (const Range& x : r.batch) region_batch.push_back(x.size());
  const int64_t batches = numel(region_batch);
  for (int64_t bi = 0; bi < batches; ++bi) {
    int64_t rest = bi, a_off = 0, b_off = 0, out_index = 0;
    for (size_t d = r.batch.size(); d-- > 0;) {
      int64_t at = r.batch[d].begin + rest % region_batch[d];
      rest /= region_batch[d];
      a_off += at * s.a_batch_strides[d];
      b_off += at * s.b_batch_strides[d];
      out_index += at * out_batch_strides[d];
    }
    call.a = a_bytes + a_off + r.rows.begin * s.k;
    call.b = b_bytes + b_off;
    block(call, out_index * s.m + r.rows.begin);
  }
}

// A constant 2-D B (and its zero point) packed once at plan time into the GEMM's panels.
std::shared_ptr<const void> prepare_b(std::span<const ValueInfo> in, std::span<const Tensor* const> constants,
                                      size_t b_index, size_t zero_index) {
  if (constants.size() <= b_index || !constants[b_index] || in[b_index].shape.size() != 2) return nullptr;
  const bool has_zero = has_input(in, zero_index);
  if (has_zero && (constants.size() <= zero_index || !constants[zero_index])) return nullptr;
  const Tensor& b = *constants[b_index];
  const std::vector<int32_t> zero = zero_points(has_zero ? constants[zero_index] : nullptr);
  kernels::IntGemmCall call;
  call.k = static_cast<size_t>(b.dim(0));
  call.n = static_cast<size_t>(b.dim(1));
  call.b = b.raw();
  call.b_stride = call.n;
  call.b_signed = b.dtype() == DType::i8;
  call.b_zero = zero.empty() ? nullptr : zero.data();
  call.b_zero_per_column = zero.size() > 1;
  auto panels = std::make_shared<kernels::IntPanels>();
  kernels::pack_b_panels(call, *panels);
  return panels;
}

void gemm(kernels::IntGemmCall& call, const void* prepared, kernels::IntGemmScratch& scratch) {
  if (prepared) kernels::int_gemm_panels(call, *static_cast<const kernels::IntPanels*>(prepared), scratch);
  else kernels::int_gemm(call, scratch);
}

void run_tile(const Node& node, std::span<const Tensor* const> in, std::span<Tensor* const> out, const Region& out_region,
              const void* prepared, TileScratch& scratch) {
  Tensor& y = *out[0];
  check_region(node, out_region, y.shape());
  kernels::IntGemmScratch& gemm_scratch = scratch.get<QuantMatMulScratch>().gemm;
  for_each_block(node, *in[0], *in[1], optional_input(in, 2), optional_input(in, 3), out_region,
                 [&](kernels::IntGemmCall& call, int64_t first_row) {
                   call.c = y.data<int32_t>() + first_row * static_cast<int64_t>(call.n);
                   gemm(call, prepared, gemm_scratch);
                 });
}

// ---- QLinearMatMul(a, a_scale, a_zero_point, b, b_scale, b_zero_point, y_scale, y_zero_point) ----
// The same sums per block, requantized as reference_qlinear_matmul does.

bool zero_points_all_zero(const Tensor* t);

// Whether prepare takes the 8-bit kernel (VNNI, constant int8 B with zero points 0, 8-bit a).
bool takes_s8_kernel(std::span<const ValueInfo> in, const Tensor* b, const Tensor* b_zero, bool b_zero_known) {
  return kernels::isa_supports_avx512_vnni() && b && b->rank() == 2 && b->dtype() == DType::i8 && b_zero_known &&
         zero_points_all_zero(b_zero) && (in[0].dtype == DType::u8 || in[0].dtype == DType::i8);
}

// On the 8-bit kernel a tile may take a slice of B's columns (whole panel pairs): where the
// weights outweigh the activations (BERT at batch 1, a classifier's last layer) columns are
// cut instead of rows, so each tile streams its own slice of the weights, not all of them
// (tile_util.h cut_weights_first). B is input b_index, its zero point input zero_index.
std::vector<int64_t> s8_cuttable(const Node& node, std::span<const ValueInfo> in, std::span<const ValueInfo> out,
                                 size_t b_index, size_t zero_index) {
  const ValueInfo ab[] = {in[0], in[b_index]};
  std::vector<int64_t> blocks = cuttable(node, ab, out);
  const bool zero_known = !has_input(in, zero_index) || in[zero_index].data;
  if (!takes_s8_kernel(in, in[b_index].data, has_input(in, zero_index) ? in[zero_index].data : nullptr, zero_known) ||
      in[0].shape.size() < 2 || out[0].shape.size() < 2 || !cut_weights_first(numel(in[b_index].shape), numel(in[0].shape)))
    return blocks;
  blocks[out[0].shape.size() - 2] = 0;
  blocks.back() = 2 * static_cast<int64_t>(kernels::U8Panels::kWidth);
  return blocks;
}

std::vector<int64_t> qlinear_cuttable(const Node& node, std::span<const ValueInfo> in, std::span<const ValueInfo> out) {
  return s8_cuttable(node, in, out, 3, 5);
}

void qlinear_needs(const Node& node, std::span<const ValueInfo> in, std::span<const ValueInfo> out, const Region& out_region,
                   std::span<Region> in_regions) {
  const ValueInfo ab[] = {in[0], in[3]};
  Region ab_regions[2];
  needs(node, ab, out, out_region, ab_regions);
  for (size_t i = 0; i < in.size(); ++i)
    if (has_input(in, i)) in_regions[i] = full_region(in[i].shape);
  in_regions[0] = ab_regions[0];
  in_regions[3] = ab_regions[1];
}

template <class Q>
void requantize_rows(std::span<const Tensor* const> in, const int32_t* sums, int64_t rows, int64_t n, int64_t first_row,
                     int64_t m, Range cols, Q* y) {
  const std::vector<double> a_scale = in[1]->to_f64(), b_scale = in[4]->to_f64();
  const float y_scale = in[6]->data<float>()[0];
  const Tensor* y_zero = optional_input(in, 7);
  const float zero_point = y_zero ? static_cast<float>(y_zero->to_f64().at(0)) : 0.0f;
  for (int64_t r = 0; r < rows; ++r) {
    const size_t i = static_cast<size_t>((first_row + r) % m);  // row within its matrix
    for (int64_t j = cols.begin; j < cols.end; ++j) {
      const float multiplier = static_cast<float>(a_scale[a_scale.size() == 1 ? 0 : i]) *
                               static_cast<float>(b_scale[b_scale.size() == 1 ? 0 : static_cast<size_t>(j)]) / y_scale;
      y[(first_row + r) * n + j] = saturate_round<Q>(static_cast<float>(sums[r * n + j]) * multiplier, zero_point);
    }
  }
}

// QLinearMatMul's constant B: on a VNNI CPU, int8 with zero points 0 goes to the 8-bit kernel
// (kernels/qgemm.h u8s8_gemm_requantize: B's bytes in panels, plus its column sums for
// a's zero point); otherwise the int16 panels of prepare_b.
struct QLinearWeights {
  std::shared_ptr<const void> int16;  // kernels::IntPanels, or null on the 8-bit path
  kernels::U8Panels s8;               // B's int8 bytes in the kernel's panel layout
  std::vector<int32_t> column_sums;
};

bool zero_points_all_zero(const Tensor* t) {
  if (!t) return true;
  for (int64_t v : t->to_i64())
    if (v != 0) return false;
  return true;
}

// B (input b_index, its zero point zero_index) in the 8-bit kernel's panels with its column
// sums where takes_s8_kernel, else in the int16 panels of prepare_b; null where B is not a
// constant 2-D matrix.
std::shared_ptr<const void> prepare_weights(std::span<const ValueInfo> in, std::span<const Tensor* const> constants,
                                            size_t b_index, size_t zero_index) {
  auto w = std::make_shared<QLinearWeights>();
  const Tensor* b = constants.size() > b_index ? constants[b_index] : nullptr;
  const bool zero_known = !has_input(in, zero_index) || (constants.size() > zero_index && constants[zero_index]);
  if (takes_s8_kernel(in, b, has_input(in, zero_index) ? constants[zero_index] : nullptr, zero_known)) {
    const auto k = static_cast<size_t>(b->dim(0)), n = static_cast<size_t>(b->dim(1));
    kernels::pack_u8_panels(reinterpret_cast<const uint8_t*>(b->raw()), n, k, n, 0, w->s8);
    w->column_sums.assign(n, 0);
    for (size_t p = 0; p < k; ++p)
      for (size_t j = 0; j < n; ++j) w->column_sums[j] += b->data<int8_t>()[p * n + j];
    return w;
  }
  w->int16 = prepare_b(in, constants, b_index, zero_index);
  return w->int16 ? std::static_pointer_cast<const void>(w) : nullptr;
}

std::shared_ptr<const void> qlinear_prepare(const Node&, std::span<const ValueInfo> in,
                                            std::span<const Tensor* const> constants) {
  return prepare_weights(in, constants, 3, 5);
}

// The per-column add of the 8-bit kernel for a's zero point (its XOR 0x80 shift included):
// -zero * column sum. False where a sum plus it could pass int32.
bool zero_point_adds(const QLinearWeights& w, int32_t zero, std::vector<int32_t>& add) {
  add.resize(w.s8.n);
  for (size_t j = 0; j < w.s8.n; ++j) {
    const int64_t value = -int64_t{zero} * w.column_sums[j];
    if (std::abs(value) + static_cast<int64_t>(w.s8.k) * 255 * 128 > std::numeric_limits<int32_t>::max()) return false;
    add[j] = static_cast<int32_t>(value);
  }
  return true;
}

// a's m rows of k bytes as the 8-bit kernel reads them: in place where they are already
// uint8 rows of whole quads, else copied into `rows` padded to k4 (and XOR 0x80 when int8).
const uint8_t* kernel_rows(const uint8_t* a, size_t m, size_t k, size_t k4, bool is_signed, std::vector<uint8_t>& rows) {
  if (!is_signed && k == k4) return a;
  const uint8_t flip = is_signed ? 0x80 : 0;
  rows.resize(m * k4);
  for (size_t t = 0; t < m; ++t) {
    uint8_t* row = rows.data() + t * k4;
    for (size_t p = 0; p < k; ++p) row[p] = a[t * k + p] ^ flip;
    std::fill(row + k, row + k4, uint8_t{0});
  }
  return rows.data();
}

int64_t qlinear_prepared_bytes(const Node&, std::span<const ValueInfo>, const void* prepared) {
  const auto& w = *static_cast<const QLinearWeights*>(prepared);
  const auto* int16 = static_cast<const kernels::IntPanels*>(w.int16.get());
  return static_cast<int64_t>((int16 ? int16->values.size() * sizeof(int16_t) : 0) + w.s8.values.size() +
                              w.column_sums.size() * sizeof(int32_t));
}

// The 8-bit path for the blocks of one tile: a's rows padded to whole quads (and XOR 0x80
// when int8), the kernel with per-column requantization straight into y. False where a's
// scale or zero point is per row, or the sums could pass int32: the int16 path then runs.
bool qlinear_s8(const Node& node, std::span<const Tensor* const> in, const QLinearWeights& w, const Region& out_region,
                Tensor& y, QuantMatMulScratch& ws) {
  const Tensor* a_zero = optional_input(in, 2);
  if (in[1]->numel() != 1 || (a_zero && a_zero->numel() != 1)) return false;
  const bool is_signed = in[0]->dtype() == DType::i8;
  const int32_t zero = (a_zero ? static_cast<int32_t>(a_zero->to_i64()[0]) : 0) + (is_signed ? 128 : 0);
  const size_t n = w.s8.n, k = w.s8.k, k4 = w.s8.quads * 4;
  if (!zero_point_adds(w, zero, ws.add)) return false;
  std::vector<float>& multiplier = ws.multiplier;
  multiplier.resize(n);
  const float a_scale = static_cast<float>(in[1]->to_f64()[0]), y_scale = in[6]->data<float>()[0];
  const std::vector<double> b_scale = in[4]->to_f64();
  for (size_t j = 0; j < n; ++j) multiplier[j] = a_scale * static_cast<float>(b_scale[b_scale.size() == 1 ? 0 : j]) / y_scale;
  kernels::ColumnRequantize rq;
  rq.add = ws.add.data();
  rq.multiplier = multiplier.data();
  const Tensor* y_zero = optional_input(in, 7);
  rq.zero_point = y_zero ? static_cast<float>(y_zero->to_f64().at(0)) : 0.0f;
  rq.is_signed = y.dtype() == DType::i8;
  rq.lo = rq.is_signed ? -128.0f : 0.0f, rq.hi = rq.is_signed ? 127.0f : 255.0f;
  rq.y_stride = n;
  const Range cols = out_region.back();
  if (in[3]->rank() > 1) rq.col_begin = static_cast<size_t>(cols.begin), rq.col_end = static_cast<size_t>(cols.end);
  rq.scratch = &ws.u8_gemm;
  for_each_block(node, *in[0], *in[3], a_zero, optional_input(in, 5), out_region,
                 [&](kernels::IntGemmCall& call, int64_t first_row) {
                   rq.y = reinterpret_cast<uint8_t*>(y.raw()) + first_row * static_cast<int64_t>(n) +
                          static_cast<int64_t>(rq.col_begin);
                   const uint8_t* rows = kernel_rows(static_cast<const uint8_t*>(call.a), call.m, k, k4, is_signed, ws.rows);
                   kernels::u8s8_gemm_requantize(rows, call.m, rows == call.a ? k : k4, w.s8, rq);
                 });
  return true;
}

void qlinear_run_tile(const Node& node, std::span<const Tensor* const> in, std::span<Tensor* const> out,
                      const Region& out_region, const void* prepared, TileScratch& scratch) {
  Tensor& y = *out[0];
  check_region(node, out_region, y.shape());
  check_scales(*in[6], "y_scale");
  const auto* weights = static_cast<const QLinearWeights*>(prepared);
  QuantMatMulScratch& ws = scratch.get<QuantMatMulScratch>();
  if (weights && !weights->int16 && qlinear_s8(node, in, *weights, out_region, y, ws)) return;
  prepared = weights ? weights->int16.get() : nullptr;
  const int64_t m = int_matmul_shape(node, in[0]->shape(), in[3]->shape()).m;
  std::vector<int32_t>& sums = ws.sums;
  for_each_block(node, *in[0], *in[3], optional_input(in, 2), optional_input(in, 5), out_region,
                 [&](kernels::IntGemmCall& call, int64_t first_row) {
                   sums.resize(call.m * call.n);
                   call.c = sums.data();
                   gemm(call, prepared, ws.gemm);
                   const auto rows = static_cast<int64_t>(call.m), n = static_cast<int64_t>(call.n);
                   // Every column is summed; only the tile's (a column cut, qlinear_cuttable) are written.
                   const Range cols = in[3]->rank() > 1 ? out_region.back() : Range{0, n};
                   if (y.dtype() == DType::i8) requantize_rows(in, sums.data(), rows, n, first_row, m, cols, y.data<int8_t>());
                   else requantize_rows(in, sums.data(), rows, n, first_row, m, cols, y.data<uint8_t>());
                 });
}

// ---- MatMulInteger on the 8-bit kernel ----
// A constant int8 B with zero points 0 and an 8-bit a (ONNX Runtime's dynamic quantization,
// and the integer Gemm of fuse_qdq.cpp) take the VNNI kernel with int32 output: B's bytes in
// panels (a quarter of the int16 panels' reads) and its columns cut where they outweigh a.

std::vector<int64_t> integer_cuttable(const Node& node, std::span<const ValueInfo> in, std::span<const ValueInfo> out) {
  return s8_cuttable(node, in, out, 1, 3);
}

std::shared_ptr<const void> integer_prepare(const Node&, std::span<const ValueInfo> in,
                                            std::span<const Tensor* const> constants) {
  return prepare_weights(in, constants, 1, 3);
}

// The 8-bit path of one tile, as qlinear_s8 without the requantization: false where a's zero
// point is per row or the sums could pass int32 (the int16 path then runs).
bool integer_s8(const Node& node, std::span<const Tensor* const> in, const QLinearWeights& w, const Region& out_region,
                Tensor& y, QuantMatMulScratch& ws) {
  const Tensor* a_zero = optional_input(in, 2);
  if (a_zero && a_zero->numel() != 1) return false;
  const bool is_signed = in[0]->dtype() == DType::i8;
  const int32_t zero = (a_zero ? static_cast<int32_t>(a_zero->to_i64()[0]) : 0) + (is_signed ? 128 : 0);
  const size_t n = w.s8.n, k = w.s8.k, k4 = w.s8.quads * 4;
  if (!zero_point_adds(w, zero, ws.add)) return false;
  const Range cols = in[1]->rank() > 1 ? out_region.back() : Range{0, static_cast<int64_t>(n)};
  for_each_block(node, *in[0], *in[1], a_zero, optional_input(in, 3), out_region,
                 [&](kernels::IntGemmCall& call, int64_t first_row) {
                   int32_t* c = y.data<int32_t>() + first_row * static_cast<int64_t>(n) + cols.begin;
                   const uint8_t* rows = kernel_rows(static_cast<const uint8_t*>(call.a), call.m, k, k4, is_signed, ws.rows);
                   kernels::u8s8_gemm_int32(rows, call.m, rows == call.a ? k : k4, w.s8, ws.add.data(),
                                            static_cast<size_t>(cols.begin), static_cast<size_t>(cols.end), c, n);
                 });
  return true;
}

void integer_run_tile(const Node& node, std::span<const Tensor* const> in, std::span<Tensor* const> out,
                      const Region& out_region, const void* prepared, TileScratch& scratch) {
  Tensor& y = *out[0];
  check_region(node, out_region, y.shape());
  const auto* weights = static_cast<const QLinearWeights*>(prepared);
  QuantMatMulScratch& ws = scratch.get<QuantMatMulScratch>();
  if (weights && !weights->int16 && integer_s8(node, in, *weights, out_region, y, ws)) return;
  prepared = weights ? weights->int16.get() : nullptr;
  const Range cols = in[1]->rank() > 1 ? out_region.back() : Range{0, 1};
  const int64_t n = in[1]->rank() > 1 ? in[1]->dim(in[1]->rank() - 1) : 1;
  if (cols.size() == n) return run_tile(node, in, out, out_region, prepared, scratch);
  // A column cut (integer_cuttable) whose tile cannot take the 8-bit kernel: every column is
  // summed, and only the tile's are written.
  for_each_block(node, *in[0], *in[1], optional_input(in, 2), optional_input(in, 3), out_region,
                 [&](kernels::IntGemmCall& call, int64_t first_row) {
                   ws.sums.resize(call.m * call.n);
                   call.c = ws.sums.data();
                   gemm(call, prepared, ws.gemm);
                   for (size_t t = 0; t < call.m; ++t)
                     std::copy(ws.sums.begin() + static_cast<int64_t>(t * call.n) + cols.begin,
                               ws.sums.begin() + static_cast<int64_t>(t * call.n) + cols.end,
                               y.data<int32_t>() + (first_row + static_cast<int64_t>(t)) * n + cols.begin);
                 });
}

}  // namespace quant_matmul_rule

void add_quant_matmul_rules(RuleTable& t) {
  using namespace quant_matmul_rule;
  t["MatMulInteger"] = TileRule{integer_cuttable, needs, integer_run_tile, integer_prepare, qlinear_prepared_bytes};
  t["QLinearMatMul"] = TileRule{qlinear_cuttable, qlinear_needs, qlinear_run_tile, qlinear_prepare, qlinear_prepared_bytes};
}

}  // namespace grove::tiling
