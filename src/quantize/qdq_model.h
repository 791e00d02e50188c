#pragma once
// `grove quantize`: post-training static quantization of a float ONNX model into a standard
// QDQ model (QuantizeLinear -> DequantizeLinear pairs around the quantized ops), which grove
// runs on its integer kernels and ONNX Runtime can run too (docs/quantization.md).
//
// Quantized: Conv, MatMul and Gemm whose weight (input 1) is a float32 initializer.
//   weights      int8, symmetric (zero point 0), per output channel (per tensor with --per-tensor
//                or below opset 13, where DequantizeLinear has no axis)
//   bias         int32 at scale x_scale * w_scale (zero point 0), for Conv, and Gemm with alpha = beta = 1
//   activations  uint8, asymmetric, one scale per tensor from calibration: each op's input,
//                and its output (after a Relu that is its only consumer) unless that is a graph output
#include <functional>
#include <string>
#include <vector>

#include "quantize/calibrate.h"

namespace grove::quantize {

struct QuantizeOptions {
  CalibrationOptions calibration;
  bool per_channel = true;
};

struct QuantizeReport {
  int conv = 0, matmul = 0, gemm = 0;  // nodes quantized
  int folded_batchnorms = 0;           // Conv -> BatchNormalization pairs folded into the Conv first
  int activations = 0;                 // activation tensors given a QuantizeLinear/DequantizeLinear pair
  bool per_channel = true;             // false when the opset forced per-tensor weights
  std::vector<std::string> skipped;    // "node 'fc' (MatMul): ..." for each candidate left in float
};

// Calibrates on `samples` (each a full set of the model's inputs), writes the QDQ model to
// `out_path`. Throws Error for a model it cannot quantize (external data, opset below 10).
QuantizeReport quantize_model(const std::string& model_path, const std::string& out_path,
                              const std::vector<TensorMap>& samples, const QuantizeOptions& options,
                              const CalibrationProgress& progress = {});

}  // namespace grove::quantize
