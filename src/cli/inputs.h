#pragma once
// Where `grove run` gets its inputs: .npy files named with --input, or seeded random data.
#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "passes/bind.h"
#include "runtime/reference_executor.h"

namespace grove::cli {

// Loads each --input NAME=FILE.npy (or FILE.npy when the model has one input), checking its
// dtype and shape against the model's declaration; records each file's shape in `shapes`.
// Errors name the file and the input.
TensorMap load_input_files(const Graph& imported, const std::vector<std::string>& texts, ShapeMap& shapes);

// Seeded random data: floats uniform in [-1, 1); integers in [0, 100), so that token ids and
// indices stay valid for most models; bools 0 or 1. The same seed gives the same tensor
// on every platform (only the standard mt19937_64 bit stream is used).
Tensor random_tensor(DType dtype, const Shape& shape, std::mt19937_64& rng);

// Calibration samples (grove quantize, grove bench --precision int8 --calibrate): for a
// one-input model every *.npy file in `dir` is one sample; otherwise every subdirectory is
// one, holding NAME.npy for each input. Sorted by name. Throws Error naming the directory.
std::vector<TensorMap> load_sample_dir(const Graph& g, const std::string& dir);

}  // namespace grove::cli
