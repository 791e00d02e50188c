// grove quantize: calibrate a float model on sample inputs and write a QDQ int8 model
// (src/quantize/qdq_model.h says what is quantized and how).
#include <algorithm>
#include <chrono>
#include <cstdio>

#include "cli/commands.h"
#include "cli/inputs.h"
#include "onnx/import.h"
#include "quantize/qdq_model.h"

namespace grove::cli {

int run_quantize(const QuantizeCliOptions& options) {
  using Clock = std::chrono::steady_clock;
  const auto start = Clock::now();
  const Graph imported = load_onnx(options.model);
  const std::vector<TensorMap> samples = load_sample_dir(imported, options.calibrate_dir);

  quantize::QuantizeOptions q;
  q.per_channel = !options.per_tensor;
  q.calibration.method =
      options.method == "percentile" ? quantize::CalibrationMethod::percentile : quantize::CalibrationMethod::minmax;
  q.calibration.percentile = options.percentile;
  q.calibration.threads = options.threads;
  std::printf("calibrating on %zu samples (%s)\n", samples.size(),
              options.method == "percentile" ? ("percentile " + std::to_string(options.percentile)).c_str() : "min-max");
  auto progress = [&](size_t done, size_t all) {
    if (done == all || done % 10 == 0) {
      std::printf("  sample %zu/%zu\n", done, all);
      std::fflush(stdout);
    }
  };
  const quantize::QuantizeReport report = quantize::quantize_model(options.model, options.output, samples, q, progress);
  if (report.folded_batchnorms)
    std::printf("folded %d BatchNormalization into the Conv before them\n", report.folded_batchnorms);
  std::printf("quantized %d nodes (%d Conv, %d MatMul, %d Gemm): int8 weights %s, uint8 activations (%d tensors)\n",
              report.conv + report.matmul + report.gemm, report.conv, report.matmul, report.gemm,
              report.per_channel ? "per output channel" : "per tensor", report.activations);
  if (!options.per_tensor && !report.per_channel)
    std::printf("note: the model's opset is below 13, so weights are quantized per tensor\n");
  for (const auto& s : report.skipped) std::printf("left in float: %s\n", s.c_str());
  std::printf("wrote %s in %.1f s\n", options.output.c_str(),
              std::chrono::duration<double>(Clock::now() - start).count());
  return 0;
}

}  // namespace grove::cli
