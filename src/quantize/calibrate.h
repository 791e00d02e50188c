#pragma once
// Calibration for static quantization: run the float model on sample inputs and record the
// range of chosen intermediate tensors (the activations a quantized model will round).
//   minmax      the smallest and largest value seen over all samples
//   percentile  the range clipped at a percentile of |x| (outliers cost the other values
//               their resolution), from a histogram of |x| kept per tensor
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "graph/graph.h"

namespace grove::quantize {

enum class CalibrationMethod { minmax, percentile };

struct CalibrationOptions {
  CalibrationMethod method = CalibrationMethod::minmax;
  double percentile = 99.999;  // of |x|, for CalibrationMethod::percentile
  int threads = 0;             // engine workers; 0: the cores this process may use
};

struct TensorRange {
  float lo = 0, hi = 0;
};

// |x| in `kBins` equal bins over [0, top]; `top` doubles (merging bins pairwise) when a
// larger value arrives, so one pass over the samples suffices.
class AbsHistogram {
 public:
  static constexpr size_t kBins = 2048;
  void add(const float* values, size_t count);
  // The value below which `percentile` percent of the |x| added lie (0 when empty).
  float percentile(double percentile) const;

 private:
  float top_ = 0;
  std::vector<double> counts_ = std::vector<double>(kBins, 0.0);
  double total_ = 0;
};

// Progress: called after each sample with (samples done, samples in all).
using CalibrationProgress = std::function<void(size_t, size_t)>;

// Runs the imported model on every sample (each a full set of its inputs) and returns the
// range of each named float tensor. Throws Error naming a tensor that is not a float value
// of the model, or a sample the model rejects.
std::map<std::string, TensorRange> calibrate(Graph model, const std::vector<std::string>& tensors,
                                             const std::vector<TensorMap>& samples, const CalibrationOptions& options,
                                             const CalibrationProgress& progress = {});

}  // namespace grove::quantize
