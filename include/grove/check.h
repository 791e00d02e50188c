#pragma once
// grove check as a library call: a session's optimized plan against the reference executor on
// the model as imported (no pass applied), on the same inputs; on a mismatch, the first value
// that differs and the node that makes it (docs/correctness.md).
#include <string>
#include <vector>

#include "grove/session.h"
#include "grove/tensor.h"

namespace grove {

struct OutputCheck {
  std::string name;
  double error = 0;     // max |grove - reference| / max |reference| (floats); the fraction of differing elements (others)
  double largest = 0;   // max |reference|
  bool shape_differs = false;
  bool agrees = true;   // error <= the tolerance
};

struct CheckReport {
  std::vector<OutputCheck> outputs;
  bool agrees = true;
  // On a mismatch, what the search found (value empty when it found none: the error then
  // needs a fused form that exposing a value undoes).
  int values_searched = 0, probes = 0;
  std::string value;              // the first value that differs
  double value_error = 0, value_largest = 0;
  std::string node, op, domain;   // the imported node that makes it
  std::vector<std::string> input_shapes;  // "[1, 3, 224, 224]", "[64] (initializer)", "-" for a missing input
  std::string planned_by;         // "node 'x' (ConvNhwc) in domain grove.internal"; "" when a pass folded it away
};

// Runs `inputs` through the session's plan (its engine and options) and through the reference
// executor on the session's model as imported; `tolerance` is the largest error allowed as a
// fraction of an output's largest magnitude. Each search probe plans and runs the model again.
CheckReport check_session(Session& session, const TensorMap& inputs, double tolerance = 1e-4);

}  // namespace grove
