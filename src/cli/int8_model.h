#pragma once
// grove bench --precision int8: the float model quantized in memory by grove quantize's QDQ
// rewrite (src/quantize/qdq_model.h), calibrated on --calibrate's samples or, without them, on
// the benchmark's own input set. The QDQ graph runs on the integer kernels like any QDQ model.
#include <string>

#include "graph/graph.h"

namespace grove::cli {

struct Int8Model {
  Graph graph;
  std::string note;  // what was quantized and what it was calibrated on, one line
};

// Throws Error for a model that is already quantized or that the quantizer cannot take.
Int8Model quantize_for_bench(const std::string& model_path, const Graph& imported, const std::string& calibrate_dir,
                             const TensorMap& bench_inputs, int threads);

}  // namespace grove::cli
