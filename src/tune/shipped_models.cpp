#include "tune/shipped_models.h"

#include "tune/embed_file.h"

GROVE_EMBED_FILE(grove_perf_model_avx512, "perf/avx512.perfmodel")
GROVE_EMBED_FILE(grove_perf_model_avx2, "perf/avx2.perfmodel")
GROVE_EMBED_FILE(grove_layout_model_avx512, "perf/avx512.layoutmodel")
GROVE_EMBED_FILE(grove_layout_model_avx2, "perf/avx2.layoutmodel")

namespace grove::tune {
namespace {

std::string_view text(const std::byte* begin, const std::byte* end) {
  return std::string_view(reinterpret_cast<const char*>(begin), static_cast<size_t>(end - begin));
}

}  // namespace

std::string_view shipped_perf_model(std::string_view isa) {
  if (isa == "avx512") return text(grove_perf_model_avx512_begin, grove_perf_model_avx512_end);
  if (isa == "avx2") return text(grove_perf_model_avx2_begin, grove_perf_model_avx2_end);
  return {};
}

std::string_view shipped_layout_model(std::string_view isa) {
  if (isa == "avx512") return text(grove_layout_model_avx512_begin, grove_layout_model_avx512_end);
  if (isa == "avx2") return text(grove_layout_model_avx2_begin, grove_layout_model_avx2_end);
  return {};
}

}  // namespace grove::tune
