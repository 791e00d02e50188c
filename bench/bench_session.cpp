// End-to-end timing of a model through grove::Session (the tile runtime) at 1 and 2 threads,
// and of the reference executor once, with the GFLOP/s that graph_flops gives.
//
//   grove_bench_session model.onnx [NAME=d0xd1x... ...] [--runs N]
//
// Inputs are seeded random float32 tensors of the declared shapes (symbolic dims need a
// NAME=shape binding). Prints the median wall time of N runs (default 10) after 2 warm-ups,
// and the median process CPU time per run (all threads): on a shared machine the wall time
// includes waiting for a core, the CPU time does not.
#include <algorithm>
#include <chrono>
#include <ctime>
#include <cstdio>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "passes/flops.h"
#include "runtime/session.h"
#include "onnx/import.h"

using namespace grove;

namespace {

Shape parse_shape(const std::string& text) {
  Shape s;
  size_t at = 0;
  while (at <= text.size()) {
    size_t x = text.find('x', at);
    if (x == std::string::npos) x = text.size();
    s.push_back(std::stoll(text.substr(at, x - at)));
    at = x + 1;
  }
  return s;
}

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

double cpu_seconds() {
  timespec t{};
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
  return double(t.tv_sec) + double(t.tv_nsec) * 1e-9;
}

struct Timing {
  double wall_ms, cpu_ms;  // medians
};

template <class F>
Timing median_ms(int warmups, int runs, F&& once) {
  for (int i = 0; i < warmups; ++i) once();
  std::vector<double> wall, cpu;
  for (int i = 0; i < runs; ++i) {
    auto t0 = std::chrono::steady_clock::now();
    double c0 = cpu_seconds();
    once();
    cpu.push_back((cpu_seconds() - c0) * 1e3);
    wall.push_back(seconds_since(t0) * 1e3);
  }
  std::sort(wall.begin(), wall.end());
  std::sort(cpu.begin(), cpu.end());
  return {wall[wall.size() / 2], cpu[cpu.size() / 2]};
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: %s model.onnx [NAME=d0xd1x...] [--runs N]\n", argv[0]);
    return 2;
  }
  try {
    const std::string path = argv[1];
    ShapeMap shapes;
    int runs = 10;
    for (int i = 2; i < argc; ++i) {
      std::string arg = argv[i];
      if (arg == "--runs" && i + 1 < argc) runs = std::max(1, std::atoi(argv[++i]));
      else if (auto eq = arg.find('='); eq != std::string::npos) shapes[arg.substr(0, eq)] = parse_shape(arg.substr(eq + 1));
      else throw Error("unexpected argument '" + arg + "'");
    }
    Graph imported = load_onnx(path);
    TensorMap inputs;
    std::mt19937 rng(1);
    std::uniform_real_distribution<float> dist(-1.f, 1.f);
    for (const ValueDecl& in : imported.inputs) {
      Shape s;
      if (auto it = shapes.find(in.name); it != shapes.end()) s = it->second;
      else
        for (const Dim& d : in.dims) {
          if (d.value < 0) throw Error("input '" + in.name + "' has a symbolic dim: give NAME=shape");
          s.push_back(d.value);
        }
      if (in.dtype != DType::f32) throw Error("input '" + in.name + "' is not float32");
      Tensor t(DType::f32, s);
      for (float& v : t.span<float>()) v = dist(rng);
      inputs[in.name] = t;
      shapes[in.name] = s;
    }

    Model reference = model_from_graph(imported, shapes);
    const double gflop = static_cast<double>(graph_flops(bound_graph(reference))) * 1e-9;
    std::printf("%s: %.3f GFLOP per run\n", path.c_str(), gflop);
    auto t0 = std::chrono::steady_clock::now();
    TensorMap want = reference.run_reference(inputs);
    double ref_ms = seconds_since(t0) * 1e3;
    std::printf("  reference executor (once): %9.2f ms  %7.2f GFLOP/s\n", ref_ms, gflop / ref_ms * 1e3);

    for (int threads : {1, 2}) {
      // The caller only waits, so `threads` is the number of cores running tiles.
      Engine engine({.threads = threads, .caller_works = false});
      Session session(engine, model_from_graph(imported, shapes));
      TensorMap got;
      Timing t = median_ms(2, runs, [&] { got = session.run(inputs); });
      double worst = 0, scale = 1e-30;
      for (const auto& [name, t] : want) {
        const Tensor& g = got.at(name);
        for (int64_t i = 0; i < t.numel(); ++i) {
          worst = std::max(worst, double(std::fabs(g.data<float>()[i] - t.data<float>()[i])));
          scale = std::max(scale, double(std::fabs(t.data<float>()[i])));
        }
      }
      std::printf("  session, %d thread%s:       %9.2f ms  %7.2f GFLOP/s  (cpu %.2f ms/run; max rel. diff to reference %.2e)\n",
                  threads, threads == 1 ? " " : "s", t.wall_ms, gflop / t.wall_ms * 1e3, t.cpu_ms, worst / scale);
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return 1;
  }
  return 0;
}
