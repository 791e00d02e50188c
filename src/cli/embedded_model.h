#pragma once
// The default model and its sample input, embedded in the executable at build time so that
// `grove demo` works from any directory. Produced by scripts/make_default_model.py.
#include <cstddef>
#include <span>
#include <string_view>

namespace grove::cli {

std::span<const std::byte> embedded_default_model();     // models/default.onnx
std::span<const std::byte> embedded_default_input();     // models/default_input.npy
std::span<const std::byte> embedded_default_expected();  // models/default_expected.npy (PyTorch's output)

// The performance model shipped for an ISA ("avx512", "avx2"; models/perf/ISA.perfmodel,
// docs/tuning.md), the start grove tune --calibrate fine-tunes on this machine; empty for
// an ISA without one.
std::string_view embedded_perf_model(std::string_view isa);

}  // namespace grove::cli
