// Measured FP32 FMA peak: the ceiling the benchmark report's "% of peak" divides by.
//   fma_peak [threads] [seconds]   -> one JSON line: isa, GFLOP/s on 1 thread and on N threads
// Each thread runs independent chains of vector FMAs on registers (no memory traffic): 12
// accumulators cover the FMA latency x ports of current x86 cores. AVX-512 when the CPU has
// it, else AVX2+FMA; the choice is made at run time, so one binary serves both.
// Build: g++ -O2 -std=c++17 -pthread bench/fma_peak.cpp -o fma_peak   (the suite does this)
#include <immintrin.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <thread>
#include <vector>

namespace {

constexpr long kInner = 1 << 16;  // iterations between clock reads

// One body for both ISAs: a template would call the intrinsics through functions compiled
// for another target, which the compiler cannot inline.
#define GROVE_FMA_LOOP(V, FMA, SET1, FLOATS)                                              \
  V a = SET1(0.999999f), b = SET1(1e-7f);                                               \
  V acc[12];                                                                            \
  for (int k = 0; k < 12; ++k) acc[k] = SET1(static_cast<float>(k));                    \
  long iterations = 0;                                                                  \
  auto start = std::chrono::steady_clock::now();                                        \
  double elapsed = 0;                                                                   \
  while (elapsed < seconds) {                                                           \
    for (long i = 0; i < kInner; ++i) {                                                 \
      /* unrolled, so acc[] lives in registers: a loop over it spills to the stack */   \
      _Pragma("GCC unroll 12") for (int k = 0; k < 12; ++k) acc[k] = FMA(acc[k], a, b); \
    }                                                                                   \
    iterations += kInner;                                                               \
    elapsed = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count(); \
  }                                                                                     \
  V sum = acc[0];                                                                       \
  for (int k = 1; k < 12; ++k) sum = FMA(sum, a, acc[k]);                               \
  float sink[FLOATS];                                                                   \
  std::memcpy(sink, &sum, sizeof(V));                                                   \
  if (sink[0] == 12345.f) std::puts(""); /* keeps the chains alive */                  \
  return 2.0 * 12 * FLOATS * static_cast<double>(iterations) / elapsed / 1e9;

__attribute__((target("avx512f"))) double gflops_avx512(double seconds) {
  GROVE_FMA_LOOP(__m512, _mm512_fmadd_ps, _mm512_set1_ps, 16)
}
__attribute__((target("avx2,fma"))) double gflops_avx2(double seconds) {
  GROVE_FMA_LOOP(__m256, _mm256_fmadd_ps, _mm256_set1_ps, 8)
}

double run_threads(int threads, double seconds, double (*one)(double)) {
  std::vector<std::thread> pool;
  std::vector<double> result(threads);
  for (int t = 0; t < threads; ++t) pool.emplace_back([&, t] { result[t] = one(seconds); });
  for (auto& t : pool) t.join();
  double total = 0;
  for (double r : result) total += r;
  return total;
}

}  // namespace

int main(int argc, char** argv) {
  int threads = argc > 1 ? std::atoi(argv[1]) : static_cast<int>(std::thread::hardware_concurrency());
  double seconds = argc > 2 ? std::atof(argv[2]) : 1.0;
  __builtin_cpu_init();
  bool avx512 = __builtin_cpu_supports("avx512f");
  if (!avx512 && !__builtin_cpu_supports("fma")) {
    std::printf("{\"isa\": \"none\", \"error\": \"no FMA unit\"}\n");
    return 1;
  }
  auto one = avx512 ? gflops_avx512 : gflops_avx2;
  double single = run_threads(1, seconds, one);
  double all = run_threads(threads, seconds, one);
  std::printf("{\"isa\": \"%s\", \"threads\": %d, \"gflops_1_thread\": %.2f, \"gflops_n_threads\": %.2f}\n",
              avx512 ? "avx512" : "avx2", threads, single, all);
  return 0;
}
