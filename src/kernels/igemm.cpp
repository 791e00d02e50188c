#include "kernels/igemm.h"

#include <string>

#include "graph/error.h"

namespace grove::kernels {

void int_gemm(const IntGemmCall& call, IntGemmScratch& scratch, Isa isa) {
  if (!isa_supported(isa)) throw Error("int_gemm: ISA " + std::string(isa_name(isa)) + " is not supported on this CPU");
  if (call.m == 0 || call.n == 0) return;
  if (isa == Isa::scalar) int_gemm_scalar(call);
  else int_gemm_avx2(call, scratch);
}

}  // namespace grove::kernels
