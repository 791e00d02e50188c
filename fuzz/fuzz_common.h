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

// The structure-aware targets' input: a script of choices read a byte at a time (zeros once
// it runs out, so every script builds something).
class Choices {
 public:
  Choices(const uint8_t* data, size_t size) : p_(data), end_(data + size) {}
  uint8_t byte() { return p_ < end_ ? *p_++ : 0; }
  int pick(int n) { return byte() % n; }
  int64_t small(int64_t lo, int64_t hi) { return lo + pick(static_cast<int>(hi - lo + 1)); }
  bool chance() { return (byte() & 1) != 0; }
  bool done() const { return p_ >= end_; }

 private:
  const uint8_t* p_;
  const uint8_t* end_;
};

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
