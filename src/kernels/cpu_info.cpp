#include "kernels/cpu_info.h"

#include <cpuid.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <fstream>
#include <string>

#include "kernels/isa.h"

namespace grove::kernels {
namespace {

std::string trimmed(std::string s) {
  const size_t begin = s.find_first_not_of(' ');
  if (begin == std::string::npos) return "";
  return s.substr(begin, s.find_last_not_of(' ') - begin + 1);
}

int64_t sysconf_cache_bytes(int name) {
  const long v = ::sysconf(name);
  return v > 0 ? int64_t(v) : 0;
}

std::string first_line(const std::string& path) {
  std::ifstream in(path);
  std::string line;
  std::getline(in, line);
  return line;
}

// The data or unified cache of `level` as the kernel describes it for CPU 0, 0 where it does
// not. Preferred to sysconf: glibc derives the L3 from cpuid fields that a hypervisor may fill
// in for the host (a KVM guest on Zen 4 whose kernel says 32 MiB got 320 MiB from sysconf).
int64_t sysfs_cache_bytes(int level) {
  for (int index = 0; index < 8; ++index) {
    const std::string dir = "/sys/devices/system/cpu/cpu0/cache/index" + std::to_string(index) + "/";
    const std::string at = first_line(dir + "level");
    if (at.empty()) break;
    if (at != std::to_string(level) || first_line(dir + "type") == "Instruction") continue;
    const std::string size = first_line(dir + "size");
    char* end = nullptr;
    const long long value = std::strtoll(size.c_str(), &end, 10);
    if (value <= 0 || end == size.c_str()) return 0;
    const int64_t unit = *end == 'K' ? 1024 : *end == 'M' ? int64_t{1} << 20 : *end == 'G' ? int64_t{1} << 30 : 1;
    return int64_t(value) * unit;
  }
  return 0;
}

int64_t cache_bytes(int level, int name) {
  const int64_t from_kernel = sysfs_cache_bytes(level);
  return from_kernel > 0 ? from_kernel : sysconf_cache_bytes(name);
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
  info.l1d_bytes = cache_bytes(1, _SC_LEVEL1_DCACHE_SIZE);
  info.l2_bytes = cache_bytes(2, _SC_LEVEL2_CACHE_SIZE);
  info.l3_bytes = cache_bytes(3, _SC_LEVEL3_CACHE_SIZE);
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
