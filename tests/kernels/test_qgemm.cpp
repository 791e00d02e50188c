// Tester for the 8-bit GEMM (kernels/qgemm.h): the scalar loops and, where the CPU has
// AVX512_VNNI, the vpdpbusd kernel against an int64 oracle on the unpacked matrices, bit for
// bit, over every row remainder of the 14-row block, every column remainder of the 16-column
// panel (one panel and two), k not a multiple of 4, extreme bytes, strides wider than a row,
// and int8 B through the XOR 0x80 flip.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <chrono>
#include <cstdio>
#include <random>
#include <vector>

#include "grove/error.h"
#include "kernels/qgemm.h"

namespace grove::kernels {
namespace {

struct Case {
  size_t m, n, k;
};

// A int8 (m x k, stride k + 3), B bytes (k x n, stride n + 5); B is uint8 unless `b_signed`.
void check(const Case& s, bool b_signed, bool extreme, unsigned seed, Isa isa) {
  std::mt19937 rng(seed);
  std::uniform_int_distribution<int> byte(0, 255);
  auto draw = [&] { return extreme ? (byte(rng) & 1 ? 255 : 0) : byte(rng); };
  const size_t a_stride = s.k + 3, b_stride = s.n + 5;
  std::vector<int8_t> a(s.m * a_stride);
  std::vector<uint8_t> b(s.k * b_stride);
  for (auto& v : a) v = static_cast<int8_t>(draw() - 128);
  for (auto& v : b) v = static_cast<uint8_t>(draw());
  PackedS8 pa;
  pack_s8(a.data(), s.m, s.k, a_stride, pa);
  U8Panels pb;
  pack_u8_panels(b.data(), b_stride, s.k, s.n, b_signed ? 0x80 : 0, pb);
  std::vector<int32_t> c(s.m * (s.n + 2), -7);
  // All rows, or from the second block on (a tile of output channels).
  const RowRange rows{s.m > PackedS8::kRows && seed % 2 ? PackedS8::kRows : 0, s.m};
  s8u8_gemm(pa, rows, pb, c.data() + rows.begin * (s.n + 2), s.n + 2, isa);
  for (size_t i = 0; i < s.m; ++i) {
    int64_t row_sum = 0;
    for (size_t p = 0; p < s.k; ++p) row_sum += a[i * a_stride + p];
    ASSERT_EQ(pa.row_sums[i], row_sum) << "row " << i;
    for (size_t j = 0; j < s.n + 2; ++j) {
      if (j >= s.n || i < rows.begin) {
        ASSERT_EQ(c[i * (s.n + 2) + j], -7) << "wrote outside rows [" << rows.begin << ", " << s.m << ") x " << s.n;
        continue;
      }
      int64_t want = 0;
      for (size_t p = 0; p < s.k; ++p) {
        const int64_t bv = b_signed ? static_cast<int8_t>(b[p * b_stride + j]) + 128 : b[p * b_stride + j];
        want += int64_t{a[i * a_stride + p]} * bv;
      }
      ASSERT_EQ(c[i * (s.n + 2) + j], want) << isa_name(isa) << " m=" << s.m << " n=" << s.n << " k=" << s.k
                                            << " at " << i << "," << j;
    }
  }
}

// `count` random bytes.
std::vector<uint8_t> random_bytes(size_t count, std::mt19937& rng) {
  std::vector<uint8_t> v(count);
  for (auto& b : v) b = static_cast<uint8_t>(rng());
  return v;
}

std::vector<Isa> isas() {
  std::vector<Isa> out{Isa::scalar};
  if (isa_supports_avx512_vnni()) out.push_back(Isa::avx512);
  return out;
}

TEST(QGemm, MatchesOracleOverOddSizes) {
  unsigned seed = 1;
  for (Isa isa : isas())
    for (size_t m : {1, 5, 13, 14, 15, 29, 64})
      for (size_t n : {1, 15, 16, 17, 31, 32, 33, 49, 70})
        for (size_t k : {1, 3, 4, 9, 64, 147})
          for (bool b_signed : {false, true}) check({m, n, k}, b_signed, false, seed++, isa);
}

// u8s8_gemm_requantize (QLinearMatMul's orientation): the vpdpbusd kernel against the
// scalar loops, bit for bit, over row and column remainders, per-column add and multiplier,
// both output dtypes.
TEST(QGemm, RowsTimesPanelsRequantizeLikeScalar) {
  if (!isa_supports_avx512_vnni()) GTEST_SKIP() << "no AVX512_VNNI";
  unsigned seed = 40;
  for (size_t rows : {1, 13, 14, 15, 30})
    for (size_t n : {1, 16, 17, 33, 64})
      for (size_t k : {4, 12, 100})
        for (bool is_signed : {false, true}) {
          std::mt19937 rng(seed++);
          const size_t k4 = (k + 3) / 4 * 4, x_stride = k4 + 8;
          std::vector<uint8_t> x(rows * x_stride, 0), w(k * n);
          for (size_t t = 0; t < rows; ++t)
            for (size_t p = 0; p < k; ++p) x[t * x_stride + p] = static_cast<uint8_t>(rng());
          for (auto& v : w) v = static_cast<uint8_t>(rng());
          U8Panels panels;
          pack_u8_panels(w.data(), n, k, n, 0, panels);
          std::vector<int32_t> add(n);
          std::vector<float> multiplier(n);
          for (size_t j = 0; j < n; ++j) add[j] = static_cast<int32_t>(rng() % 20001) - 10000, multiplier[j] = 0.0003f * static_cast<float>(j + 1);
          std::vector<uint8_t> want(rows * (n + 3), 7), got(rows * (n + 3), 7);
          ColumnRequantize r;
          r.add = add.data(), r.multiplier = multiplier.data(), r.zero_point = is_signed ? 3.0f : 100.0f;
          r.is_signed = is_signed, r.lo = is_signed ? -128.0f : 0.0f, r.hi = is_signed ? 127.0f : 255.0f;
          r.y_stride = n + 3;
          r.y = want.data();
          u8s8_gemm_requantize(x.data(), rows, x_stride, panels, r, Isa::scalar);
          r.y = got.data();
          u8s8_gemm_requantize(x.data(), rows, x_stride, panels, r, Isa::avx512);
          ASSERT_EQ(got, want) << "rows " << rows << " n " << n << " k " << k;
        }
}

// The two AVX-512 kernels of u8s8_gemm_requantize called by name (isa avx512 picks AMX where
// the CPU has it, so this keeps the VNNI one tested there too), against the scalar loops bit
// for bit: k around the AMX step of 64 (a partial last quad group, padded by the kernel),
// rows around its 32-row blocks, odd panel counts, column ranges and the residual add.
TEST(QGemm, AmxAndVnniKernelsRequantizeLikeScalar) {
  if (!isa_supports_avx512_vnni()) GTEST_SKIP() << "no AVX512_VNNI";
  using Kernel = void (*)(const uint8_t*, size_t, size_t, const U8Panels&, const ColumnRequantize&);
  std::vector<std::pair<const char*, Kernel>> kernels = {{"vnni", u8s8_gemm_requantize_avx512vnni}};
  if (isa_supports_amx_int8()) kernels.push_back({"amx", u8s8_gemm_requantize_amx});
  unsigned seed = 500;
  for (size_t rows : {1, 16, 31, 32, 33, 70})
    for (size_t n : {1, 17, 32, 48, 100})
      for (size_t k : {1, 4, 63, 64, 65, 200}) {
        std::mt19937 rng(seed++);
        const size_t k4 = (k + 3) / 4 * 4, x_stride = k4 + 5, stride = n + 3;
        std::vector<uint8_t> x(rows * x_stride);
        for (auto& v : x) v = static_cast<uint8_t>(rng());
        const std::vector<uint8_t> w = random_bytes(k * n, rng), residual = random_bytes(rows * stride, rng);
        U8Panels panels;
        pack_u8_panels(w.data(), n, k, n, 0, panels);
        std::vector<int32_t> add(n);
        std::vector<float> multiplier(n);
        for (size_t j = 0; j < n; ++j) add[j] = static_cast<int32_t>(rng() % 20001) - 10000, multiplier[j] = 0.0002f * static_cast<float>(j + 1);
        const bool is_signed = seed % 2 == 0, with_residual = seed % 3 == 0;
        ColumnRequantize r;
        r.add = add.data(), r.multiplier = multiplier.data(), r.zero_point = is_signed ? 3.0f : 100.0f;
        r.is_signed = is_signed, r.lo = is_signed ? -128.0f : 0.0f, r.hi = is_signed ? 127.0f : 255.0f;
        if (seed % 3 == 1) r.lo = r.zero_point;  // a fused Relu
        r.y_stride = stride;
        r.col_begin = n > 32 && seed % 4 == 0 ? 16 : 0;
        if (with_residual) {
          r.residual = residual.data(), r.residual_stride = stride;
          // The add's a zero point is y's own (as in a QDQ model; the kernels fold it) except
          // every seventh case, which takes the unfolded steps.
          const float a_zero = seed % 7 == 0 ? r.zero_point + 5.0f : r.zero_point;
          r.residual_add = {0.031f, a_zero, 0.017f, is_signed ? 4.0f : 130.0f, 0.042f, is_signed ? 2.0f : 97.0f,
                            r.lo, r.hi, seed % 5 == 0, is_signed};
        }
        std::vector<uint8_t> want(rows * stride, 7);
        r.y = want.data();
        u8s8_gemm_requantize_scalar(x.data(), rows, x_stride, panels, r);
        for (const auto& [name, kernel] : kernels) {
          std::vector<uint8_t> got(rows * stride, 7);
          r.y = got.data();
          kernel(x.data(), rows, x_stride, panels, r);
          ASSERT_EQ(got, want) << name << " rows " << rows << " n " << n << " k " << k << " from column " << r.col_begin;
        }
      }
}

// u8s8_gemm_int32 (MatMulInteger on the 8-bit kernel): sums plus the per-column add, against
// the products of the unpacked bytes, over row and column remainders and column ranges.
TEST(QGemm, Int32OutputIsTheExactSumPlusAdd) {
  std::vector<Isa> isas = {Isa::scalar};
  if (isa_supports_avx512_vnni()) isas.push_back(Isa::avx512);
  unsigned seed = 900;
  for (size_t rows : {1, 13, 14, 15, 30})
    for (size_t n : {1, 16, 17, 33, 64, 100})
      for (size_t k : {4, 12, 100}) {
        std::mt19937 rng(seed++);
        const size_t x_stride = k + 4, c_stride = n + 3;
        const std::vector<uint8_t> x = random_bytes(rows * x_stride, rng), w = random_bytes(k * n, rng);
        U8Panels panels;
        pack_u8_panels(w.data(), n, k, n, 0, panels);
        std::vector<int32_t> add(n);
        for (auto& v : add) v = static_cast<int32_t>(rng() % 200001) - 100000;
        const size_t begin = n > 32 && seed % 2 == 0 ? 32 : 0, end = seed % 3 == 0 ? n - n / 3 : n + 7;
        for (Isa isa : isas) {
          std::vector<int32_t> c(rows * c_stride, -7);
          u8s8_gemm_int32(x.data(), rows, x_stride, panels, add.data(), begin, end, c.data(), c_stride, isa);
          for (size_t t = 0; t < rows; ++t)
            for (size_t j = 0; j < c_stride; ++j) {
              int32_t want = -7;
              if (begin + j < std::min(end, n)) {
                want = add[begin + j];
                for (size_t p = 0; p < k; ++p)
                  want += static_cast<int32_t>(x[t * x_stride + p]) * static_cast<int8_t>(w[p * n + begin + j]);
              }
              ASSERT_EQ(c[t * c_stride + j], want) << isa_name(isa) << " rows " << rows << " n " << n << " k " << k
                                                   << " columns from " << begin << " row " << t << " column " << j;
            }
        }
      }
}

// A column range (a channel tile of QLinearConvNhwc): only W's columns [col_begin, col_end)
// are written, from y's first byte, each equal to the full product's column; nothing else.
TEST(QGemm, ColumnRangeWritesOnlyItsColumns) {
  std::mt19937 rng(77);
  const size_t rows = 29, n = 70, k = 20, stride = n + 5;
  const std::vector<uint8_t> x = random_bytes(rows * k, rng), w = random_bytes(k * n, rng);
  U8Panels panels;
  pack_u8_panels(w.data(), n, k, n, 0, panels);
  std::vector<int32_t> add(n, -300);
  std::vector<float> multiplier(n, 0.002f);
  ColumnRequantize r;
  r.add = add.data(), r.multiplier = multiplier.data(), r.zero_point = 9.0f, r.y_stride = stride;
  std::vector<uint8_t> whole(rows * stride, 0);
  r.y = whole.data();
  u8s8_gemm_requantize(x.data(), rows, k, panels, r, Isa::scalar);
  std::vector<Isa> isas = {Isa::scalar};
  if (isa_supports_avx512_vnni()) isas.push_back(Isa::avx512);
  for (Isa isa : isas)
    for (auto [begin, end] : {std::pair<size_t, size_t>{16, 48}, {32, 70}, {64, 200}, {0, 16}}) {
      std::vector<uint8_t> got(rows * stride, 0xEE);
      r.col_begin = begin, r.col_end = end, r.y = got.data();
      u8s8_gemm_requantize(x.data(), rows, k, panels, r, isa);
      const size_t cols = std::min(end, n) - begin;
      for (size_t t = 0; t < rows; ++t)
        for (size_t j = 0; j < stride; ++j)
          ASSERT_EQ(got[t * stride + j], j < cols ? whole[t * stride + begin + j] : 0xEE)
              << isa_name(isa) << " columns [" << begin << ", " << end << ") row " << t << " byte " << j;
    }
  r.col_begin = 8;
  EXPECT_THROW(u8s8_gemm_requantize(x.data(), rows, k, panels, r, Isa::scalar), Error);
}

// A residual QLinearAdd fused into the epilogue (QLinearConvNhwc after layout_int8): the
// vpdpbusd kernel against the scalar loops, which requantize and then run qadd_scalar on the
// byte; both dtypes, with and without the add's Relu, over a column range.
TEST(QGemm, ResidualAddInTheEpilogueLikeScalar) {
  if (!isa_supports_avx512_vnni()) GTEST_SKIP() << "no AVX512_VNNI";
  std::mt19937 rng(91);
  const size_t rows = 31, n = 50, k = 36, stride = n + 2;
  const std::vector<uint8_t> x = random_bytes(rows * k, rng), w = random_bytes(k * n, rng);
  const std::vector<uint8_t> residual = random_bytes(rows * stride, rng);
  U8Panels panels;
  pack_u8_panels(w.data(), n, k, n, 0, panels);
  std::vector<int32_t> add(n);
  std::vector<float> multiplier(n);
  for (size_t j = 0; j < n; ++j) add[j] = static_cast<int32_t>(rng() % 4001) - 2000, multiplier[j] = 0.0004f * static_cast<float>(j + 1);
  for (bool is_signed : {false, true})
    for (bool relu : {false, true})
      for (size_t begin : {size_t{0}, size_t{16}}) {
        ColumnRequantize r;
        r.add = add.data(), r.multiplier = multiplier.data(), r.zero_point = is_signed ? -3.0f : 110.0f;
        r.is_signed = is_signed, r.lo = is_signed ? -128.0f : 0.0f, r.hi = is_signed ? 127.0f : 255.0f;
        r.y_stride = stride, r.col_begin = begin;
        r.residual = residual.data(), r.residual_stride = stride;
        QAddParams& q = r.residual_add;
        q.a_scale = 0.031f, q.a_zero = r.zero_point, q.b_scale = 0.017f, q.b_zero = is_signed ? 4.0f : 130.0f;
        q.y_scale = 0.042f, q.y_zero = is_signed ? 2.0f : 97.0f, q.lo = r.lo, q.hi = r.hi;
        q.relu = relu, q.is_signed = is_signed;
        std::vector<uint8_t> want(rows * stride, 1), got(rows * stride, 1), plain(rows * stride, 1);
        r.y = want.data();
        u8s8_gemm_requantize(x.data(), rows, k, panels, r, Isa::scalar);
        r.y = got.data();
        u8s8_gemm_requantize(x.data(), rows, k, panels, r, Isa::avx512);
        ASSERT_EQ(got, want) << (is_signed ? "int8" : "uint8") << (relu ? " relu" : "") << " from column " << begin;
        r.residual = nullptr, r.y = plain.data();
        u8s8_gemm_requantize(x.data(), rows, k, panels, r, Isa::avx512);
        EXPECT_NE(plain, want);  // the add changed something
      }
}

// NaN and infinite multipliers (a hostile model's scales) take the epilogue's NaN step, which
// finite ones skip: the kernel still matches the scalar loops, with and without a residual
// add whose scales can make a NaN.
TEST(QGemm, NonFiniteMultipliersRequantizeLikeScalar) {
  if (!isa_supports_avx512_vnni()) GTEST_SKIP() << "no AVX512_VNNI";
  std::mt19937 rng(17);
  const size_t rows = 15, n = 33, k = 8;
  const std::vector<uint8_t> x = random_bytes(rows * k, rng), w = random_bytes(k * n, rng);
  const std::vector<uint8_t> residual = random_bytes(rows * n, rng);
  U8Panels panels;
  pack_u8_panels(w.data(), n, k, n, 0, panels);
  std::vector<int32_t> add(n, 0);
  std::vector<float> multiplier(n, 0.01f);
  multiplier[3] = std::nanf(""), multiplier[17] = INFINITY, multiplier[20] = -INFINITY, multiplier[32] = 3e38f;
  for (bool with_residual : {false, true}) {
    ColumnRequantize r;
    r.add = add.data(), r.multiplier = multiplier.data(), r.zero_point = 7.0f, r.y_stride = n;
    if (with_residual) {
      r.residual = residual.data(), r.residual_stride = n;
      r.residual_add.a_scale = 3e38f, r.residual_add.b_scale = -3e38f, r.residual_add.a_zero = 7.0f;  // inf - inf
    }
    std::vector<uint8_t> want(rows * n), got(rows * n);
    r.y = want.data();
    u8s8_gemm_requantize(x.data(), rows, k, panels, r, Isa::scalar);
    r.y = got.data();
    u8s8_gemm_requantize(x.data(), rows, k, panels, r, Isa::avx512);
    ASSERT_EQ(got, want) << (with_residual ? "with" : "without") << " a residual add";
  }
}

TEST(QGemm, ExtremeBytesDoNotSaturate) {
  // 255 x -128 products summed in fours: vpdpbusds would saturate, vpdpbusd must not.
  for (Isa isa : isas()) check({14, 32, 4096}, false, true, 7, isa);
}

TEST(QGemm, RefusesRowsNotStartingABlock) {
  PackedS8 a;
  U8Panels b;
  std::vector<int8_t> w(40 * 4, 1);
  std::vector<uint8_t> x(16, 1);
  pack_s8(w.data(), 40, 4, 4, a);
  pack_u8_panels(x.data(), 4, 4, 4, 0, b);
  std::vector<int32_t> c(40 * 4);
  EXPECT_THROW(s8u8_gemm(a, {3, 40}, b, c.data(), 4, Isa::scalar), Error);
  EXPECT_THROW(s8u8_gemm(a, {0, 41}, b, c.data(), 4, Isa::scalar), Error);
}

TEST(QGemm, RefusesWithoutVnni) {
  if (isa_supports_avx512_vnni()) GTEST_SKIP() << "this CPU has AVX512_VNNI";
  PackedS8 a;
  U8Panels b;
  std::vector<int8_t> w(16, 1);
  std::vector<uint8_t> x(16, 1);
  pack_s8(w.data(), 4, 4, 4, a);
  pack_u8_panels(x.data(), 4, 4, 4, 0, b);
  std::vector<int32_t> c(16);
  EXPECT_THROW(s8u8_gemm(a, {0, 4}, b, c.data(), 4, Isa::avx512), Error);
}

TEST(QGemm, PrintsThroughput) {
  if (!isa_supports_avx512_vnni()) GTEST_SKIP() << "no AVX512_VNNI";
  const size_t m = 256, n = 196, k = 576;
  std::vector<int8_t> a(m * k, 3);
  std::vector<uint8_t> b(k * n, 5);
  PackedS8 pa;
  pack_s8(a.data(), m, k, k, pa);
  U8Panels pb;
  std::vector<int32_t> c(m * n);
  for (bool pack : {true, false}) {
    std::vector<double> ms;
    pack_u8_panels(b.data(), n, k, n, 0, pb);
    for (int rep = 0; rep < 7; ++rep) {
      auto t0 = std::chrono::steady_clock::now();
      for (int it = 0; it < 20; ++it) {
        if (pack) pack_u8_panels(b.data(), n, k, n, 0, pb);
        s8u8_gemm(pa, {0, m}, pb, c.data(), n, Isa::avx512);
      }
      ms.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count() / 20);
    }
    std::sort(ms.begin(), ms.end());
    std::printf("s8u8 GEMM %zux%zux%zu, %s: %.3f ms, %.0f GOP/s\n", m, n, k,
                pack ? "panels packed each call" : "operands packed", ms[3], 2.0 * m * n * k / ms[3] / 1e6);
  }
}

}  // namespace
}  // namespace grove::kernels
