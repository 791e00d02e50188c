#include "cli/int8_model.h"

#include <unistd.h>

#include <filesystem>

#include "cli/inputs.h"
#include "onnx/import.h"
#include "ops/op.h"
#include "quantize/qdq_model.h"

namespace grove::cli {
namespace {

bool is_quantized(const Graph& g) {
  for (const Node& n : g.nodes)
    if (const OpSpec* spec = OpRegistry::builtin().find(n); spec && spec->traits.static_quant) return true;
  return false;
}

// The quantizer writes a file; this one lives only until the graph is read back.
struct TempModel {
  std::filesystem::path path;
  TempModel()
      : path(std::filesystem::temp_directory_path() / ("grove-int8-" + std::to_string(getpid()) + ".onnx")) {}
  ~TempModel() {
    std::error_code ec;
    std::filesystem::remove(path, ec);
  }
};

}  // namespace

Int8Model quantize_for_bench(const std::string& model_path, const Graph& imported, const std::string& calibrate_dir,
                             const TensorMap& bench_inputs, int threads) {
  if (is_quantized(imported))
    throw Error(model_path + ": already quantized (it has QuantizeLinear/DequantizeLinear or integer ops); "
                "bench it with --precision fp32, its integer ops run as they are");
  const std::vector<TensorMap> samples =
      calibrate_dir.empty() ? std::vector<TensorMap>{bench_inputs} : load_sample_dir(imported, calibrate_dir);
  quantize::QuantizeOptions options;
  options.calibration.threads = threads;
  TempModel temp;
  const quantize::QuantizeReport report = quantize::quantize_model(model_path, temp.path.string(), samples, options);
  Int8Model m{load_onnx(temp.path.string()), ""};
  m.graph.path = model_path + " (int8)";
  m.note = std::to_string(report.conv + report.matmul + report.gemm) + " nodes quantized (" +
           std::to_string(report.conv) + " Conv, " + std::to_string(report.matmul) + " MatMul, " +
           std::to_string(report.gemm) + " Gemm; int8 weights " +
           (report.per_channel ? "per output channel" : "per tensor") + ", uint8 activations), calibrated " +
           (calibrate_dir.empty() ? "on the benchmark's input set only (give --calibrate DIR for real samples)"
                                  : "on " + std::to_string(samples.size()) + " samples from " + calibrate_dir);
  if (!report.skipped.empty()) m.note += "; " + std::to_string(report.skipped.size()) + " left in float";
  if (report.conv + report.matmul + report.gemm == 0)
    throw Error(model_path + ": --precision int8 found nothing to quantize (no Conv, MatMul or Gemm with float32 weights)");
  return m;
}

}  // namespace grove::cli
