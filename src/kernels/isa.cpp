#include "kernels/isa.h"

#include <cstdlib>
#include <string_view>

#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#endif
#if defined(__linux__)
#include <sys/syscall.h>
#include <unistd.h>
#endif

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

namespace {

// Linux hands out the 8 KiB tile state only to a process that asks for it; without the grant
// the first tile instruction faults.
bool request_tile_state() {
#if defined(__linux__) && defined(SYS_arch_prctl)
  constexpr long kArchReqXcompPerm = 0x1023, kXfeatureXtiledata = 18;
  return syscall(SYS_arch_prctl, kArchReqXcompPerm, kXfeatureXtiledata) == 0;
#else
  return false;
#endif
}

// The tile unit and its state, asked for once; each kind of product is checked apart.
// CPUID leaf 7 EDX: AMX-BF16 bit 22, AMX-TILE bit 24, AMX-INT8 bit 25. Read directly:
// clang 14's __builtin_cpu_supports does not know the AMX names.
// Read once: cpuid traps to the hypervisor on a VM.
bool cpuid_leaf7_edx_bit(int bit) {
  static const unsigned edx = [] {
    unsigned eax = 0, ebx = 0, ecx = 0, d = 0;
#if defined(__x86_64__) || defined(__i386__)
    if (!__get_cpuid_count(7, 0, &eax, &ebx, &ecx, &d)) d = 0;
#endif
    return d;
  }();
  return (edx >> bit) & 1u;
}

bool detect_amx_tiles() {
  if (active_isa() != Isa::avx512 || !cpuid_leaf7_edx_bit(24)) return false;
  if (const char* forced = std::getenv("GROVE_ISA"); forced && std::string_view(forced) != "amx") return false;
  return request_tile_state();
}

bool amx_tiles() {
  static const bool usable = detect_amx_tiles();
  return usable;
}

}  // namespace

bool isa_supports_amx() { return amx_tiles() && cpuid_leaf7_edx_bit(22); }

bool isa_supports_amx_int8() { return amx_tiles() && cpuid_leaf7_edx_bit(25); }

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
