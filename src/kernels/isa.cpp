#include "kernels/isa.h"

#include <cstdlib>

namespace grove::kernels {

bool isa_supported(Isa isa) {
  switch (isa) {
    case Isa::scalar:
      return true;
    case Isa::avx2:
      return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
    case Isa::avx512:
      // The AVX-512 kernels use F (arithmetic, masks), DQ and BW/VL (mask moves);
      // FMA is implied by F on every CPU that has it, but check to be exact.
      return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512dq") &&
             __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512vl") &&
             __builtin_cpu_supports("fma");
  }
  return false;
}

namespace {

Isa detect_isa() {
  Isa best = Isa::scalar;
  if (isa_supported(Isa::avx2)) best = Isa::avx2;
  if (isa_supported(Isa::avx512)) best = Isa::avx512;
  // The override can only lower the ISA: asking for one the CPU lacks would crash.
  if (const char* forced = std::getenv("GROVE_ISA")) {
    Isa wanted;
    if (parse_isa(forced, wanted) && static_cast<int>(wanted) < static_cast<int>(best)) best = wanted;
  }
  return best;
}

}  // namespace

Isa active_isa() {
  static const Isa chosen = detect_isa();
  return chosen;
}

bool isa_supports_bf16() {
  return active_isa() == Isa::avx512 && __builtin_cpu_supports("avx512bf16");
}

bool isa_supports_avx512_vnni() {
  return active_isa() == Isa::avx512 && __builtin_cpu_supports("avx512vnni");
}

std::string_view isa_name(Isa isa) {
  switch (isa) {
    case Isa::scalar: return "scalar";
    case Isa::avx2: return "avx2";
    case Isa::avx512: return "avx512";
  }
  return "unknown";
}

bool parse_isa(std::string_view text, Isa& out) {
  if (text == "scalar") { out = Isa::scalar; return true; }
  if (text == "avx2") { out = Isa::avx2; return true; }
  if (text == "avx512") { out = Isa::avx512; return true; }
  return false;
}

}  // namespace grove::kernels
