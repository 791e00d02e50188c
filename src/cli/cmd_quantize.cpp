// grove quantize: calibrate a float model on sample inputs and write a QDQ int8 model
// (src/quantize/qdq_model.h says what is quantized and how).
#include <algorithm>
#include <chrono>
#include <cstdio>

#include "cli/commands.h"
#include "cli/options.h"
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

constexpr const char* kQuantizeCommandFooter = R"(
Post-training static quantization. The float model runs on every calibration sample; the
range of each activation that a quantized op reads or writes is recorded; then Conv, MatMul
and Gemm with constant weights get int8 weights (symmetric, per output channel), int32
biases, and uint8 activations (asymmetric, per tensor) through QuantizeLinear /
DequantizeLinear pairs. The result is a standard QDQ model: grove runs it on its integer
kernels, and ONNX Runtime runs it too. A few dozen representative inputs are usually enough.

Example:
  grove quantize resnet50.onnx --calibrate samples/ -o resnet50.int8.onnx
  grove bench resnet50.int8.onnx
docs/quantization.md has the accuracy and speed measured.
)";


CLI::App* add_quantize_command(CLI::App& app, QuantizeCliOptions& o) {
  CLI::App* cmd = app.add_subcommand("quantize", "Quantize a float model to int8 (QDQ) from calibration samples");
  cmd->footer(kQuantizeCommandFooter);
  cmd->add_option("model", o.model, "The float .onnx file")->required();
  cmd->add_option("--calibrate", o.calibrate_dir,
                       "Directory of calibration samples: FILE.npy each (one-input models), or one subdirectory "
                       "per sample holding NAME.npy for every input")
      ->type_name("DIR")
      ->required();
  cmd->add_option("--output,-o", o.output, "Where to write the quantized model")
      ->type_name("FILE")
      ->required();
  cmd->add_option("--method", o.method,
                       "minmax: the full range seen; percentile: clip |x| at --percentile (outliers cost the "
                       "other values resolution)")
      ->capture_default_str()
      ->check(CLI::IsMember({"minmax", "percentile"}));
  cmd->add_option("--percentile", o.percentile, "For --method percentile")
      ->capture_default_str()
      ->check(CLI::Range(50.0, 100.0));
  cmd->add_flag("--per-tensor", o.per_tensor,
                     "One weight scale per tensor instead of one per output channel");
  add_threads_option(cmd, o.threads, "Worker threads for calibration (0: all cores)");
  return cmd;
}

}  // namespace grove::cli
