#include "cli/embedded_model.h"

// The assembler copies each file's bytes into .rodata with .incbin; the absolute path comes
// from CMake (GROVE_DEFAULT_MODEL_DIR), and CMake's OBJECT_DEPENDS on this file rebuilds it
// when a model file changes. Top-level asm needs no assembler language in CMake.
#define GROVE_INCBIN(symbol, file)                                  \
  asm(".section .rodata\n"                                          \
      ".balign 64\n"                                                \
      ".global " #symbol "_begin\n"                                 \
      ".hidden " #symbol "_begin\n"                                 \
      ".global " #symbol "_end\n"                                   \
      ".hidden " #symbol "_end\n" #symbol "_begin:\n"               \
      ".incbin \"" GROVE_DEFAULT_MODEL_DIR "/" file "\"\n" #symbol "_end:\n" \
      ".byte 0\n"                                                   \
      ".previous\n");                                               \
  extern "C" const std::byte symbol##_begin[];                      \
  extern "C" const std::byte symbol##_end[];

GROVE_INCBIN(grove_default_model, "default.onnx")
GROVE_INCBIN(grove_default_input, "default_input.npy")
GROVE_INCBIN(grove_default_expected, "default_expected.npy")
GROVE_INCBIN(grove_perf_model_avx512, "perf/avx512.perfmodel")
GROVE_INCBIN(grove_perf_model_avx2, "perf/avx2.perfmodel")

namespace grove::cli {

std::span<const std::byte> embedded_default_model() { return {grove_default_model_begin, grove_default_model_end}; }
std::span<const std::byte> embedded_default_input() { return {grove_default_input_begin, grove_default_input_end}; }
std::span<const std::byte> embedded_default_expected() {
  return {grove_default_expected_begin, grove_default_expected_end};
}

std::string_view embedded_perf_model(std::string_view isa) {
  auto text = [](const std::byte* begin, const std::byte* end) {
    return std::string_view(reinterpret_cast<const char*>(begin), static_cast<size_t>(end - begin));
  };
  if (isa == "avx512") return text(grove_perf_model_avx512_begin, grove_perf_model_avx512_end);
  if (isa == "avx2") return text(grove_perf_model_avx2_begin, grove_perf_model_avx2_end);
  return {};
}

}  // namespace grove::cli
