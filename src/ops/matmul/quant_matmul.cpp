// MatMulInteger and QLinearMatMul: numpy-style batched matrix products of 8-bit integers with
// zero points, accumulated exactly in int32 (int64 in the reference, which equals int32 for
// any K below 2^31 / 255^2 ~ 33000). QLinearMatMul requantizes the sums like QLinearConv:
// float32 multiplier a_scale * b_scale / y_scale, round half to even, add y_zero_point, saturate.
#include <string>
#include <vector>

#include "ops/op.h"
#include "ops/op_util.h"
#include "ops/matmul/quant_matmul.h"
#include "ops/quant_util.h"

namespace grove {

// A parameter of A (zero point, scale) is one value or one per row (M entries, shaped [M] or
// [..., M, 1] with unit batch dims); one of B is one value or one per column (N entries).
void check_row_or_column_param(const Shape& param, int64_t count, const char* what) {
  int64_t n = numel(param);
  if (n == 1) return;
  bool row_shaped = param.size() == 1 || (param.size() >= 2 && (param.back() == 1 || param[param.size() - 2] == 1));
  if (n != count || !row_shaped)
    throw Unsupported(std::string(what) + " of shape " + shape_str(param) + " is not supported (a scalar or " +
                      std::to_string(count) + " entries are)");
}

std::vector<int64_t> int_matmul_reference(const IntMatMulShape& s, const Tensor& a, const Tensor& b,
                                          const Tensor* a_zero_point, const Tensor* b_zero_point) {
  std::vector<int64_t> av = a.to_i64(), bv = b.to_i64();
  std::vector<int64_t> za = a_zero_point ? a_zero_point->to_i64() : std::vector<int64_t>{0};
  std::vector<int64_t> zb = b_zero_point ? b_zero_point->to_i64() : std::vector<int64_t>{0};
  const int64_t batches = numel(s.batch);
  const std::vector<int64_t> batch_strides = strides_of(s.batch);
  std::vector<int64_t> y(static_cast<size_t>(batches * s.m * s.n), 0);
  for (int64_t bi = 0; bi < batches; ++bi) {
    int64_t a_off = 0, b_off = 0, rest = bi;
    for (size_t d = 0; d < s.batch.size(); ++d) {
      int64_t coord = rest / batch_strides[d];
      rest %= batch_strides[d];
      a_off += coord * s.a_batch_strides[d];
      b_off += coord * s.b_batch_strides[d];
    }
    for (int64_t i = 0; i < s.m; ++i)
      for (int64_t j = 0; j < s.n; ++j) {
        int64_t acc = 0;
        int64_t zi = za[za.size() == 1 ? 0 : static_cast<size_t>(i)], zj = zb[zb.size() == 1 ? 0 : static_cast<size_t>(j)];
        for (int64_t p = 0; p < s.k; ++p)
          acc += (av[static_cast<size_t>(a_off + i * s.k + p)] - zi) * (bv[static_cast<size_t>(b_off + p * s.n + j)] - zj);
        y[static_cast<size_t>((bi * s.m + i) * s.n + j)] = acc;
      }
  }
  return y;
}

namespace {

void require_8bit(const ValueInfo& v, const char* what) {
  if (v.dtype != DType::u8 && v.dtype != DType::i8)
    throw Unsupported(std::string(what) + " of dtype " + std::string(dtype_name(v.dtype)) +
                      " is not supported (uint8 and int8 are)");
}

void require_same_dtype(const ValueInfo& zero_point, const ValueInfo& of, const char* what) {
  if (zero_point.dtype != of.dtype)
    throw Error(std::string(what) + " is " + std::string(dtype_name(zero_point.dtype)) + ", its tensor is " +
                std::string(dtype_name(of.dtype)));
}

// ---- MatMulInteger(A, B, a_zero_point?, b_zero_point?) -> int32 ----

void infer_matmul_integer(const Node& node, std::span<const ValueInfo> in, std::span<ValueInfo> out) {
  require_inputs(node, in.size(), 2, 4);
  require_8bit(in[0], "A");
  require_8bit(in[1], "B");
  IntMatMulShape s = int_matmul_shape(node, in[0].shape, in[1].shape);
  if (has_input(in, 2)) require_same_dtype(in[2], in[0], "a_zero_point"), check_row_or_column_param(in[2].shape, s.m, "a_zero_point");
  if (has_input(in, 3)) require_same_dtype(in[3], in[1], "b_zero_point"), check_row_or_column_param(in[3].shape, s.n, "b_zero_point");
  out[0] = ValueInfo{DType::i32, s.out_shape};
}

void reference_matmul_integer(const Node& node, std::span<const Tensor* const> in, std::span<Tensor* const> out) {
  IntMatMulShape s = int_matmul_shape(node, in[0]->shape(), in[1]->shape());
  std::vector<int64_t> acc = int_matmul_reference(s, *in[0], *in[1], optional_input(in, 2), optional_input(in, 3));
  int32_t* y = out[0]->data<int32_t>();
  for (size_t i = 0; i < acc.size(); ++i) y[i] = static_cast<int32_t>(acc[i]);
}

// ---- QLinearMatMul(a, a_scale, a_zero_point, b, b_scale, b_zero_point, y_scale, y_zero_point) ----

void infer_qlinear_matmul(const Node& node, std::span<const ValueInfo> in, std::span<ValueInfo> out) {
  require_inputs(node, in.size(), 8, 8);
  for (size_t i : {0, 1, 3, 4, 6})
    if (!in[i].present) throw Error("input " + std::to_string(i) + " is required");
  require_8bit(in[0], "a");
  require_8bit(in[3], "b");
  IntMatMulShape s = int_matmul_shape(node, in[0].shape, in[3].shape);
  for (size_t i : {1, 4, 6})
    if (in[i].dtype != DType::f32) throw Unsupported("scales of dtype " + std::string(dtype_name(in[i].dtype)) + " are not supported (float32 is)");
  check_row_or_column_param(in[1].shape, s.m, "a_scale");
  check_row_or_column_param(in[4].shape, s.n, "b_scale");
  check_row_or_column_param(in[6].shape, 1, "y_scale");
  if (has_input(in, 2)) require_same_dtype(in[2], in[0], "a_zero_point"), check_row_or_column_param(in[2].shape, s.m, "a_zero_point");
  if (has_input(in, 5)) require_same_dtype(in[5], in[3], "b_zero_point"), check_row_or_column_param(in[5].shape, s.n, "b_zero_point");
  DType y_type = has_input(in, 7) ? in[7].dtype : DType::u8;
  if (y_type != DType::u8 && y_type != DType::i8) throw Unsupported("y_zero_point must be uint8 or int8");
  if (has_input(in, 7)) check_row_or_column_param(in[7].shape, 1, "y_zero_point");
  if (in[6].data) check_scales(*in[6].data, "y_scale");
  out[0] = ValueInfo{y_type, s.out_shape};
}

void reference_qlinear_matmul(const Node& node, std::span<const Tensor* const> in, std::span<Tensor* const> out) {
  IntMatMulShape s = int_matmul_shape(node, in[0]->shape(), in[3]->shape());
  check_scales(*in[6], "y_scale");
  std::vector<int64_t> acc = int_matmul_reference(s, *in[0], *in[3], optional_input(in, 2), optional_input(in, 5));
  std::vector<double> a_scale = in[1]->to_f64(), b_scale = in[4]->to_f64();
  float y_scale = in[6]->data<float>()[0];
  const Tensor* y_zp = optional_input(in, 7);
  float zero_point = y_zp ? static_cast<float>(y_zp->to_f64().at(0)) : 0.0f;
  for (size_t idx = 0; idx < acc.size(); ++idx) {
    size_t j = static_cast<size_t>(static_cast<int64_t>(idx) % s.n), i = static_cast<size_t>(static_cast<int64_t>(idx) / s.n % s.m);
    float multiplier = static_cast<float>(a_scale[a_scale.size() == 1 ? 0 : i]) *
                       static_cast<float>(b_scale[b_scale.size() == 1 ? 0 : j]) / y_scale;
    float value = static_cast<float>(acc[idx]) * multiplier;
    if (out[0]->dtype() == DType::i8) out[0]->data<int8_t>()[idx] = saturate_round<int8_t>(value, zero_point);
    else out[0]->data<uint8_t>()[idx] = saturate_round<uint8_t>(value, zero_point);
  }
}

}  // namespace

void register_quant_matmul_ops(OpRegistry& registry) {
  // The integer products count as FLOPs, as ConvInteger's do.
  registry.add("MatMulInteger", {.infer = infer_matmul_integer,
                                 .reference = reference_matmul_integer,
                                 .flops = [](const Node&, std::span<const ValueInfo> in, std::span<const ValueInfo> out) { return matmul_products(in, out); },
                                 .traits = kStaticQuant});
  registry.add("QLinearMatMul", {.infer = infer_qlinear_matmul,
                                 .reference = reference_qlinear_matmul,
                                 .flops = [](const Node&, std::span<const ValueInfo> in, std::span<const ValueInfo> out) { return matmul_products(in, out); },
                                 .traits = kStaticQuant});
}

}  // namespace grove
