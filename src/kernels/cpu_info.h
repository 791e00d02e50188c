#pragma once
// What identifies this machine's CPU to a tuning record or a profile dataset: the brand string
// and signature from cpuid, and the cache sizes the C library reads from it. Tuned choices
// are only valid on the CPU they were measured on.
#include <cstdint>
#include <string>

namespace grove::kernels {

struct CpuInfo {
  std::string brand;  // e.g. "AMD EPYC 9R14 96-Core Processor"; "unknown" without cpuid
  int family = 0, model = 0, stepping = 0;
  int64_t l1d_bytes = 0, l2_bytes = 0, l3_bytes = 0;  // 0 where unknown
};

// Read once per process (cpuid is slow on a VM); cheap to call from a tile.
const CpuInfo& cpu_info();

// One line: brand, signature, caches, the active ISA and its extensions. Equal strings mean
// the same kind of CPU running the same kernels.
std::string machine_key();

}  // namespace grove::kernels
