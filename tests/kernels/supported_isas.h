#pragma once
// The ISA levels this CPU runs, lowest first: the per-ISA kernel testers run each of them.
#include <vector>

#include "kernels/isa.h"

namespace grove::kernels {

inline std::vector<Isa> supported_isas() {
  std::vector<Isa> isas;
  for (Isa isa : {Isa::scalar, Isa::avx2, Isa::avx512})
    if (isa_supported(isa)) isas.push_back(isa);
  return isas;
}

}  // namespace grove::kernels
