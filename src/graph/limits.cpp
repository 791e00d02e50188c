#include "graph/limits.h"

#include <unistd.h>

#include "graph/error.h"

namespace grove {

int64_t default_max_memory() {
  // Half, not all: the declared total is an upper bound on a run's peak, and the process,
  // its packed weights and the rest of the machine need room beside it. Read once: each
  // sysconf here is a syscall, and every run checks its inputs against the limit.
  static const int64_t half = [] {
    const long pages = ::sysconf(_SC_PHYS_PAGES), page = ::sysconf(_SC_PAGESIZE);
    if (pages <= 0 || page <= 0) return int64_t{8} << 30;  // unknown: 8 GiB
    return static_cast<int64_t>(pages) * page / 2;
  }();
  return half;
}

int64_t Limits::memory_limit() const { return max_memory > 0 ? max_memory : default_max_memory(); }

void charge_memory(int64_t& total, int64_t bytes, const Limits& limits, const std::string& what) {
  const int64_t limit = limits.memory_limit();
  if (bytes < 0 || bytes > limit || total > limit - bytes)
    throw Error(what + ": declared tensors need " + std::to_string(bytes) + " more bytes, " +
                std::to_string(total) + " already declared, over the memory limit of " + std::to_string(limit) +
                " bytes (raise it with --max-memory or Limits::max_memory)");
  total += bytes;
}

}  // namespace grove
