// Single-thread SGEMM throughput, grove against oneDNN's dnnl_sgemm (and grove's bf16 GEMMs where the
// CPU has AVX512-BF16 or AMX): square 256..2048, and
// every linear and attention GEMM of BERT-base at S=128 (M=128 rows of tokens).
//
//   build-x/bench/grove_bench_gemm --benchmark_repetitions=5 --benchmark_report_aggregates_only=true
//
// grove's B is packed once outside the timed loop (it is a weight matrix, packed at model
// load); A is packed inside, as on every real call. dnnl_sgemm packs what it wants inside
// every call. After the runs a markdown table of median GFLOP/s and the ratio is printed.
#include <benchmark/benchmark.h>
#include <dnnl.h>

#include <cstdio>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "bench_table.h"
#include "kernels/gemm.h"

namespace {

using namespace grove::kernels;

std::vector<float> random_matrix(size_t count, unsigned seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  std::vector<float> v(count);
  for (float& x : v) x = dist(rng);
  return v;
}

void set_flops(benchmark::State& state, size_t m, size_t n, size_t k) {
  state.counters["GFLOP/s"] = benchmark::Counter(2.0 * double(m) * n * k * state.iterations() / 1e9,
                                                  benchmark::Counter::kIsRate);
}

void run_grove_square(benchmark::State& state, Precision precision) {
  const size_t s = size_t(state.range(0));
  const std::vector<float> a = random_matrix(s * s, 1), b = random_matrix(s * s, 2);
  std::vector<float> c(s * s);
  const PackedB packed = pack_b(b.data(), s, s, s, BLayout::k_by_n, active_isa(), precision);
  GemmScratch scratch;
  GemmCall call;
  call.m = s;
  call.a = a.data();
  call.a_stride = s;
  call.n = s;
  call.c = c.data();
  call.c_stride = s;
  for (auto _ : state) {
    gemm(call, packed, scratch);
    benchmark::ClobberMemory();
  }
  set_flops(state, s, s, s);
  state.SetLabel(gemm_blocking(packed.isa, precision).kernel_name);
}

void BM_grove_sgemm(benchmark::State& state) { run_grove_square(state, Precision::f32); }

// The same GEMM with bf16 operands (A rounded as it is packed, inside the timed loop).
void BM_grove_bf16gemm(benchmark::State& state) { run_grove_square(state, Precision::bf16); }

// bf16 on the AMX tile unit, where the CPU has it.
void BM_grove_amxgemm(benchmark::State& state) { run_grove_square(state, Precision::bf16_amx); }

void BM_dnnl_sgemm(benchmark::State& state) {
  const size_t s = size_t(state.range(0));
  const std::vector<float> a = random_matrix(s * s, 1), b = random_matrix(s * s, 2);
  std::vector<float> c(s * s);
  const dnnl_dim_t d = dnnl_dim_t(s);
  for (auto _ : state) {
    if (dnnl_sgemm('N', 'N', d, d, d, 1.0f, a.data(), d, b.data(), d, 0.0f, c.data(), d) != dnnl_success)
      state.SkipWithError("dnnl_sgemm failed");
    benchmark::ClobberMemory();
  }
  set_flops(state, s, s, s);
}

// grove and oneDNN alternate size by size, so both see the same machine load.
void register_square_sizes() {
  for (int s : {256, 384, 512, 768, 1024, 1536, 2048}) {
    benchmark::RegisterBenchmark("BM_grove_sgemm", BM_grove_sgemm)->Arg(s)->Unit(benchmark::kMillisecond)->MinTime(0.5);
    benchmark::RegisterBenchmark("BM_dnnl_sgemm", BM_dnnl_sgemm)->Arg(s)->Unit(benchmark::kMillisecond)->MinTime(0.5);
    if (precision_supported(Precision::bf16, active_isa()))
      benchmark::RegisterBenchmark("BM_grove_bf16gemm", BM_grove_bf16gemm)->Arg(s)->Unit(benchmark::kMillisecond)->MinTime(0.5);
    if (precision_supported(Precision::bf16_amx, active_isa()))
      benchmark::RegisterBenchmark("BM_grove_amxgemm", BM_grove_amxgemm)->Arg(s)->Unit(benchmark::kMillisecond)->MinTime(0.5);
  }
}

// ---- BERT-base, S=128: args (M, N, K, B is an activation packed per call).

void BM_grove_bert(benchmark::State& state) {
  const auto m = size_t(state.range(0)), n = size_t(state.range(1)), k = size_t(state.range(2));
  const bool pack_each_call = state.range(3) != 0;  // attention: K^T and V change every call
  const std::vector<float> a = random_matrix(m * k, 1), b = random_matrix(k * n, 2);
  std::vector<float> c(m * n);
  PackedB packed = pack_b(b.data(), k, n, n, BLayout::k_by_n);
  GemmScratch scratch;
  GemmCall call;
  call.m = m;
  call.a = a.data();
  call.a_stride = k;
  call.n = n;
  call.c = c.data();
  call.c_stride = n;
  for (auto _ : state) {
    if (pack_each_call) pack_b_into(packed, b.data(), k, n, n, BLayout::k_by_n);
    gemm(call, packed, scratch);
    benchmark::ClobberMemory();
  }
  set_flops(state, m, n, k);
}

void BM_dnnl_bert(benchmark::State& state) {
  const auto m = dnnl_dim_t(state.range(0)), n = dnnl_dim_t(state.range(1)), k = dnnl_dim_t(state.range(2));
  const std::vector<float> a = random_matrix(size_t(m * k), 1), b = random_matrix(size_t(k * n), 2);
  std::vector<float> c(size_t(m * n));
  for (auto _ : state) {
    if (dnnl_sgemm('N', 'N', m, n, k, 1.0f, a.data(), k, b.data(), n, 0.0f, c.data(), n) != dnnl_success)
      state.SkipWithError("dnnl_sgemm failed");
    benchmark::ClobberMemory();
  }
  set_flops(state, size_t(m), size_t(n), size_t(k));
}

struct BertShape {
  const char* what;
  int64_t m, n, k, activation_b;
};
constexpr BertShape kBertShapes[] = {
    {"Q/K/V/out projection", 128, 768, 768, 0},
    {"FFN up", 128, 3072, 768, 0},
    {"FFN down", 128, 768, 3072, 0},
    {"attention Q.K^T (per head)", 128, 128, 64, 1},
    {"attention P.V (per head)", 128, 64, 128, 1},
};

void register_bert_shapes() {
  for (const BertShape& s : kBertShapes) {
    benchmark::RegisterBenchmark("BM_grove_bert", BM_grove_bert)->Args({s.m, s.n, s.k, s.activation_b})->MinTime(0.2);
    benchmark::RegisterBenchmark("BM_dnnl_bert", BM_dnnl_bert)->Args({s.m, s.n, s.k, s.activation_b})->MinTime(0.2);
  }
}

}  // namespace

int main(int argc, char** argv) {
  register_square_sizes();
  register_bert_shapes();
  grove::bench::TableReporter reporter;
  if (!grove::bench::run_benchmarks(argc, argv, reporter)) return 1;

  std::printf("\n| M=N=K | grove GFLOP/s | oneDNN GFLOP/s | grove/oneDNN | grove bf16 GFLOP/s | bf16/fp32 |"
              " grove AMX bf16 GFLOP/s | AMX/fp32 |\n|---:|---:|---:|---:|---:|---:|---:|---:|\n");
  std::map<int, std::map<std::string, double>> by_size;
  for (auto& [size, row] : reporter.gflops)
    if (size.find('/') == std::string::npos) by_size[std::stoi(size)] = row;
  for (auto& [size, row] : by_size) {
    const double grove = row["BM_grove_sgemm"], dnnl = row["BM_dnnl_sgemm"], bf16 = row["BM_grove_bf16gemm"],
                 amx = row["BM_grove_amxgemm"];
    std::printf("| %d | %.1f | %.1f | %.2f | %.1f | %.2f | %.1f | %.2f |\n", size, grove, dnnl, dnnl > 0 ? grove / dnnl : 0.0,
                bf16, grove > 0 ? bf16 / grove : 0.0, amx, grove > 0 ? amx / grove : 0.0);
  }
  std::printf("\n| BERT-base S=128 | M x N x K | grove GFLOP/s | oneDNN GFLOP/s | grove/oneDNN |\n|---|---|---:|---:|---:|\n");
  for (const BertShape& s : kBertShapes) {
    const std::string key = std::to_string(s.m) + "/" + std::to_string(s.n) + "/" + std::to_string(s.k) + "/" +
                            std::to_string(s.activation_b);
    auto& row = reporter.gflops[key];
    const double grove = row["BM_grove_bert"], dnnl = row["BM_dnnl_bert"];
    std::printf("| %s | %lldx%lldx%lld | %.1f | %.1f | %.2f |\n", s.what, (long long)s.m, (long long)s.n, (long long)s.k,
                grove, dnnl, dnnl > 0 ? grove / dnnl : 0.0);
  }
  return 0;
}
