#pragma once
// The performance models grove ships (models/perf/ISA.perfmodel, docs/tuning.md), embedded in
// the library: what a machine with no model of its own plans with, and what grove tune
// --calibrate fine-tunes on this machine.
#include <string_view>

namespace grove::tune {

// The model text for an ISA ("avx512", "avx2"); empty for an ISA without one.
std::string_view shipped_perf_model(std::string_view isa);
// The layout model (tune/layout_model.h) shipped for an ISA (models/perf/ISA.layoutmodel);
// empty for an ISA without one.
std::string_view shipped_layout_model(std::string_view isa);

}  // namespace grove::tune
