#pragma once
// The default model and its sample input, embedded in the executable at build time so that
// `grove demo` works from any directory. Produced by scripts/make_default_model.py.
#include <cstddef>
#include <span>

namespace grove::cli {

std::span<const std::byte> embedded_default_model();     // models/default.onnx
std::span<const std::byte> embedded_default_input();     // models/default_input.npy
std::span<const std::byte> embedded_default_expected();  // models/default_expected.npy (PyTorch's output)

}  // namespace grove::cli
