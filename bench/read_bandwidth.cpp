// Read bandwidth of this machine at N threads: each thread sums its share of a 512 MiB
// buffer as two interleaved streams with AVX-512 loads (AVX2 where there is none; two streams
// per thread read 5-10% faster than one here). The roofline of a bandwidth-bound decode step
// is the bytes it must read over this. Built and run by bench/generate.py:
//   g++ -O2 -march=native -pthread read_bandwidth.cpp -o read_bandwidth && ./read_bandwidth 2
// Prints one JSON line: threads, read_gb_s (the best of 9 passes: a VM's bandwidth moves with
// its neighbours, and the best is what the memory can give), the median, every pass.
#include <immintrin.h>
#include <sys/mman.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <thread>
#include <vector>

static float sum(const float* p, size_t n) {
#ifdef __AVX512F__
  const float* q = p + n / 2;  // the second stream
  __m512 a = _mm512_setzero_ps(), b = a, c = a, d = a, e = a, f = a, g = a, h = a;
  for (size_t i = 0; i + 64 <= n / 2; i += 64) {
    a = _mm512_add_ps(a, _mm512_load_ps(p + i));
    b = _mm512_add_ps(b, _mm512_load_ps(p + i + 16));
    c = _mm512_add_ps(c, _mm512_load_ps(p + i + 32));
    d = _mm512_add_ps(d, _mm512_load_ps(p + i + 48));
    e = _mm512_add_ps(e, _mm512_load_ps(q + i));
    f = _mm512_add_ps(f, _mm512_load_ps(q + i + 16));
    g = _mm512_add_ps(g, _mm512_load_ps(q + i + 32));
    h = _mm512_add_ps(h, _mm512_load_ps(q + i + 48));
  }
  const __m512 s = _mm512_add_ps(_mm512_add_ps(_mm512_add_ps(a, b), _mm512_add_ps(c, d)),
                                 _mm512_add_ps(_mm512_add_ps(e, f), _mm512_add_ps(g, h)));
  return _mm512_reduce_add_ps(s);
#else
  __m256 a = _mm256_setzero_ps(), b = a, c = a, d = a;
  for (size_t i = 0; i + 32 <= n; i += 32) {
    a = _mm256_add_ps(a, _mm256_load_ps(p + i));
    b = _mm256_add_ps(b, _mm256_load_ps(p + i + 8));
    c = _mm256_add_ps(c, _mm256_load_ps(p + i + 16));
    d = _mm256_add_ps(d, _mm256_load_ps(p + i + 24));
  }
  float out[8];
  _mm256_storeu_ps(out, _mm256_add_ps(_mm256_add_ps(a, b), _mm256_add_ps(c, d)));
  return out[0] + out[1] + out[2] + out[3] + out[4] + out[5] + out[6] + out[7];
#endif
}

int main(int argc, char** argv) {
  const int threads = argc > 1 ? std::max(1, std::atoi(argv[1])) : 1;
  const size_t n = (512u << 20) / sizeof(float);
  // On transparent huge pages where Linux leaves them to the program, as grove's packed
  // weights are (kernels/aligned_buffer.h): the bandwidth the memory gives a stream, without a
  // TLB miss and a prefetcher stop every 4 KiB.
  float* p = static_cast<float*>(std::aligned_alloc(size_t{2} << 20, n * sizeof(float)));
  madvise(p, n * sizeof(float), MADV_HUGEPAGE);
  for (size_t i = 0; i < n; ++i) p[i] = 1e-9f * static_cast<float>(i & 1023);
  std::vector<double> gbs;
  std::vector<float> sink(static_cast<size_t>(threads));
  for (int pass = 0; pass < 9; ++pass) {
    const auto t0 = std::chrono::steady_clock::now();
    std::vector<std::thread> pool;
    for (int t = 0; t < threads; ++t)
      pool.emplace_back([&, t] {
        const size_t share = n / static_cast<size_t>(threads) / 128 * 128;
        sink[static_cast<size_t>(t)] = sum(p + static_cast<size_t>(t) * share, share);
      });
    for (auto& th : pool) th.join();
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    gbs.push_back(static_cast<double>(n * sizeof(float)) / s / 1e9);
  }
  std::vector<double> sorted = gbs;
  std::sort(sorted.begin(), sorted.end());
  std::printf("{\"threads\":%d,\"read_gb_s\":%.2f,\"median_gb_s\":%.2f,\"passes\":[", threads, sorted.back(),
              sorted[sorted.size() / 2]);
  for (size_t i = 0; i < gbs.size(); ++i) std::printf("%s%.2f", i ? "," : "", gbs[i]);
  std::printf("],\"sink\":%g}\n", static_cast<double>(sink[0]));
  std::free(p);
}
