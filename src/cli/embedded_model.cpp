#include "cli/embedded_model.h"

#include "tune/embed_file.h"

GROVE_EMBED_FILE(grove_default_model, "default.onnx")
GROVE_EMBED_FILE(grove_default_input, "default_input.npy")
GROVE_EMBED_FILE(grove_default_expected, "default_expected.npy")

namespace grove::cli {

std::span<const std::byte> embedded_default_model() { return {grove_default_model_begin, grove_default_model_end}; }
std::span<const std::byte> embedded_default_input() { return {grove_default_input_begin, grove_default_input_end}; }
std::span<const std::byte> embedded_default_expected() {
  return {grove_default_expected_begin, grove_default_expected_end};
}

}  // namespace grove::cli
