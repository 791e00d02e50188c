#pragma once
// `grove bench --check`: how far a reduced-precision session's outputs are from fp32's on
// the same inputs.
#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "passes/bind.h"
#include "runtime/session.h"

namespace grove::cli {

struct PrecisionCheck {
  int inputs = 0;              // input sets compared
  double max_error = 0;        // max |reduced - fp32| / max |fp32| of that output, over outputs and inputs
  std::string worst_output;    // where max_error was seen
  int64_t rows = 0;            // rows along the last axis of float outputs with >= 2 classes
  int64_t top1_agree = 0;      // rows whose argmax is the same
  int64_t top5_agree = 0;      // rows whose fp32 argmax is among the reduced run's 5 largest
};

// Runs up to `count` input sets through both sessions: `inputs` first, then sets where the
// inputs named in `redraw` (those not loaded from files) are drawn again from `rng`; one set
// when there is nothing to redraw. Float outputs only.
PrecisionCheck check_precision(Session& fp32, Session& reduced, const Graph& imported, const ShapeMap& shapes,
                               TensorMap inputs, const std::vector<std::string>& redraw, int count,
                               std::mt19937_64& rng);

}  // namespace grove::cli
