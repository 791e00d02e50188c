// Tester for the integer GEMM (kernels/igemm.h): every ISA this CPU has against an int64
// oracle, bit for bit, over odd sizes (every row remainder of the 6-row tile, every column
// remainder of the 16-column panel, odd and even k), uint8 / int8 operands in all four
// pairings, zero points absent, per tensor, per row of A and per column of B, and strides
// wider than a row.
#include <gtest/gtest.h>

#include <chrono>
#include <cstdio>
#include <random>
#include <vector>

#include "kernels/igemm.h"

namespace grove::kernels {
namespace {

struct Operands {
  size_t m, n, k, a_stride, b_stride;
  bool a_signed, b_signed;
  std::vector<uint8_t> a, b;
  std::vector<int32_t> a_zero, b_zero;  // empty: none; 1 entry: per tensor; else per row / column
};

Operands random_operands(size_t m, size_t n, size_t k, bool a_signed, bool b_signed, int zero_form, unsigned seed) {
  std::mt19937 rng(seed);
  std::uniform_int_distribution<int> byte(0, 255);
  Operands o{m, n, k, k + 3, n + 5, a_signed, b_signed, {}, {}, {}, {}};
  o.a.resize(m * o.a_stride);
  o.b.resize(k * o.b_stride);
  for (auto& v : o.a) v = static_cast<uint8_t>(byte(rng));
  for (auto& v : o.b) v = static_cast<uint8_t>(byte(rng));
  auto zero = [&](bool is_signed) { return is_signed ? byte(rng) - 128 : byte(rng); };
  if (zero_form == 1) o.a_zero = {zero(a_signed)}, o.b_zero = {zero(b_signed)};
  if (zero_form == 2) {
    for (size_t i = 0; i < m; ++i) o.a_zero.push_back(zero(a_signed));
    for (size_t j = 0; j < n; ++j) o.b_zero.push_back(zero(b_signed));
  }
  return o;
}

IntGemmCall call_of(const Operands& o, std::vector<int32_t>& c) {
  c.assign(o.m * (o.n + 2), -7);
  IntGemmCall call;
  call.m = o.m, call.n = o.n, call.k = o.k;
  call.a = o.a.data(), call.a_stride = o.a_stride, call.a_signed = o.a_signed;
  call.b = o.b.data(), call.b_stride = o.b_stride, call.b_signed = o.b_signed;
  call.a_zero = o.a_zero.empty() ? nullptr : o.a_zero.data();
  call.a_zero_per_row = o.a_zero.size() > 1;
  call.b_zero = o.b_zero.empty() ? nullptr : o.b_zero.data();
  call.b_zero_per_column = o.b_zero.size() > 1;
  call.c = c.data(), call.c_stride = o.n + 2;
  return call;
}

int64_t oracle(const Operands& o, size_t i, size_t j) {
  auto value = [](uint8_t v, bool is_signed) { return is_signed ? int64_t{static_cast<int8_t>(v)} : int64_t{v}; };
  int64_t za = o.a_zero.empty() ? 0 : o.a_zero[o.a_zero.size() > 1 ? i : 0];
  int64_t zb = o.b_zero.empty() ? 0 : o.b_zero[o.b_zero.size() > 1 ? j : 0];
  int64_t sum = 0;
  for (size_t p = 0; p < o.k; ++p)
    sum += (value(o.a[i * o.a_stride + p], o.a_signed) - za) * (value(o.b[p * o.b_stride + j], o.b_signed) - zb);
  return sum;
}

std::vector<Isa> isas_here() {
  std::vector<Isa> out;
  for (Isa isa : {Isa::scalar, Isa::avx2, Isa::avx512})
    if (isa_supported(isa)) out.push_back(isa);
  return out;
}

TEST(IntGemm, MatchesOracleOverOddSizes) {
  IntGemmScratch scratch;
  unsigned seed = 1;
  for (Isa isa : isas_here())
    // Row counts around the avx2 (6) and avx512 (14) tiles; columns around one and two panels.
    for (size_t m : {1, 2, 5, 6, 7, 13, 14, 15, 29})
      for (size_t n : {1, 3, 15, 16, 17, 32, 33, 40, 64})
        for (size_t k : {1, 2, 7, 64, 129})
          for (int signs = 0; signs < 4; ++signs)
            for (int zero_form = 0; zero_form < 3; ++zero_form) {
              Operands o = random_operands(m, n, k, signs & 1, signs & 2, zero_form, seed++);
              std::vector<int32_t> c;
              int_gemm(call_of(o, c), scratch, isa);
              for (size_t i = 0; i < m; ++i) {
                for (size_t j = 0; j < n; ++j)
                  ASSERT_EQ(c[i * (n + 2) + j], oracle(o, i, j))
                      << isa_name(isa) << " m=" << m << " n=" << n << " k=" << k << " signs=" << signs
                      << " zero_form=" << zero_form << " at " << i << "," << j;
                EXPECT_EQ(c[i * (n + 2) + n], -7) << "wrote past the row";
              }
            }
}

// B handed over as panels (what ConvInteger's im2col writes) gives the same sums.
TEST(IntGemm, PanelsMatchOracle) {
  IntGemmScratch scratch;
  unsigned seed = 500;
  for (Isa isa : isas_here())
    for (size_t m : {1, 6, 11})
      for (size_t n : {1, 16, 33})
        for (size_t k : {1, 8, 27})
          for (int zero_form = 0; zero_form < 3; ++zero_form) {
            Operands o = random_operands(m, n, k, true, false, zero_form, seed++);
            IntPanels panels;
            panels.reset(k, n);
            for (size_t p = 0; p < k; ++p)
              for (size_t j = 0; j < n; ++j) {
                int32_t zb = o.b_zero.empty() ? 0 : o.b_zero[o.b_zero.size() > 1 ? j : 0];
                panels.values[panels.index(p, j)] = static_cast<int16_t>(o.b[p * o.b_stride + j] - zb);
              }
            std::vector<int32_t> c;
            int_gemm_panels(call_of(o, c), panels, scratch, isa);
            for (size_t i = 0; i < m; ++i)
              for (size_t j = 0; j < n; ++j)
                ASSERT_EQ(c[i * (n + 2) + j], oracle(o, i, j)) << isa_name(isa) << " m=" << m << " n=" << n << " k=" << k;
            // A packed ahead (weights packed at plan time), with and without B panels.
            std::vector<int16_t> a_pairs;
            std::vector<int32_t> c2;
            IntGemmCall packed = call_of(o, c2);
            pack_a_pairs(packed, a_pairs);
            packed.a = nullptr, packed.a_zero = nullptr, packed.a_pairs = a_pairs.data();
            int_gemm_panels(packed, panels, scratch, isa);
            EXPECT_EQ(c2, c) << isa_name(isa) << " prepacked A with panels";
            int_gemm(packed, scratch, isa);
            EXPECT_EQ(c2, c) << isa_name(isa) << " prepacked A";
          }
}

// Extreme operands: every product at its largest magnitude (uint8 255 - 0 times int8 -128 - 127).
TEST(IntGemm, ExtremeValuesStayExact) {
  IntGemmScratch scratch;
  for (Isa isa : isas_here()) {
    Operands o = random_operands(7, 19, 301, false, true, 1, 3);
    std::fill(o.a.begin(), o.a.end(), 255);
    std::fill(o.b.begin(), o.b.end(), static_cast<uint8_t>(-128));
    o.a_zero = {0};
    o.b_zero = {127};
    std::vector<int32_t> c;
    int_gemm(call_of(o, c), scratch, isa);
    EXPECT_EQ(c[0], 301 * 255 * -255) << isa_name(isa);
  }
}

// Not a benchmark gate: prints the vector kernel's speed beside the scalar loops' (docs/quantization.md).
TEST(IntGemm, PrintsThroughput) {
  const size_t m = 196, n = 256, k = 576;
  Operands o = random_operands(m, n, k, false, true, 1, 9);
  IntGemmScratch scratch;
  for (Isa isa : isas_here()) {
    std::vector<int32_t> c;
    IntGemmCall call = call_of(o, c);
    std::vector<double> times;
    for (int rep = 0; rep < 7; ++rep) {
      auto t0 = std::chrono::steady_clock::now();
      int_gemm(call, scratch, isa);
      times.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
    }
    std::sort(times.begin(), times.end());
    std::printf("int_gemm %s %zux%zux%zu: median %.3f ms, %.1f GOP/s\n", std::string(isa_name(isa)).c_str(), m, n, k,
                times[3] * 1e3, 2.0 * m * n * k / times[3] * 1e-9);
    // B packed once and A packed once, as for a weight matrix and a prepacked A: the kernel alone.
    IntPanels panels;
    pack_b_panels(call, panels);
    std::vector<int16_t> a_pairs;
    pack_a_pairs(call, a_pairs);
    IntGemmCall packed = call;
    packed.a_pairs = a_pairs.data();
    times.clear();
    for (int rep = 0; rep < 7; ++rep) {
      auto t0 = std::chrono::steady_clock::now();
      int_gemm_panels(packed, panels, scratch, isa);
      times.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
    }
    std::sort(times.begin(), times.end());
    std::printf("int_gemm_panels %s, operands packed: median %.3f ms, %.1f GOP/s\n", std::string(isa_name(isa)).c_str(),
                times[3] * 1e3, 2.0 * m * n * k / times[3] * 1e-9);
  }
}

}  // namespace
}  // namespace grove::kernels
