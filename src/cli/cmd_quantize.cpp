// grove quantize: calibrate a float model on sample inputs and write a QDQ int8 model
// (src/quantize/qdq_model.h says what is quantized and how).
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>

#include "cli/commands.h"
#include "cli/inputs.h"
#include "onnx/import.h"
#include "quantize/qdq_model.h"

namespace grove::cli {
namespace {

namespace fs = std::filesystem;

// The samples in `dir`: for a one-input model every *.npy file is one sample; otherwise every
// subdirectory is one, holding NAME.npy for each input. Sorted by name.
std::vector<TensorMap> load_samples(const Graph& g, const std::string& dir) {
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) throw Error("--calibrate " + dir + ": not a directory");
  std::vector<fs::path> entries;
  for (const auto& e : fs::directory_iterator(dir, ec)) entries.push_back(e.path());
  std::sort(entries.begin(), entries.end());
  std::vector<TensorMap> samples;
  for (const auto& path : entries) {
    std::vector<std::string> texts;
    if (fs::is_directory(path)) {
      for (const auto& in : g.inputs) texts.push_back(in.name + "=" + (path / (in.name + ".npy")).string());
    } else if (path.extension() == ".npy") {
      if (g.inputs.size() != 1)
        throw Error("--calibrate " + dir + ": " + g.path + " has " + std::to_string(g.inputs.size()) +
                    " inputs; put each sample in its own subdirectory holding one NAME.npy per input");
      texts.push_back(path.string());
    } else {
      continue;
    }
    ShapeMap shapes;
    samples.push_back(load_input_files(g, texts, shapes));
  }
  if (samples.empty())
    throw Error("--calibrate " + dir + ": no samples (expected .npy files, or one subdirectory per sample)");
  return samples;
}

}  // namespace

int run_quantize(const QuantizeCliOptions& options) {
  using Clock = std::chrono::steady_clock;
  const auto start = Clock::now();
  const Graph imported = load_onnx(options.model);
  const std::vector<TensorMap> samples = load_samples(imported, options.calibrate_dir);

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
