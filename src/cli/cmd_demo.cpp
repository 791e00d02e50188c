// grove demo (and plain `grove`): run the embedded default model on its embedded sample input.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>

#include "cli/commands.h"
#include "cli/embedded_model.h"
#include "cli/format.h"
#include "cli/summary.h"
#include "npy/npy.h"
#include "onnx/import.h"
#include "runtime/model.h"

namespace grove::cli {

int run_demo() {
  using clock = std::chrono::steady_clock;
  const std::string name = "default.onnx (embedded)";
  Model model(load_onnx_bytes(std::string_view(reinterpret_cast<const char*>(embedded_default_model().data()),
                                               embedded_default_model().size()),
                              name));
  Tensor input = parse_npy(embedded_default_input(), "default_input.npy (embedded)");
  Tensor expected = parse_npy(embedded_default_expected(), "default_expected.npy (embedded)");
  const Graph& imported = model.imported();
  if (imported.inputs.size() != 1 || imported.outputs.size() != 1)
    throw Error(name + ": expected one input and one output");
  const std::string& input_name = imported.inputs[0].name;
  const std::string& output_name = imported.outputs[0].name;

  auto t0 = clock::now();
  TensorMap outputs = model.run_reference({{input_name, input}});
  double run_s = std::chrono::duration<double>(clock::now() - t0).count();
  const Tensor& logits = outputs.at(output_name);

  std::printf("grove demo: a small ResNet-style CNN with random weights (%s parameters), embedded in this binary\n",
              with_commas(imported.parameter_count()).c_str());
  std::printf("input '%s' %s -> output '%s' %s\n", input_name.c_str(), bracket_shape(input.shape()).c_str(),
              output_name.c_str(), bracket_shape(logits.shape()).c_str());
  std::printf("top-5 classes:\n");
  int rank = 1;
  for (const auto& [index, value] : top_k(logits, 5)) std::printf("  %d. class %-5lld %.5f\n", rank++, static_cast<long long>(index), value);
  std::printf("latency: %s (reference executor, single-threaded)\n", milliseconds(run_s).c_str());

  // The expected logits come from PyTorch: a mismatch means grove computes something wrong.
  if (expected.shape() != logits.shape()) throw Error(name + ": output shape differs from PyTorch's");
  std::vector<double> got = logits.to_f64(), want = expected.to_f64();
  double worst = 0;
  bool ok = true;
  for (size_t i = 0; i < got.size(); ++i) {
    double diff = std::fabs(got[i] - want[i]);
    worst = std::max(worst, std::isnan(diff) ? INFINITY : diff);
    if (!(diff <= 1e-4 + 1e-3 * std::fabs(want[i]))) ok = false;
  }
  std::printf("matches PyTorch: %s (max |difference| %.3g)\n", ok ? "yes" : "NO", worst);
  std::printf("next: grove info MODEL.onnx, grove run MODEL.onnx, grove --help\n");
  if (!ok) throw Error(name + ": the output differs from PyTorch's (max |difference| " + strf("%.3g", worst) + ")");
  return 0;
}

}  // namespace grove::cli
