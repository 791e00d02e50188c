#include "kernels/cpu_info.h"

#include <cpuid.h>
#include <unistd.h>

#include <cstring>

#include "kernels/isa.h"

namespace grove::kernels {
namespace {

std::string trimmed(std::string s) {
  const size_t begin = s.find_first_not_of(' ');
  if (begin == std::string::npos) return "";
  return s.substr(begin, s.find_last_not_of(' ') - begin + 1);
}

int64_t cache_bytes(int name) {
  const long v = ::sysconf(name);
  return v > 0 ? int64_t(v) : 0;
}

CpuInfo probe() {
  CpuInfo info;
  unsigned a = 0, b = 0, c = 0, d = 0;
  if (__get_cpuid(0x80000000u, &a, &b, &c, &d) && a >= 0x80000004u) {
    char brand[49] = {};
    for (unsigned leaf = 0; leaf < 3; ++leaf) {
      unsigned r[4] = {};
      __get_cpuid(0x80000002u + leaf, &r[0], &r[1], &r[2], &r[3]);
      std::memcpy(brand + 16 * leaf, r, 16);
    }
    info.brand = trimmed(brand);
  }
  if (info.brand.empty()) info.brand = "unknown";
  if (__get_cpuid(1, &a, &b, &c, &d)) {
    // The displayed family and model add the extended fields (Intel SDM / AMD APM, CPUID 1).
    const int base_family = int((a >> 8) & 0xf), base_model = int((a >> 4) & 0xf);
    info.family = base_family == 0xf ? base_family + int((a >> 20) & 0xff) : base_family;
    info.model = base_family == 0xf || base_family == 0x6 ? base_model + (int((a >> 16) & 0xf) << 4) : base_model;
    info.stepping = int(a & 0xf);
  }
  info.l1d_bytes = cache_bytes(_SC_LEVEL1_DCACHE_SIZE);
  info.l2_bytes = cache_bytes(_SC_LEVEL2_CACHE_SIZE);
  info.l3_bytes = cache_bytes(_SC_LEVEL3_CACHE_SIZE);
  return info;
}

}  // namespace

// Probed once: on a VM each cpuid traps to the hypervisor, and a trap can cost more than a
// whole tile (docs/kernels.md), while tile rules ask for the cache sizes on every tile.
const CpuInfo& cpu_info() {
  static const CpuInfo info = probe();
  return info;
}

std::string machine_key() {
  const CpuInfo& c = cpu_info();
  std::string key = c.brand + " | family " + std::to_string(c.family) + " model " + std::to_string(c.model) +
                    " stepping " + std::to_string(c.stepping) + " | L1d " + std::to_string(c.l1d_bytes) + " L2 " +
                    std::to_string(c.l2_bytes) + " L3 " + std::to_string(c.l3_bytes) + " | " +
                    std::string(isa_name(active_isa()));
  if (isa_supports_bf16()) key += "+bf16";
  if (isa_supports_avx512_vnni()) key += "+vnni";
  return key;
}

}  // namespace grove::kernels
