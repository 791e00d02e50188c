// grove demo (and plain `grove`): run the embedded default model on its embedded sample input
// with the tile runtime on every core, time it next to the barrier schedule and the reference
// executor, and check all three against the stored PyTorch output.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <string_view>

#include "cli/commands.h"
#include "cli/embedded_model.h"
#include "cli/format.h"
#include "cli/summary.h"
#include "npy/npy.h"
#include "onnx/import.h"
#include "runtime/session.h"

namespace grove::cli {

int run_demo() {
  using clock = std::chrono::steady_clock;
  const std::string name = "default.onnx (embedded)";
  const std::string_view bytes(reinterpret_cast<const char*>(embedded_default_model().data()),
                               embedded_default_model().size());
  Model model = model_from_graph(load_onnx_bytes(bytes, name));
  Tensor input = parse_npy(embedded_default_input(), "default_input.npy (embedded)");
  Tensor expected = parse_npy(embedded_default_expected(), "default_expected.npy (embedded)");
  const Graph& imported = imported_graph(model);
  if (imported.inputs.size() != 1 || imported.outputs.size() != 1)
    throw Error(name + ": expected one input and one output");
  const std::string& input_name = imported.inputs[0].name;
  const std::string& output_name = imported.outputs[0].name;

  auto seconds_of = [](auto&& f) {
    auto t0 = clock::now();
    f();
    return std::chrono::duration<double>(clock::now() - t0).count();
  };
  TensorMap feeds{{input_name, input}};
  TensorMap reference;
  double reference_s = seconds_of([&] { reference = model.run_reference(feeds); });

  // The two schedules of the same tiles, warmed up, then timed interleaved (medians) so that
  // noise from the machine hits both alike.
  Engine engine;
  Session aspen(engine, model), barrier(engine, model, {.schedule = Schedule::barrier});
  TensorMap tiled = aspen.run(feeds), tiled_barrier = barrier.run(feeds);
  std::vector<double> aspen_s, barrier_s;
  for (int i = 0; i < 15; ++i) {
    aspen_s.push_back(seconds_of([&] { tiled = aspen.run(feeds); }));
    barrier_s.push_back(seconds_of([&] { tiled_barrier = barrier.run(feeds); }));
  }
  auto median = [](std::vector<double> v) {
    std::nth_element(v.begin(), v.begin() + v.size() / 2, v.end());
    return v[v.size() / 2];
  };
  const Tensor& logits = tiled.at(output_name);

  std::printf("grove demo: a small ResNet-style CNN with random weights (%s parameters), embedded in this binary\n",
              with_commas(imported.parameter_count()).c_str());
  std::printf("input '%s' %s -> output '%s' %s\n", input_name.c_str(), bracket_shape(input.shape()).c_str(),
              output_name.c_str(), bracket_shape(logits.shape()).c_str());
  std::printf("top-5 classes:\n");
  int rank = 1;
  for (const auto& [index, value] : top_k(logits, 5)) std::printf("  %d. class %-5lld %.5f\n", rank++, static_cast<long long>(index), value);
  double a = median(aspen_s), b = median(barrier_s);
  std::printf("latency (median of %zu warm runs, the two schedules interleaved):\n", aspen_s.size());
  std::printf("  %-9s  tile runtime, barrier-free (ASPEN), %d threads\n", milliseconds(a).c_str(), engine.threads());
  std::printf("  %-9s  tile runtime, op by op (barrier), %d threads: barrier-free is %.2fx\n", milliseconds(b).c_str(),
              engine.threads(), b / a);
  std::printf("  %-9s  reference executor (naive, single-threaded; the test oracle)\n", milliseconds(reference_s).c_str());

  // The expected logits come from PyTorch: a mismatch means grove computes something wrong.
  double worst = 0;
  bool ok = true;
  std::vector<double> want = expected.to_f64();
  for (const TensorMap* run : {&tiled, &tiled_barrier, &reference}) {
    const Tensor& out = run->at(output_name);
    if (expected.shape() != out.shape()) throw Error(name + ": output shape differs from PyTorch's");
    std::vector<double> got = out.to_f64();
    for (size_t i = 0; i < got.size(); ++i) {
      double diff = std::fabs(got[i] - want[i]);
      worst = std::max(worst, std::isnan(diff) ? INFINITY : diff);
      if (!(diff <= 1e-4 + 1e-3 * std::fabs(want[i]))) ok = false;
    }
  }
  std::printf("matches PyTorch: %s, all three (max |difference| %.3g)\n", ok ? "yes" : "NO", worst);
  std::printf("next: grove info MODEL.onnx, grove run MODEL.onnx, grove --help\n");
  if (!ok) throw Error(name + ": the output differs from PyTorch's (max |difference| " + strf("%.3g", worst) + ")");
  return 0;
}

}  // namespace grove::cli
