#pragma once
// Shared by the fuzz targets: the limits every target loads under (small, so one input costs
// milliseconds and a hostile size is an Error, not an out-of-memory kill), and a model runner
// that feeds zeros of the bound input shapes through the tile runtime and the reference.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "graph/limits.h"

namespace grove::fuzz {

Limits fuzz_limits();

// Loads ONNX bytes, binds every symbolic dimension to 1, plans and runs the model once on
// the tile runtime (one worker) and once on the reference executor. grove::Error is the
// expected outcome for bad input and is swallowed; anything else escapes and is a finding.
void load_plan_run(std::string_view onnx_bytes);

// The differential oracle: binds every symbolic dimension to 1, runs the model's optimized
// plan on the tile runtime (`threads` workers) and the reference executor on the graph as
// imported (no pass applied) on the same seeded random inputs, and returns "" when every
// output agrees within 1e-3 of its largest magnitude, else which output differs and how.
// A model either side refuses with grove::Error gives "" (bad input is not a mismatch).
std::string compare_plan_with_reference(std::string_view onnx_bytes, int threads);

}  // namespace grove::fuzz
